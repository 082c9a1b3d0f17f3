//! The JSON rendering: the data model as is (schema in the [`report`](super) module docs),
//! indented two spaces per level.

use crate::model::ReportData;

impl ReportData {
    /// Pretty-printed JSON; [`from_json`](Self::from_json) reads it back.
    pub fn json(&self) -> String {
        indent(&miniserde::json::to_string(self))
    }
}

/// Lay out compact JSON (as `miniserde` writes it) one member or element per line, two spaces
/// per level, `": "` after each key; `[]` and `{}` stay as they are. Only the layout changes:
/// the text of every string and number is copied as it was.
fn indent(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = compact.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', 2 * depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.push(chars.next().expect("peeked"));
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::indent;

    #[test]
    fn indent_lays_out_and_leaves_strings_alone() {
        let compact = r#"{"a":[1,2],"b":{},"c":"x,{\"y\":[]}","d":[]}"#;
        let expected = "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \
                        \"c\": \"x,{\\\"y\\\":[]}\",\n  \"d\": []\n}";
        assert_eq!(indent(compact), expected);
    }
}
