//! Reading `go tool pprof -top` output, for the tests that check cabprof's pprof files and
//! served windows with the real reader.

use std::collections::BTreeMap;

/// The rows of `go tool pprof -top` output: function name -> (flat, cum). Values may carry a
/// unit (`120ns`, `4096B`) when pprof was not asked for whole units; it is dropped. Panics,
/// showing the output, if there is no table or a value is not a number.
pub(crate) fn top_rows(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut rows = BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() == Some(&"flat") {
            in_table = true;
            continue;
        }
        if in_table && fields.len() >= 6 {
            let number = |s: &str| -> u64 {
                s.trim_end_matches(|c: char| c.is_alphabetic())
                    .parse()
                    .unwrap_or_else(|_| panic!("a number: {s} in\n{text}"))
            };
            rows.insert(
                fields[5..].join(" "),
                (number(fields[0]), number(fields[3])),
            );
        }
    }
    assert!(in_table, "no table in go tool pprof's output:\n{text}");
    rows
}
