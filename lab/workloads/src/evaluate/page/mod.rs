//! Regenerate the data tables of `docs/EVALUATION.md` from the evaluation's CSV files and
//! `summary.txt` (run by the `plot` example).
//!
//! Each generated table sits between two marker lines in the page:
//!
//! ```text
//! <!-- table:fig7 -->
//!
//! | workload | stream | ... |
//! |---|---|...|
//!
//! <!-- /table -->
//! ```
//!
//! Everything between the markers is replaced by a freshly generated table (`TABLES` lists
//! the names); the rest of the page is left as it is. The new page is written to a temporary
//! file next to it and renamed over it only when every table was generated, so an error
//! (missing CSV or column, malformed row, marker without its end) leaves the page untouched.
//!
//! The parts: `csv_file` reads the CSV files strictly, `format` writes numbers as the page
//! does, `figures` and `targets` generate the tables; this file finds the markers and
//! rewrites the page.

mod csv_file;
mod figures;
mod format;
mod targets;

pub use csv_file::{Csv, Rec};

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use figures::{
    costmodel, fig10, fig11_error, fig11_overhead, fig7, fig8, fig8_means, perturbation, pinning,
    workloads,
};
use targets::targets;

/// A result whose error is a message naming the file, line and column at fault.
pub type Res<T> = Result<T, String>;

const OPEN_PREFIX: &str = "<!-- table:";
const OPEN_SUFFIX: &str = "-->";
const CLOSE: &str = "<!-- /table -->";

/// A table generator: reads what it needs from the eval directory.
type Generator = fn(&Path) -> Res<Table>;

/// Every table the page may mark, by marker name.
const TABLES: [(&str, Generator); 11] = [
    ("targets", targets),
    ("fig7", fig7),
    ("fig8-means", fig8_means),
    ("fig8", fig8),
    ("fig10", fig10),
    ("perturbation", perturbation),
    ("fig11-overhead", fig11_overhead),
    ("fig11-error", fig11_error),
    ("costmodel", costmodel),
    ("pinning", pinning),
    ("workloads", workloads),
];

/// What `rewrite_page` did.
#[derive(Debug)]
pub struct Outcome {
    /// Marker names, in page order.
    pub tables: Vec<String>,
    /// Whether the page's text changed (and was written).
    pub changed: bool,
}

/// Regenerate every marked table of `page` from the files in `dir`.
pub fn rewrite_page(page: &Path, dir: &Path) -> Res<Outcome> {
    let text = std::fs::read_to_string(page)
        .map_err(|e| format!("cannot read {}: {e}", page.display()))?;
    let (new, tables) = replace_tables(&text, |name| {
        let (_, generate) = TABLES.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            let known: Vec<&str> = TABLES.iter().map(|(n, _)| *n).collect();
            format!("unknown table `{name}` (known: {})", known.join(", "))
        })?;
        generate(dir).map(|t| t.render())
    })
    .map_err(|e| format!("{}: {e}", page.display()))?;
    let changed = new != text;
    if changed {
        write_atomically(page, &new)?;
    }
    Ok(Outcome { tables, changed })
}

/// Write `text` to a temporary file beside `path`, then rename it over `path`.
fn write_atomically(path: &Path, text: &str) -> Res<()> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} is not a file path", path.display()))?;
    let tmp: PathBuf = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot rename {} to {}: {e}", tmp.display(), path.display())
    })
}

/// The marker name if `line` is an opening marker `<!-- table:NAME -->`.
fn open_marker(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix(OPEN_PREFIX)?
        .strip_suffix(OPEN_SUFFIX)
        .map(str::trim)
}

fn is_close(line: &str) -> bool {
    line.trim() == CLOSE
}

