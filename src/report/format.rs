//! The one list of report formats: what `cabprof report --format` accepts and shows in its
//! help, and what the README and the reference list (a test checks them against it).

/// A rendering of a report. Every format can be made from a [`ReportData`](super::ReportData)
/// alone; [`Svg`](Format::Svg) and [`Pprof`](Format::Pprof) need the library's `flamegraph`
/// and `pprof` features (the `cabprof` tool has both).
///
/// Not `#[non_exhaustive]` on purpose: a tool matching on it (as `cabprof report` does) fails
/// to compile until it renders a format added here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Text tables for people ([`ReportData::text`](super::ReportData::text)).
    Table,
    /// The JSON report ([`ReportData::json`](super::ReportData::json)).
    Json,
    /// Folded stacks of the calling contexts, for flame-graph tools.
    Folded,
    /// The call graph in Graphviz DOT.
    Dot,
    /// A flame graph of the calling contexts, as SVG (feature `flamegraph`).
    Svg,
    /// pprof's gzipped `profile.proto` (feature `pprof`).
    Pprof,
    /// The callgrind format, for KCachegrind, QCachegrind and `callgrind_annotate`.
    Callgrind,
    /// The timeline as Chrome Trace Event JSON (needs the `timeline` analysis).
    ChromeTrace,
    /// The timeline as a Perfetto protobuf trace (needs the `timeline` analysis).
    Perfetto,
}

impl Format {
    /// Every format, in the order help texts and docs list them.
    pub const ALL: [Format; 9] = [
        Format::Table,
        Format::Json,
        Format::Folded,
        Format::Dot,
        Format::Svg,
        Format::Pprof,
        Format::Callgrind,
        Format::ChromeTrace,
        Format::Perfetto,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Folded => "folded",
            Format::Dot => "dot",
            Format::Svg => "svg",
            Format::Pprof => "pprof",
            Format::Callgrind => "callgrind",
            Format::ChromeTrace => "chrome-trace",
            Format::Perfetto => "perfetto",
        }
    }

    /// Other names accepted for it.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Format::Table => &["text"],
            _ => &[],
        }
    }

    /// One line saying what it is and what reads it.
    pub fn description(self) -> &'static str {
        match self {
            Format::Table => "Text tables for people",
            Format::Json => "The JSON report again, pretty-printed (checks and normalizes a file)",
            Format::Folded => {
                "Folded stacks of the calling contexts (`root;a;b count`), for flame-graph tools"
            }
            Format::Dot => "The call graph in Graphviz DOT",
            Format::Svg => "A flame graph of the calling contexts, as SVG",
            Format::Pprof => {
                "pprof's gzipped profile.proto (go tool pprof, Pyroscope, Parca): calls, wall \
                 time and allocations per calling context, misses per function"
            }
            Format::Callgrind => {
                "The callgrind format (KCachegrind, QCachegrind, callgrind_annotate): calls and \
                 misses per function, calls and inclusive calls per call-graph edge"
            }
            Format::ChromeTrace => {
                "The timeline as Chrome Trace Event JSON (Perfetto, chrome://tracing, DevTools, \
                 speedscope): each thread's calls with their start and duration (needs the \
                 timeline analysis)"
            }
            Format::Perfetto => {
                "The timeline as a Perfetto protobuf trace (Perfetto UI, trace_processor): \
                 TrackEvent slices per thread, interned names (needs the timeline analysis)"
            }
        }
    }

    /// The format called `name` (or one of its aliases); case does not matter.
    pub fn parse(name: &str) -> Option<Format> {
        let name = name.trim().to_ascii_lowercase();
        Format::ALL
            .into_iter()
            .find(|f| f.name() == name || f.aliases().contains(&name.as_str()))
    }

    /// Every name, separated by `|`, as usage lines show them (`table|json|...`).
    pub fn usage() -> String {
        Format::ALL.map(Format::name).join("|")
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn every_format_parses_from_its_names() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
            assert_eq!(Format::parse(&f.name().to_uppercase()), Some(f));
            for alias in f.aliases() {
                assert_eq!(Format::parse(alias), Some(f));
            }
            assert!(!f.description().is_empty());
        }
        assert_eq!(Format::parse("pdf"), None);
    }

    /// The README and the reference list the formats in the tool's usage line; they must
    /// say exactly the formats there are.
    #[test]
    fn the_docs_list_every_format() {
        let usage = format!("--format\n{}", Format::usage());
        for (doc, text) in [
            ("README.md", include_str!("../../README.md")),
            ("docs/REFERENCE.md", include_str!("../../docs/REFERENCE.md")),
        ] {
            // The usage line may wrap after `--format`.
            let flat = text.replace("--format ", "--format\n");
            // Followed by the end of the list, not by another name.
            let listed = flat.match_indices(&usage).any(|(at, _)| {
                !flat[at + usage.len()..].starts_with(|c: char| c == '|' || c.is_alphanumeric())
            });
            assert!(
                listed,
                "{doc} must list the formats as `--format {}`",
                Format::usage()
            );
        }
    }
}
