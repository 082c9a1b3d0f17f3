//! Every `CABPROF_*` variable, declared once: [`SETTINGS`], `CABPROF`, then the runtime's
//! ([`cabprof_cab::runtime::SETTINGS`]), then the facade's own. The parsers read these
//! names (a test asks [`SessionBuilder::from_vars`](crate::SessionBuilder::from_vars) which
//! names it looks up and compares them with the table), and docs/REFERENCE.md's table of
//! variables is checked against it row by row, so the three cannot drift apart.

use cabprof_cab::runtime::SETTINGS as RUNTIME;
pub use cabprof_cab::Setting;

/// `CABPROF`: the variable that starts the process-wide session.
pub(crate) const PROCESS: Setting = Setting {
    name: cabprof_cab::runtime::PROCESS_VAR,
    values: "1 (on) | unset or 0 (off)",
    builder: "",
    meaning: "profile the whole run, report at exit",
};

/// `CABPROF_SIGNALS`, read by the process-wide session only.
pub(crate) const SIGNALS: Setting = Setting {
    name: "CABPROF_SIGNALS",
    values: "0 | 1 (default 1)",
    builder: "",
    meaning: "with CABPROF=1: 0 leaves SIGINT, SIGTERM and SIGHUP to the program",
};

/// The facade's variables, after `CABPROF` and the runtime's in [`SETTINGS`].
const FACADE: &[Setting] = &[
    Setting {
        name: "CABPROF_ANALYSES",
        values: crate::analysis::ANALYSES_HELP,
        builder: "analyses",
        meaning: "the analyses to run, replacing the default set",
    },
    Setting {
        name: "CABPROF_TIME_SAMPLE",
        values: "1..=1048576 (default 1: every call)",
        builder: "time_sample",
        meaning: "time one call in K per function and thread",
    },
    Setting {
        name: "CABPROF_TIMELINE_SLICES",
        values: "1..=16777216 (default 131072)",
        builder: "timeline_slices",
        meaning: "slices the timeline keeps per thread, the latest",
    },
    Setting {
        name: "CABPROF_TIMELINE_TRIGGER",
        values: "NAME:DURATION (parse:50ms; unset: none)",
        builder: "timeline_trigger",
        meaning: "a call this long writes the timeline around it",
    },
    Setting {
        name: "CABPROF_TIME_RAW",
        values: "0 | 1 (default 0)",
        builder: "time_raw",
        meaning: "the text report shows uncompensated times too",
    },
    Setting {
        name: "CABPROF_OUTPUT",
        values: "a non-empty path",
        builder: "output",
        meaning: "where the JSON report is written",
    },
    SIGNALS,
    Setting {
        name: "CABPROF_SERVE",
        values: "HOST:PORT (port 0 picks a free one)",
        builder: "serve",
        meaning: "serve live profiles over HTTP (feature `serve`)",
    },
    Setting {
        name: "CABPROF_SERVE_PUBLIC",
        values: "0 | 1 (default 0)",
        builder: "serve_public",
        meaning: "allow an address that is not loopback",
    },
    Setting {
        name: "CABPROF_SERVICE",
        values: "a name (default: the executable's)",
        builder: "service_name",
        meaning: "the service_name label of served profiles",
    },
];

const LEN: usize = 1 + RUNTIME.len() + FACADE.len();

/// `CABPROF`, the runtime's table and the facade's, in one array joined at compile time.
const JOINED: [Setting; LEN] = {
    let mut out = [PROCESS; LEN];
    let mut i = 0;
    while i < RUNTIME.len() {
        out[1 + i] = RUNTIME[i];
        i += 1;
    }
    let mut j = 0;
    while j < FACADE.len() {
        out[1 + RUNTIME.len() + j] = FACADE[j];
        j += 1;
    }
    out
};

