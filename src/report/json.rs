//! The JSON rendering: the data model as is (schema in the [`report`](super) module docs),
//! indented two spaces per level.
//!
//! The text is laid out while `miniserde`'s serialization is walked, straight into a string
//! of the exact size (measured by a first walk): no compact copy, no spare capacity. A
//! 100,000-context report is tens of megabytes of JSON; making it costs that and nothing more.
//! [`write_json`](ReportData::write_json) streams the same text to a writer (a file), without
//! holding it.

use crate::model::ReportData;
use miniserde::ser::{Fragment, Serialize};
use std::io::Write as _;

impl ReportData {
    /// Pretty-printed JSON; [`from_json`](Self::from_json) reads it back.
    pub fn json(&self) -> String {
        let mut size = Size(0);
        pretty(self, 0, &mut size);
        let mut out = String::with_capacity(size.0);
        pretty(self, 0, &mut out);
        debug_assert_eq!(out.len(), size.0);
        out
    }

    /// Write the text of [`json`](Self::json) to `out` as it is laid out, through a buffer
    /// of its own, without holding the whole text: the memory a report file takes to write
    /// does not grow with the report. Returns the first error `out` gave.
    pub fn write_json(&self, out: impl std::io::Write) -> std::io::Result<()> {
        let mut w = IoText {
            out: std::io::BufWriter::with_capacity(64 << 10, out),
            error: None,
        };
        pretty(self, 0, &mut w);
        match w.error {
            Some(e) => Err(e),
            None => w.out.flush(),
        }
    }
}

/// Text written to an [`std::io::Write`], keeping its first error (later writes are skipped).
struct IoText<W: std::io::Write> {
    out: std::io::BufWriter<W>,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> std::fmt::Write for IoText<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        self.out.write_all(s.as_bytes()).map_err(|e| {
            self.error = Some(e);
            std::fmt::Error
        })
    }
}

/// Counts the bytes written to it.
struct Size(usize);

impl std::fmt::Write for Size {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// Write `value` one member or element per line, two spaces per level (`depth` levels in
/// already), `": "` after each key; `[]` and `{}` stay as they are. Strings and numbers are
/// written as `miniserde::json::to_string` writes them.
fn pretty(value: &dyn Serialize, depth: usize, out: &mut impl std::fmt::Write) {
    let newline = |out: &mut dyn std::fmt::Write, depth: usize| {
        let _ = out.write_char('\n');
        for _ in 0..depth {
            let _ = out.write_str("  ");
        }
    };
    match value.begin() {
        Fragment::Seq(mut seq) => {
            let Some(first) = seq.next() else {
                let _ = out.write_str("[]");
                return;
            };
            let _ = out.write_char('[');
            newline(out, depth + 1);
            pretty(first, depth + 1, out);
            while let Some(next) = seq.next() {
                let _ = out.write_char(',');
                newline(out, depth + 1);
                pretty(next, depth + 1, out);
            }
            newline(out, depth);
            let _ = out.write_char(']');
        }
        Fragment::Map(mut map) => {
            let Some((key, first)) = map.next() else {
                let _ = out.write_str("{}");
                return;
            };
            let _ = out.write_char('{');
            newline(out, depth + 1);
            string(&key, out);
            let _ = out.write_str(": ");
            pretty(first, depth + 1, out);
            while let Some((key, next)) = map.next() {
                let _ = out.write_char(',');
                newline(out, depth + 1);
                string(&key, out);
                let _ = out.write_str(": ");
                pretty(next, depth + 1, out);
            }
            newline(out, depth);
            let _ = out.write_char('}');
        }
        Fragment::Null => {
            let _ = out.write_str("null");
        }
        Fragment::Bool(b) => {
            let _ = out.write_str(if b { "true" } else { "false" });
        }
        // Integers print the same digits as miniserde's (`itoa`).
        Fragment::U64(n) => {
            let _ = write!(out, "{n}");
        }
        Fragment::I64(n) => {
            let _ = write!(out, "{n}");
        }
        Fragment::Str(s) => string(&s, out),
        // Floats: miniserde's own shortest round-trip text (and `null` for NaN and infinities).
        Fragment::F64(x) => {
            let _ = out.write_str(&miniserde::json::to_string(&x));
        }
    }
}

/// A JSON string: quoted as is when nothing in it needs escaping, else escaped by miniserde.
fn string(s: &str, out: &mut impl std::fmt::Write) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        let _ = out.write_char('"');
        let _ = out.write_str(s);
        let _ = out.write_char('"');
    } else {
        let _ = out.write_str(&miniserde::json::to_string(s));
    }
}

#[cfg(test)]
mod tests {
    use super::pretty;
    use crate::model::{
        AllocContextEntry, AllocationsData, CallTreeData, CompensationEntry, ContextEntry,
        ContextTimeEntry, DuringSession, MethodEntry, ReportData, Spread, TimeData,
    };

