//! `/`: a page for people. The flame graph of the time since the page was last loaded (time
//! when the time analysis runs, calls otherwise), the top functions of that window, links to
//! the other endpoints; it reloads itself every [`REFRESH_SECONDS`].

use crate::model::ReportData;
use crate::report::Weight;
use std::fmt::Write as _;

/// How often the page reloads itself, so each load shows about this many seconds.
pub(crate) const REFRESH_SECONDS: u32 = 10;
/// Rows of the top-functions table.
const TOP: usize = 20;

/// The page of `window` (`first`: the window is the whole session so far).
pub(crate) fn render(window: &ReportData, service: &str, first: bool) -> String {
    let names = window.method_names();
    let timed = window.time.is_some();
    let weight = if timed { Weight::Time } else { Weight::Calls };
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>cabprof: {svc}</title>\
         <style>body{{font-family:sans-serif;margin:1em}}table{{border-collapse:collapse}}\
         td,th{{padding:2px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
         </style></head><body>\n<h1>cabprof: {svc}</h1>\n<p>{what} ({secs:.1} s, {mode} mode, \
         {events} events). Reloads every {REFRESH_SECONDS} s.</p>\n<p>\
         <a href=\"/debug/pprof/profile?seconds=30\">pprof profile (30 s)</a> · \
         <a href=\"/metrics\">Prometheus metrics</a> · \
         <a href=\"/report.json?seconds=10\">JSON report (10 s)</a> · \
         <a href=\"/debug/cabprof/trace?seconds=5\">timeline (5 s, Chrome trace)</a></p>\n",
        svc = escape(service),
        what = if first {
            "The session so far"
        } else {
            "Since the last load"
        },
        secs = window.session.elapsed_s,
        mode = escape(&window.session.mode),
        events = window.totals.events,
    );
    let _ = writeln!(
        o,
        "<h2>Flame graph ({})</h2>\n<div>{}</div>",
        if timed { "time" } else { "calls" },
        window.svg_by(weight)
    );

    // The top functions: calls, and with time their self and inclusive time.
    let mut rows: Vec<Row> = match (&window.time, &window.method_count) {
        (Some(t), _) => t
            .functions
            .iter()
            .map(|f| (f.method, f.calls, Some((f.exclusive_ns, f.inclusive_ns))))
            .collect(),
        (None, Some(counts)) => counts
            .iter()
            .map(|c| (c.method, c.estimated.unwrap_or(c.count), None))
            .collect(),
        (None, None) => Vec::new(),
    };
    rows.sort_by(|a, b| {
        let key = |r: &Row| r.2.map_or(r.1 as f64, |t| t.0);
        key(b).total_cmp(&key(a))
    });
    o.push_str("<h2>Top functions</h2>\n<table id=\"top\"><tr><th>function</th><th>calls</th>");
    if timed {
        o.push_str("<th>self ms</th><th>inclusive ms</th>");
    }
    o.push_str("</tr>\n");
    for (method, calls, time) in rows.iter().take(TOP) {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{calls}</td>",
            escape(&names.name(*method))
        );
        if let Some((own, inclusive)) = time {
            let _ = write!(
                o,
                "<td>{:.3}</td><td>{:.3}</td>",
                own / 1e6,
                inclusive / 1e6
            );
        }
        o.push_str("</tr>\n");
    }
    if rows.is_empty() {
        o.push_str("<tr><td>no calls in this window</td></tr>\n");
    }
    o.push_str("</table>\n</body></html>\n");
    o
}

/// A function's row: method, calls, and with time its self and inclusive ns.
type Row = (u32, u64, Option<(f64, f64)>);

/// `s` as HTML text.
fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}
