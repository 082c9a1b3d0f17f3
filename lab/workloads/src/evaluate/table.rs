//! The evaluation's CSV tables: a header and rows of already formatted fields, written with
//! the `csv` crate (so a field holding a comma or a quote is quoted, not split).

use std::io;
use std::path::Path;

/// A CSV table: header and rows of already formatted fields.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Column names.
    pub header: Vec<&'static str>,
    /// Rows, each as wide as the header.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, row: Vec<String>) {
        assert_eq!(row.len(), self.header.len(), "row width");
        self.rows.push(row);
    }

    /// Write the table to `out` as CSV: the header line, then one line per row.
    pub fn write_to<W: io::Write>(&self, out: W) -> csv::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        w.write_record(&self.header)?;
        for r in &self.rows {
            w.write_record(r)?;
        }
        w.flush()?;
        Ok(())
    }

    /// The table as CSV text.
    pub fn csv(&self) -> String {
        let mut out = Vec::new();
        self.write_to(&mut out)
            .expect("writing CSV into memory cannot fail");
        String::from_utf8(out).expect("every field is a Rust string")
    }

    /// Write the table to the file `path` as CSV.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let file = io::BufWriter::new(std::fs::File::create(path)?);
        self.write_to(file).map_err(io::Error::other)
    }
}

/// `x` with `digits` decimals; empty when `x` is not finite (a missing measurement).
pub(crate) fn f(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        String::new()
    }
}