/// Replace the body of every marked table with `generate(name)`, framed by blank lines (so
/// that the HTML comments never run into the table). Returns the new text and the names.
fn replace_tables(
    text: &str,
    mut generate: impl FnMut(&str) -> Res<String>,
) -> Res<(String, Vec<String>)> {
    let mut out = String::with_capacity(text.len());
    let mut names = Vec::new();
    // The open marker being replaced: (name, line number).
    let mut open: Option<(String, usize)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let n = i + 1;
        match (&open, open_marker(line), is_close(line)) {
            (None, Some(name), _) => {
                if name.is_empty() {
                    return Err(format!("line {n}: table marker without a name"));
                }
                out.push_str(line);
                let body = generate(name).map_err(|e| format!("table `{name}` (line {n}): {e}"))?;
                out.push('\n');
                out.push_str(&body);
                out.push('\n');
                names.push(name.to_string());
                open = Some((name.to_string(), n));
            }
            (None, None, true) => {
                return Err(format!(
                    "line {n}: `{CLOSE}` without an opening `{OPEN_PREFIX}NAME {OPEN_SUFFIX}`"
                ))
            }
            (None, None, false) => out.push_str(line),
            (Some((name, at)), Some(other), _) => {
                return Err(format!(
                    "marker `{OPEN_PREFIX}{name} {OPEN_SUFFIX}` (line {at}) has no `{CLOSE}` \
                     before `{OPEN_PREFIX}{other} {OPEN_SUFFIX}` (line {n})"
                ))
            }
            (Some(_), None, true) => {
                out.push_str(line);
                open = None;
            }
            // The old table body: dropped.
            (Some(_), None, false) => {}
        }
    }
    if let Some((name, at)) = open {
        return Err(format!(
            "marker `{OPEN_PREFIX}{name} {OPEN_SUFFIX}` (line {at}) has no `{CLOSE}` \
             before the end of the page"
        ));
    }
    Ok((out, names))
}

/// A markdown table.
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.header.len());
        self.rows.push(row);
    }

    fn render(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut s = line(&self.header);
        let _ = writeln!(s, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str) -> Res<String> {
        Ok(format!("| {name} |\n|---|\n"))
    }

    #[test]
    fn replaces_only_between_markers() {
        let page = "# Title\n\nprose\n<!-- table:a -->\n| old |\n|---|\n| 1 |\n<!-- /table -->\n\
                    more prose\n<!-- table:b -->\n\n<!-- /table -->\nend\n";
        let (out, names) = replace_tables(page, table).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            out,
            "# Title\n\nprose\n<!-- table:a -->\n\n| a |\n|---|\n\n<!-- /table -->\nmore prose\n\
             <!-- table:b -->\n\n| b |\n|---|\n\n<!-- /table -->\nend\n"
        );
        // Idempotent.
        assert_eq!(replace_tables(&out, table).unwrap().0, out);
    }

    #[test]
    fn marker_errors_name_the_marker_and_line() {
        let e = replace_tables("x\n<!-- table:fig7 -->\n| t |\n", table).unwrap_err();
        assert!(e.contains("table:fig7") && e.contains("line 2"), "{e}");
        assert!(e.contains("end of the page"), "{e}");
        let e = replace_tables(
            "<!-- table:a -->\n<!-- table:b -->\n<!-- /table -->\n",
            table,
        )
        .unwrap_err();
        assert!(
            e.contains("table:a") && e.contains("table:b") && e.contains("line 2"),
            "{e}"
        );
        let e = replace_tables("x\n<!-- /table -->\n", table).unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let e = replace_tables("<!-- table:c -->\n<!-- /table -->\n", |_| {
            Err("boom".to_string())
        })
        .unwrap_err();
        assert!(e.contains("`c`") && e.contains("boom"), "{e}");
    }

    #[test]
    fn missing_csv_leaves_page_untouched() {
        let dir = std::env::temp_dir().join(format!("plot-tables-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let page = dir.join("page.md");
        let text = "a\n<!-- table:pinning -->\n| old |\n<!-- /table -->\n";
        std::fs::write(&page, text).unwrap();
        let e = rewrite_page(&page, &dir).err().unwrap();
        assert!(e.contains("pinning.csv"), "{e}");
        assert_eq!(std::fs::read_to_string(&page).unwrap(), text);
        std::fs::write(
            dir.join("pinning.csv"),
            "workload,analysis,pinned_s,unpinned_s,pinned_overhead_vs_A,unpinned_overhead_vs_A\n\
             sort,paths,0.017976,0.019420,0.0804,0.1672\n",
        )
        .unwrap();
        let o = rewrite_page(&page, &dir).unwrap();
        assert!(o.changed);
        assert!(std::fs::read_to_string(&page)
            .unwrap()
            .contains("| sort | paths | 18.0 | 19.4 | 8% | 17% |\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