    /// The layout [`pretty`] makes, from compact JSON (as `miniserde` writes it): the
    /// reference it is checked against.
    fn indent(compact: &str) -> String {
        let mut out = String::new();
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

    fn method(id: u32, name: &str) -> MethodEntry {
        MethodEntry {
            id,
            name: name.into(),
            module: "a::b".into(),
            file: "src/x \"y\".rs".into(),
            line: id,
        }
    }

    #[test]
    fn indent_lays_out_and_leaves_strings_alone() {
        let compact = r#"{"a":[1,2],"b":{},"c":"x,{\"y\":[]}","d":[]}"#;
        let expected = "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \
                        \"c\": \"x,{\\\"y\\\":[]}\",\n  \"d\": []\n}";
        assert_eq!(indent(compact), expected);
    }

    /// The report's JSON is miniserde's compact text laid out: the same strings (escaped or
    /// not), numbers (integers, negative, floats, NaN as null), nulls and empty containers.
    /// Long: a report that holds every kind of value.
    #[test]
    fn json_is_the_compact_text_laid_out() {
        let d = ReportData {
            schema: crate::report::SCHEMA.into(),
            methods: vec![
                method(1, "plain"),
                method(2, "new\nline, {brace}: \"quote\" back\\slash \u{1} tab\t"),
                method(3, "ünïcødé ☃"),
            ],
            call_tree: Some(CallTreeData {
                approximate: true,
                patterns: Vec::new(),
                contexts: vec![
                    ContextEntry {
                        id: 1,
                        parent: 0,
                        method: 1,
                        count: u64::MAX,
                        estimated: Some(7),
                    },
                    ContextEntry {
                        id: 2,
                        parent: 1,
                        method: 2,
                        count: 0,
                        estimated: None,
                    },
                ],
                overlong: None,
            }),
            time: Some(TimeData {
                clock: "rdtsc".into(),
                ticks_per_ns: 2.899_999_9,
                calibration: String::new(),
                sample_period: 1,
                approximate: false,
                functions: Vec::new(),
                edges: Vec::new(),
                contexts: vec![ContextTimeEntry {
                    id: 1,
                    parent: 0,
                    method: 1,
                    calls: 3,
                    timed: 3,
                    inclusive_ns: 1e-7,
                    exclusive_ns: f64::NAN,
                    raw_inclusive_ns: Some(2.5),
                    raw_exclusive_ns: None,
                    exclusive_clipped: Some(true),
                    below_resolution: Some(false),
                }],
                compensation: Some(CompensationEntry {
                    clock_ns: 6.5,
                    inside_ns: 1.25,
                    timed_ns: 20.0,
                    untimed_ns: 4.0,
                    poll_ns: Some(7.5),
                    resolution_ns: 0.5,
                    timed_ns_at_finish: None,
                    inside_ns_at_finish: Some(1.0),
                    during: Some(DuringSession {
                        probes: 3,
                        words: 1923,
                        timed_ns: Spread {
                            min: 19.0,
                            median: 20.5,
                            max: 31.25,
                        },
                        untimed_ns: Spread {
                            min: 3.0,
                            median: 4.0,
                            max: 5.0,
                        },
                        inside_ns: Spread {
                            min: 1.0,
                            median: 1.25,
                            max: 2.0,
                        },
                    }),
                }),
                inside_cabprof_ns: Some(0.0),
                inside_cabprof_entries: None,
                show_raw: Some(false),
                tick_ns: None,
            }),
            allocations: Some(AllocationsData {
                live_bytes: -12,
                peak_bytes: i64::MAX,
                contexts: vec![AllocContextEntry {
                    id: 1,
                    parent: 0,
                    method: 3,
                    calls: 1,
                    counts: Default::default(),
                    live: Some(crate::model::LiveEntry {
                        blocks: 2,
                        bytes: 48,
                    }),
                }],
                ..AllocationsData::default()
            }),
            ..ReportData::default()
        };
        let reference = indent(&miniserde::json::to_string(&d));
        let mut laid_out = String::new();
        pretty(&d, 0, &mut laid_out);
        assert_eq!(laid_out, reference);
        assert_eq!(d.json(), reference);
        let mut written = Vec::new();
        d.write_json(&mut written).unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), reference);
    }

    /// A writer's error comes back, and the writing stops there.
    #[test]
    fn write_json_returns_the_writers_error() {
        /// Takes `room` bytes, then fails.
        struct Full {
            room: usize,
            tries: usize,
        }
        impl std::io::Write for Full {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.tries += 1;
                if self.room == 0 {
                    return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "full"));
                }
                let n = buf.len().min(self.room);
                self.room -= n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let d = ReportData {
            methods: (1..5000).map(|i| method(i, "m")).collect(),
            ..ReportData::default()
        };
        let mut full = Full {
            room: 1000,
            tries: 0,
        };
        let e = d.write_json(&mut full).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
        assert!(full.tries <= 3, "{} writes after the error", full.tries);
        let mut room = Full {
            room: usize::MAX,
            tries: 0,
        };
        d.write_json(&mut room).unwrap();
    }
}
