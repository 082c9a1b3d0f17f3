//! The page's targets table, read from `summary.txt`: each target's verdict and figures.

use super::format::fixed;
use super::{Res, Table};
use std::fmt::Write as _;
use std::path::Path;

/// `summary.txt`, split into sections: a line at column 0 starts one (its title), the
/// indented lines below belong to it.
struct Summary {
    name: String,
    sections: Vec<(String, Vec<String>)>,
}

impl Summary {
    fn read(dir: &Path) -> Res<Summary> {
        let path = dir.join("summary.txt");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(Summary::parse(&path.display().to_string(), &text))
    }

    fn parse(name: &str, text: &str) -> Summary {
        let mut sections: Vec<(String, Vec<String>)> = Vec::new();
        for l in text.lines() {
            if l.trim().is_empty() {
                continue;
            }
            if !l.starts_with(' ') {
                sections.push((l.to_string(), Vec::new()));
            } else if let Some((_, body)) = sections.last_mut() {
                body.push(l.trim().to_string());
            }
        }
        Summary {
            name: name.to_string(),
            sections,
        }
    }

    /// The lines of the section whose title starts with `title`.
    fn section(&self, title: &str) -> Res<&[String]> {
        self.sections
            .iter()
            .find(|(t, _)| t.starts_with(title))
            .map(|(_, b)| b.as_slice())
            .ok_or_else(|| format!("{}: no section `{title}`", self.name))
    }

    /// The section's `overall...: PASS|FAIL` line, as a verdict.
    fn overall(&self, title: &str) -> Res<bool> {
        let line = self
            .section(title)?
            .iter()
            .find(|l| l.starts_with("overall"))
            .ok_or_else(|| format!("{}: section `{title}` has no `overall` line", self.name))?;
        self.pass(line.split_whitespace().last().unwrap_or(""), line)
    }

    fn pass(&self, word: &str, line: &str) -> Res<bool> {
        match word {
            "PASS" => Ok(true),
            "FAIL" => Ok(false),
            _ => Err(format!(
                "{}: expected PASS or FAIL, found `{word}` in `{line}`",
                self.name
            )),
        }
    }

    fn bad(&self, line: &str) -> String {
        format!("{}: cannot read the line `{line}`", self.name)
    }
}

/// The word after `key` among `words`.
fn after<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    let i = words.iter().position(|w| *w == key)?;
    words.get(i + 1).copied()
}

