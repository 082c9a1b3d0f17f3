//! The evaluation's CSV files, read strictly with the `csv` crate: every row has the header's
//! number of fields, and every typed access names the file, line and column on error.

use super::Res;
use std::path::Path;

/// One CSV file, strictly parsed: every row has the header's number of fields.
#[derive(Debug)]
pub struct Csv {
    /// The file's path (or the name it was parsed under), for error messages.
    pub name: String,
    header: Vec<String>,
    /// (line number in the file, fields).
    rows: Vec<(usize, Vec<String>)>,
}

/// One row of a `Csv`, with typed access that names the file, line and column on error.
#[derive(Clone, Copy, Debug)]
pub struct Rec<'a> {
    /// The file the row is in.
    pub csv: &'a Csv,
    /// The 1-based line the row starts on.
    pub line: usize,
    fields: &'a [String],
}

impl Csv {
    /// Read and parse `dir/name`.
    pub fn read(dir: &Path, name: &str) -> Res<Csv> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Csv::parse(&path.display().to_string(), &text)
    }

    /// Parse `text`, naming it `name` in errors: a header line, then at least one data row of
    /// the header's width (fields trimmed; blank lines skipped).
    pub fn parse(name: &str, text: &str) -> Res<Csv> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            // Widths are checked here, to name the file and line.
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut header: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| format!("{name}: {e}"))?;
            // The 1-based line the record starts on. (Counted from its byte offset: the
            // reader's own line count leaves out the blank lines it skips, and its offset
            // can point at them.)
            let mut start = record.position().map_or(0, |p| p.byte() as usize);
            while matches!(text.as_bytes().get(start), Some(b'\n' | b'\r')) {
                start += 1;
            }
            let line = 1 + text.as_bytes()[..start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            let fields: Vec<String> = record.iter().map(str::to_string).collect();
            // A line of blanks only: skipped, like the empty lines the reader skips itself.
            if fields.iter().all(String::is_empty) {
                continue;
            }
            let Some(header) = &header else {
                if line != 1 {
                    return Err(format!("{name} is empty (no header line)"));
                }
                header = Some(fields);
                continue;
            };
            if fields.len() != header.len() {
                return Err(format!(
                    "{name} line {line}: {} fields, the header has {}",
                    fields.len(),
                    header.len()
                ));
            }
            rows.push((line, fields));
        }
        let header = header.ok_or_else(|| format!("{name} is empty (no header line)"))?;
        if rows.is_empty() {
            return Err(format!("{name} has no data rows"));
        }
        Ok(Csv {
            name: name.to_string(),
            header,
            rows,
        })
    }

    /// The header's column names, in order.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// Fail unless every column of `cols` is present.
    pub fn require(&self, cols: &[&str]) -> Res<()> {
        for c in cols {
            if !self.header.iter().any(|h| h == c) {
                return Err(format!(
                    "{}: no column `{c}` (columns: {})",
                    self.name,
                    self.header.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The data rows, in file order.
    pub fn recs(&self) -> impl Iterator<Item = Rec<'_>> {
        self.rows.iter().map(move |(line, fields)| Rec {
            csv: self,
            line: *line,
            fields,
        })
    }

    /// Distinct values of `col`, in order of first appearance.
    pub fn distinct(&self, col: &str) -> Res<Vec<String>> {
        let mut v: Vec<String> = Vec::new();
        for r in self.recs() {
            let x = r.str(col)?;
            if !v.iter().any(|y| y == x) {
                v.push(x.to_string());
            }
        }
        Ok(v)
    }

    /// Distinct `(c1, c2)` pairs, in order of first appearance.
    pub(crate) fn pairs(&self, c1: &str, c2: &str) -> Res<Vec<(String, String)>> {
        let mut v: Vec<(String, String)> = Vec::new();
        for r in self.recs() {
            let p = (r.str(c1)?.to_string(), r.str(c2)?.to_string());
            if !v.contains(&p) {
                v.push(p);
            }
        }
        Ok(v)
    }

    /// The first row where every `(column, value)` matches.
    pub(crate) fn find(&self, want: &[(&str, &str)]) -> Res<Option<Rec<'_>>> {
        for r in self.recs() {
            let mut all = true;
            for (c, v) in want {
                all &= r.str(c)? == *v;
            }
            if all {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// Like `find`, but a missing row is an error.
    pub(crate) fn get(&self, want: &[(&str, &str)]) -> Res<Rec<'_>> {
        self.find(want)?.ok_or_else(|| {
            let w: Vec<String> = want.iter().map(|(c, v)| format!("{c}={v}")).collect();
            format!("{}: no row with {}", self.name, w.join(", "))
        })
    }
}

impl<'a> Rec<'a> {
    /// The field of column `col`; an error names a missing column.
    pub fn str(&self, col: &str) -> Res<&'a str> {
        let i = self
            .csv
            .header
            .iter()
            .position(|h| h == col)
            .ok_or_else(|| {
                format!(
                    "{}: no column `{col}` (columns: {})",
                    self.csv.name,
                    self.csv.header.join(", ")
                )
            })?;
        Ok(&self.fields[i])
    }

    /// A number, `None` when the field is empty.
    pub fn opt_num(&self, col: &str) -> Res<Option<f64>> {
        let s = self.str(col)?;
        if s.is_empty() {
            return Ok(None);
        }
        s.parse::<f64>().map(Some).map_err(|_| {
            format!(
                "{} line {}: column `{col}`: `{s}` is not a number",
                self.csv.name, self.line
            )
        })
    }

    /// A number; an empty field is an error naming the file, line and column.
    pub fn num(&self, col: &str) -> Res<f64> {
        self.opt_num(col)?.ok_or_else(|| {
            format!(
                "{} line {}: column `{col}` is empty",
                self.csv.name, self.line
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_csv_row_names_file_and_line() {
        let e = Csv::parse("fig7.csv", "a,b,c\n1,2,3\n\n4,5\n")
            .err()
            .unwrap();
        assert!(e.contains("fig7.csv line 4"), "{e}");
        let csv = Csv::parse("x.csv", "a,b\n1,zz\n").unwrap();
        let r = csv.recs().next().unwrap();
        let e = r.num("b").unwrap_err();
        assert!(e.contains("x.csv line 2") && e.contains("`b`"), "{e}");
        let e = csv.require(&["a", "missing"]).unwrap_err();
        assert!(e.contains("x.csv") && e.contains("`missing`"), "{e}");
    }
}