/// Every `CABPROF_*` environment variable cabprof reads, with the values it accepts and the
/// [`SessionBuilder`](crate::SessionBuilder) function that sets the same thing
/// ([`SessionBuilder::from_env`](crate::SessionBuilder::from_env) reads all but `CABPROF` and
/// `CABPROF_SIGNALS`, which are the process-wide session's). A bad value is an error naming
/// the variable and what it allows.
pub const SETTINGS: &[Setting] = &JOINED;

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    /// What `SessionBuilder::from_vars` looks up is the table, less the two variables only the
    /// process-wide session reads: a variable parsed but not declared, or declared but never
    /// read, fails here.
    #[test]
    fn the_builder_reads_exactly_the_declared_variables() {
        let asked = RefCell::new(BTreeSet::new());
        crate::SessionBuilder::new()
            .from_vars(|k| {
                asked.borrow_mut().insert(k.to_string());
                None
            })
            .unwrap();
        // Built without `serve`, only `CABPROF_SERVE` is read, to refuse it by name.
        let without_serve = ["CABPROF_SERVE_PUBLIC", "CABPROF_SERVICE"];
        let declared: BTreeSet<String> = SETTINGS
            .iter()
            .map(|s| s.name.to_string())
            .filter(|n| n != PROCESS.name && n != SIGNALS.name)
            .filter(|n| cfg!(feature = "serve") || !without_serve.contains(&n.as_str()))
            .collect();
        assert_eq!(asked.into_inner(), declared);
    }

    /// Every variable the builder reads refuses a bad value with an error naming it: the
    /// table's rows and the parsers' checks go together. A row added without a case here fails.
    #[test]
    fn each_declared_variable_refuses_a_bad_value_by_name() {
        let bad: &[(&str, &str)] = &[
            ("CABPROF_MODE", "fast"),
            ("CABPROF_RATE", "1.5"),
            ("CABPROF_BURST", "0"),
            ("CABPROF_ADAPTIVE", "2"),
            ("CABPROF_BUFFER", "12Q"),
            ("CABPROF_BUFFER_START", "small"),
            ("CABPROF_CHUNK", "-4"),
            ("CABPROF_RING_MEMORY", "lots"),
            ("CABPROF_ANALYZERS", "65"),
            ("CABPROF_PIN", "maybe"),
            ("CABPROF_HUGE_PAGES", "big"),
            ("CABPROF_BUFFER_DESIGN", "ring"),
            ("CABPROF_ANALYSES", "bogus"),
            ("CABPROF_TIME_SAMPLE", "-1"),
            ("CABPROF_TIMELINE_SLICES", "0"),
            ("CABPROF_TIMELINE_TRIGGER", "parse"),
            ("CABPROF_TIME_RAW", "2"),
            ("CABPROF_OUTPUT", ""),
            ("CABPROF_SERVE_PUBLIC", "maybe"),
        ];
        // Any value is accepted, or checked elsewhere: `CABPROF` and `CABPROF_SIGNALS` are the
        // process-wide session's, an address is checked by binding it at start, a name is a name.
        let unchecked = [
            PROCESS.name,
            SIGNALS.name,
            "CABPROF_SERVE",
            "CABPROF_SERVICE",
        ];
        for setting in SETTINGS.iter().filter(|s| !unchecked.contains(&s.name)) {
            if !cfg!(feature = "serve") && setting.name == "CABPROF_SERVE_PUBLIC" {
                continue;
            }
            let value = bad
                .iter()
                .find(|(n, _)| *n == setting.name)
                .unwrap_or_else(|| panic!("{}: no bad value to try here", setting.name))
                .1;
            let err = crate::SessionBuilder::new()
                .from_vars(|k| (k == setting.name).then(|| value.to_string()))
                .and_then(|b| b.validate().map(|()| b))
                .expect_err(setting.name);
            assert!(err.field.contains(setting.name), "{}: {err}", setting.name);
        }
    }

    #[test]
    fn each_variable_is_declared_once_and_the_runtime_after_cabprof() {
        let names: BTreeSet<&str> = SETTINGS.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SETTINGS.len(), "a variable declared twice");
        assert_eq!(SETTINGS[0], PROCESS);
        assert_eq!(&SETTINGS[1..=RUNTIME.len()], RUNTIME);
        assert!(SETTINGS.iter().all(|s| s.name.starts_with("CABPROF")));
    }

    /// docs/REFERENCE.md's table of variables says what the table says: the same variables,
    /// in the same order, each with its values and builder function.
    #[test]
    fn the_reference_table_lists_the_declared_settings() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REFERENCE.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let rows: Vec<Vec<String>> = doc
            .lines()
            .filter(|l| l.starts_with("| `CABPROF"))
            .map(|l| {
                l.trim_matches('|')
                    .split(" | ")
                    .map(|c| c.trim().trim_matches('`').to_string())
                    .collect()
            })
            .collect();
        let expected: Vec<Vec<String>> = SETTINGS.iter().map(reference_row).collect();
        assert_eq!(
            rows,
            expected,
            "docs/REFERENCE.md's table of variables differs from cabprof::SETTINGS; its rows \
             should read:\n{}",
            SETTINGS.iter().map(reference_line).collect::<String>()
        );
    }

    /// A row's cells as the test reads them back.
    fn reference_row(s: &Setting) -> Vec<String> {
        let builder = if s.builder.is_empty() {
            "-".to_string()
        } else {
            s.builder.to_string()
        };
        vec![
            s.name.to_string(),
            s.values.replace('|', "\\|"),
            builder,
            s.meaning.to_string(),
        ]
    }

    /// A row as written in the reference.
    fn reference_line(s: &Setting) -> String {
        let c = reference_row(s);
        let builder = if s.builder.is_empty() {
            c[2].clone()
        } else {
            format!("`{}`", c[2])
        };
        format!("| `{}` | {} | {} | {} |\n", c[0], c[1], builder, c[3])
    }
}