/// `call-graph` → `call graph`, as the page names analyses in prose.
fn spoken(analysis: &str) -> String {
    analysis.replace('-', " ")
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// One verdict for several named results: `met`, `**not met**`, or per name.
fn verdicts(results: &[(String, bool)]) -> String {
    if results.iter().all(|r| r.1) {
        "met".into()
    } else if results.iter().all(|r| !r.1) {
        "**not met**".into()
    } else {
        let v: Vec<String> = results
            .iter()
            .map(|(n, ok)| format!("{n} {}", verdict(*ok)))
            .collect();
        v.join("; ")
    }
}

/// The targets, from `summary.txt`.
///
/// One row per target, in the page's order: a table, long because the targets are many.
pub(crate) fn targets(dir: &Path) -> Res<Table> {
    let s = Summary::read(dir)?;
    let mut t = Table::new(["target", "measured", "verdict"]);

    // Target 1: ratio of mean overheads per analysis.
    let mut goals = Vec::new();
    let mut others = Vec::new();
    for l in s.section("Target 1:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        let Some(ratio) = after(&w, "means") else {
            continue;
        };
        let name = spoken(w[0]);
        if l.ends_with("(not a target)") {
            others.push(format!("{name} {ratio}"));
        } else {
            let ok = s.pass(w.last().copied().unwrap_or(""), l)?;
            goals.push((name, ratio.to_string(), ok));
        }
    }
    if goals.is_empty() {
        return Err(format!("{}: Target 1 lists no analysis", s.name));
    }
    let mut measured = goals
        .iter()
        .map(|(n, r, _)| format!("{n} {r}"))
        .collect::<Vec<_>>()
        .join(", ");
    if !others.is_empty() {
        let _ = write!(measured, " ({}, not targets)", others.join(", "));
    }
    let v: Vec<String> = goals
        .iter()
        .map(|(n, _, ok)| format!("{n} {}", verdict(*ok)))
        .collect();
    t.push(vec![
        "Concurrent exhaustive overhead ≤ ½ of sequential, averaged over the suite \
         (ratio of the mean overheads)"
            .into(),
        measured,
        v.join("; "),
    ]);

    // Target 2: concurrent against sequential cache simulation, per workload.
    let mut cells = Vec::new();
    for l in s.section("Target 2:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"overall:") {
            continue;
        }
        let time = |key: &str| -> Res<String> {
            let x: f64 = after(&w, key)
                .and_then(|x| x.parse().ok())
                .ok_or_else(|| s.bad(l))?;
            Ok(fixed(x * 1000.0, 0))
        };
        cells.push(format!(
            "{}: {} ms vs {} ms",
            w[0],
            time("concurrent")?,
            time("sequential")?
        ));
    }
    t.push(vec![
        "Concurrent cache simulation faster than sequential on every workload".into(),
        cells.join("; "),
        verdict(s.overall("Target 2:")?).into(),
    ]);

    // Target 3: sampling at 5 %, error and overhead ratio per analysis.
    let mut errors = Vec::new();
    let mut ratios = Vec::new();
    for l in s.section("Target 3:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.get(1..3) != Some(&["mean", "error"][..]) {
            continue;
        }
        let name = spoken(w[0]);
        let err = after(&w, "error").ok_or_else(|| s.bad(l))?;
        let err_ok = s.pass(after(&w, err).ok_or_else(|| s.bad(l))?, l)?;
        let ratio = after(&w, "ratio").ok_or_else(|| s.bad(l))?;
        let ratio_ok = s.pass(after(&w, ratio).ok_or_else(|| s.bad(l))?, l)?;
        errors.push((name.clone(), err.to_string(), err_ok));
        ratios.push((name, ratio.to_string(), ratio_ok));
    }
    let list = |v: &[(String, String, bool)]| -> String {
        let x: Vec<String> = v.iter().map(|(n, x, _)| format!("{n} {x}")).collect();
        x.join(", ")
    };
    let oks = |v: &[(String, String, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|(n, _, ok)| (n.clone(), *ok)).collect()
    };
    let (err_measured, err_verdict, ratio_measured, ratio_verdict) = if errors.is_empty() {
        let none = "5 % not among the measured rates".to_string();
        (none.clone(), "–".into(), none, "–".into())
    } else {
        (
            format!("mean error (paper's metric) {}", list(&errors)),
            verdicts(&oks(&errors)),
            format!("ratio of mean overheads {}", list(&ratios)),
            verdicts(&oks(&ratios)),
        )
    };
    t.push(vec![
        "Sampling at 5 %: error under 3 %".into(),
        err_measured,
        err_verdict,
    ]);
    t.push(vec![
        "Sampling at 5 %: overhead ≤ ½ of exhaustive, on average".into(),
        ratio_measured,
        ratio_verdict,
    ]);

    // Target 4: FastForward and N-way against CAB on the path stream.
    let mut ff = Vec::new();
    let mut nw = Vec::new();
    let mut ff_ahead = Vec::new();
    let mut nw_ahead = Vec::new();
    for l in s.section("Target 4:")? {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.get(1) != Some(&"paths") {
            continue;
        }
        for (design, list, ahead) in [
            ("FastForward", &mut ff, &mut ff_ahead),
            ("N-way", &mut nw, &mut nw_ahead),
        ] {
            let x = after(&w, design).ok_or_else(|| s.bad(l))?;
            let v: f64 = x.parse().map_err(|_| s.bad(l))?;
            list.push(format!("{} {x}", w[0]));
            if v <= 1.0 {
                ahead.push(w[0].to_string());
            }
        }
    }
    let ok = s.overall("Target 4:")?;
    let mut v = verdict(ok).to_string();
    let ahead: Vec<String> = [("FastForward", &ff_ahead), ("N-way", &nw_ahead)]
        .iter()
        .filter(|(_, w)| !w.is_empty())
        .map(|(d, w)| format!("{d} ahead or level on {}", w.join(", ")))
        .collect();
    if !ahead.is_empty() {
        let _ = write!(v, " ({})", ahead.join("; "));
    }
    t.push(vec![
        "CAB ahead of FastForward and N-way on the path stream of every workload".into(),
        format!(
            "FastForward/CAB {}; N-way/CAB {}",
            ff.join(", "),
            nw.join(", ")
        ),
        v,
    ]);

    // Correctness.
    let checks = s.section("Correctness")?;
    let count = |prefix: &str| -> Res<(&String, u64, u64, String)> {
        let l = checks
            .iter()
            .find(|l| l.starts_with(prefix))
            .ok_or_else(|| format!("{}: no correctness line `{prefix}...`", s.name))?;
        let rest = l.split_once(": ").ok_or_else(|| s.bad(l))?.1;
        let (frac, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let (a, b) = frac.split_once('/').ok_or_else(|| s.bad(l))?;
        let a = a.parse().map_err(|_| s.bad(l))?;
        let b = b.parse().map_err(|_| s.bad(l))?;
        Ok((l, a, b, tail.to_string()))
    };
    let (_, same, total, _) = count("perturbation runs")?;
    t.push(vec![
        "Correctness: exhaustive results independent of the ring".into(),
        format!("{same}/{total} runs identical to the largest-buffer run"),
        verdict(same == total).into(),
    ]);
    let (l, same, total, tail) = count("exhaustive concurrent and sequential")?;
    let v = if same == total {
        "met".to_string()
    } else {
        // `(differ: pool/method-count, pool/call-graph)` → the workloads.
        let list = tail
            .trim()
            .strip_prefix("(differ:")
            .and_then(|x| x.strip_suffix(')'))
            .ok_or_else(|| s.bad(l))?;
        let mut ws: Vec<String> = Vec::new();
        for cell in list.split(',') {
            let w = format!("`{}`", cell.trim().split('/').next().unwrap_or(""));
            if !ws.contains(&w) {
                ws.push(w);
            }
        }
        format!("met except {} (see Discussion)", ws.join(", "))
    };
    t.push(vec![
        "Correctness: concurrent and sequential see the same events".into(),
        format!("{same}/{total} exhaustive concurrent and sequential runs identical"),
        v,
    ]);
    Ok(t)
}
