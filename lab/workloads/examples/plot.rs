//! Render the evaluation's CSV files (written by the `evaluate` example) as SVG plots, next to
//! them: `fig7.svg`, `fig8.svg`, `fig10.svg`, `fig11.svg`, `costmodel.svg`, `perturbation.svg`;
//! then regenerate the data tables of the evaluation page (`--page`, default
//! `DIR/../EVALUATION.md`) between their `<!-- table:NAME -->` markers
//! (`cabprof_workloads::evaluate::page`).
//!
//! ```text
//! cargo run --profile eval -p cabprof-workloads --example plot -- docs/eval [--page docs/EVALUATION.md]
//! ```

use cabprof::BufferDesign;
use cabprof_workloads::evaluate::page::{rewrite_page, Csv, Rec};
use clap::Parser;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};

type Res<T> = Result<T, Box<dyn Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// `dir/name`, read by the evaluation's strict reader and checked for the columns drawn
/// (`numbers` parse as numbers or are empty), so that drawing reads its fields infallibly.
fn read(dir: &Path, name: &str, text: &[&str], numbers: &[&str]) -> Res<Csv> {
    let csv = Csv::read(dir, name)?;
    csv.require(text)?;
    csv.require(numbers)?;
    for r in csv.recs() {
        for c in numbers {
            r.opt_num(c)?;
        }
    }
    Ok(csv)
}

/// A number of a row [`read`] checked (`NaN` when empty).
fn num(r: &Rec, col: &str) -> f64 {
    r.opt_num(col).ok().flatten().unwrap_or(f64::NAN)
}

/// A text field of a row [`read`] checked.
fn text<'a>(r: &Rec<'a>, col: &str) -> &'a str {
    r.str(col).unwrap_or_default()
}

/// Rows where every `(column, value)` matches.
fn filter<'a>(csv: &'a Csv, want: &[(&str, &str)]) -> Vec<Rec<'a>> {
    csv.recs()
        .filter(|r| want.iter().all(|(c, v)| text(r, c) == *v))
        .collect()
}

/// A tick label: up to three significant digits, no float noise.
fn tick(x: &f64) -> String {
    let a = x.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

fn finite(xs: impl IntoIterator<Item = f64>) -> Vec<f64> {
    xs.into_iter().filter(|x| x.is_finite()).collect()
}

fn min_max(xs: &[f64]) -> (f64, f64) {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// One bar series: name and one value per category (`NaN` = no bar).
struct Series {
    name: String,
    values: Vec<f64>,
}

/// Grouped bars over categories. With `log`, the y axis is logarithmic and bars grow from
/// `base`; otherwise linear from 0. Long: axes, ticks, bars and legend drawn in order on one
/// canvas.
fn grouped_bars(
    area: &Area,
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[Series],
    log: Option<f64>,
) -> Res<()> {
    let n = categories.len().max(1);
    let vals = finite(series.iter().flat_map(|s| s.values.iter().copied()));
    let (lo, hi) = min_max(&vals);
    let names = categories.to_vec();
    let fmt = move |x: &f64| {
        let r = x.round();
        if (x - r).abs() < 1e-6 && r >= 0.0 && (r as usize) < names.len() {
            names[r as usize].clone()
        } else {
            String::new()
        }
    };
    let k = series.len().max(1) as f64;
    let width = 0.8 / k;
    let x_range = -0.5..(n as f64 - 0.5);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60);
    if let Some(base) = log {
        let ymin = lo.min(base) * 0.8;
        // Head room for the legend.
        let ymax = hi.max(base) * 4.0;
        let mut chart = builder.build_cartesian_2d(x_range, (ymin..ymax).log_scale())?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .disable_x_mesh()
            .x_labels(4 * n + 2)
            .x_label_formatter(&fmt)
            .y_label_formatter(&tick)
            .y_desc(y_desc)
            .draw()?;
        for (j, s) in series.iter().enumerate() {
            let c = color(j);
            chart
                .draw_series(
                    s.values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(i, &v)| {
                            let x0 = i as f64 - 0.4 + j as f64 * width;
                            Rectangle::new([(x0, base), (x0 + width * 0.9, v)], c.filled())
                        }),
                )?
                .label(s.name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    } else {
        let ymin = lo.min(0.0);
        let ymax = hi.max(0.0);
        let pad = (ymax - ymin).max(1e-9) * 0.4;
        let mut chart = builder.build_cartesian_2d(x_range, (ymin - pad * 0.3)..(ymax + pad))?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .disable_x_mesh()
            .x_labels(4 * n + 2)
            .x_label_formatter(&fmt)
            .y_label_formatter(&tick)
            .y_desc(y_desc)
            .draw()?;
        for (j, s) in series.iter().enumerate() {
            let c = color(j);
            chart
                .draw_series(
                    s.values
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite())
                        .map(|(i, &v)| {
                            let x0 = i as f64 - 0.4 + j as f64 * width;
                            Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], c.filled())
                        }),
                )?
                .label(s.name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        chart.draw_series(LineSeries::new(
            [(-0.5, 0.0), (n as f64 - 0.5, 0.0)],
            BLACK.stroke_width(1),
        ))?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    Ok(())
}

/// Lines `(x, y)` per named series; optional log axes and a dashed horizontal reference.
/// Long: axes, ticks, series and legend drawn in order on one canvas.
#[allow(clippy::too_many_arguments)]
fn lines(
    area: &Area,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    log_x: bool,
    log_y: bool,
    reference: Option<(f64, &str)>,
) -> Res<()> {
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .filter(|(x, y)| {
            x.is_finite() && y.is_finite() && (!log_x || *x > 0.0) && (!log_y || *y > 0.0)
        })
        .collect();
    let (mut x0, mut x1) = min_max(&pts.iter().map(|p| p.0).collect::<Vec<_>>());
    let (mut y0, mut y1) = min_max(&pts.iter().map(|p| p.1).collect::<Vec<_>>());
    if let Some((r, _)) = reference {
        y0 = y0.min(r);
        y1 = y1.max(r);
    }
    if log_x {
        x0 *= 0.8;
        x1 *= 1.25;
    } else if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if log_y {
        y0 *= 0.7;
        y1 *= 3.0;
    } else {
        let pad = (y1 - y0).max(1e-9) * 0.1;
        y0 = y0.min(0.0) - pad * 0.2;
        y1 += pad;
    }
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(35)
        .y_label_area_size(60);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .light_line_style(WHITE)
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_label_formatter(&tick)
                .y_label_formatter(&tick)
                .draw()?;
            for (i, (name, p)) in series.iter().enumerate() {
                let c = color(i);
                let p: Vec<(f64, f64)> = p
                    .iter()
                    .copied()
                    .filter(|(x, y)| {
                        x.is_finite()
                            && y.is_finite()
                            && (!log_x || *x > 0.0)
                            && (!log_y || *y > 0.0)
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(p.clone(), c.stroke_width(2)))?
                    .label(name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2))
                    });
                chart.draw_series(p.iter().map(|&q| Circle::new(q, 3, c.filled())))?;
            }
            if let Some((r, label)) = reference {
                chart
                    .draw_series(DashedLineSeries::new(
                        [(x0, r), (x1, r)],
                        6,
                        4,
                        BLACK.stroke_width(1),
                    ))?
                    .label(label.to_string())
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }};
    }
    match (log_x, log_y) {
        (true, true) => {
            body!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?)
        }
        (true, false) => body!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
        (false, true) => body!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (false, false) => body!(builder.build_cartesian_2d(x0..x1, y0..y1)?),
    }
    Ok(())
}

fn fig7(dir: &Path) -> Res<PathBuf> {
    let csv = read(
        dir,
        "fig7.csv",
        &["analysis", "workload", "design"],
        &["ratio_to_cab"],
    )?;
    let out = dir.join("fig7.svg");
    let root = SVGBackend::new(&out, (1100, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let analyses = csv.distinct("analysis")?;
    let panels = root.split_evenly((1, analyses.len().max(1)));
    for (a, area) in analyses.iter().zip(&panels) {
        let workloads: Vec<String> = filter(&csv, &[("analysis", a)])
            .iter()
            .map(|r| text(r, "workload").to_owned())
            .fold(Vec::new(), |mut v, w| {
                if !v.contains(&w) {
                    v.push(w);
                }
                v
            });
        // Every baseline design, under the names the evaluation writes in `design`.
        let series: Vec<Series> = BufferDesign::ALL
            .iter()
            .filter(|&&d| d != BufferDesign::Cab)
            .map(|d| d.name())
            .map(|d| Series {
                name: format!("{d} vs CAB"),
                values: workloads
                    .iter()
                    .map(|w| {
                        filter(&csv, &[("analysis", a), ("workload", w), ("design", d)])
                            .first()
                            .map_or(f64::NAN, |r| (num(r, "ratio_to_cab") - 1.0) * 100.0)
                    })
                    .collect(),
            })
            .collect();
        grouped_bars(
            area,
            &format!("Figure 7: {a} (time relative to CAB)"),
            "% slower than CAB",
            &workloads,
            &series,
            None,
        )?;
    }
    root.present()?;
    Ok(out.clone())
}

fn fig8(dir: &Path) -> Res<PathBuf> {
    let csv = read(
        dir,
        "fig8.csv",
        &["analysis", "workload", "bar"],
        &["overhead_vs_A"],
    )?;
    let out = dir.join("fig8.svg");
    let analyses = csv.distinct("analysis")?;
    let rows = analyses.len().div_ceil(2).max(1);
    let root = SVGBackend::new(&out, (1200, 360 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((rows, 2));
    let bars = [
        "instrument",
        "enqueue",
        "communication",
        "concurrent",
        "sequential",
    ];
    for (a, area) in analyses.iter().zip(&panels) {
        let mut workloads: Vec<String> = Vec::new();
        for r in filter(&csv, &[("analysis", a)]) {
            let w = text(&r, "workload");
            if !workloads.iter().any(|x| x == w) {
                workloads.push(w.to_owned());
            }
        }
        let mut series: Vec<Series> = bars
            .iter()
            .map(|b| Series {
                name: (*b).into(),
                values: workloads
                    .iter()
                    .map(|w| {
                        filter(&csv, &[("analysis", a), ("workload", w), ("bar", b)])
                            .first()
                            .map_or(f64::NAN, |r| num(r, "overhead_vs_A") + 1.0)
                    })
                    .collect(),
            })
            .collect();
        // The suite's mean overhead, as its own group.
        for s in &mut series {
            let v = finite(s.values.iter().copied());
            let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
            s.values.push(m);
        }
        let mut cats = workloads.clone();
        cats.push("mean".into());
        grouped_bars(
            area,
            &format!("Figure 8: {a}"),
            "time / A (log)",
            &cats,
            &series,
            Some(1.0),
        )?;
    }
    root.present()?;
    Ok(out.clone())
}

/// `(workload, [(x, y)])` from rows grouped by `group`, x and y from columns (mapped).
fn by_group(
    rows: &[Rec],
    group: &str,
    x: impl Fn(&Rec) -> f64,
    y: impl Fn(&Rec) -> f64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in rows {
        let g = text(r, group).to_owned();
        let p = (x(r), y(r));
        match out.iter_mut().find(|(n, _)| *n == g) {
            Some((_, v)) => v.push(p),
            None => out.push((g, vec![p])),
        }
    }
    out
}

fn fig10(dir: &Path) -> Res<PathBuf> {
    let csv = read(
        dir,
        "fig10.csv",
        &["workload"],
        &["buffer_bytes", "median_s", "blocks_per_s"],
    )?;
    let out = dir.join("fig10.svg");
    let root = SVGBackend::new(&out, (1200, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let rows: Vec<Rec> = csv.recs().collect();
    let kib = |r: &Rec| num(r, "buffer_bytes") / 1024.0;
    // Time relative to the largest buffer, per workload.
    let mut largest: HashMap<String, f64> = HashMap::new();
    for r in &rows {
        let e = largest.entry(text(r, "workload").to_owned()).or_insert(0.0);
        if kib(r) >= *e {
            *e = kib(r);
        }
    }
    let time_at = |w: &str, k: f64| {
        rows.iter()
            .find(|r| text(r, "workload") == w && kib(r) == k)
            .map_or(f64::NAN, |r| num(r, "median_s"))
    };
    let rel = by_group(&rows, "workload", kib, |r| {
        let w = text(r, "workload");
        num(r, "median_s") / time_at(w, largest[w])
    });
    lines(
        &panels[0],
        "Figure 10: time vs buffer size (fixed chunk)",
        "buffer (KiB, log)",
        "time / time at largest buffer",
        &rel,
        true,
        false,
        Some((1.0, "largest buffer")),
    )?;
    let blocks = by_group(&rows, "workload", kib, |r| num(r, "blocks_per_s") + 1.0);
    lines(
        &panels[1],
        "Producer blocks per second",
        "buffer (KiB, log)",
        "blocks/s + 1 (log)",
        &blocks,
        true,
        true,
        None,
    )?;
    root.present()?;
    Ok(out.clone())
}

fn fig11(dir: &Path) -> Res<PathBuf> {
    let csv = read(
        dir,
        "fig11.csv",
        &["analysis", "workload"],
        &["rate", "overhead_vs_A", "error_rate"],
    )?;
    let out = dir.join("fig11.svg");
    let analyses = csv.distinct("analysis")?;
    let root =
        SVGBackend::new(&out, (1200, 400 * analyses.len().max(1) as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((analyses.len().max(1), 2));
    for (i, a) in analyses.iter().enumerate() {
        let rows = filter(&csv, &[("analysis", a)]);
        let over = by_group(
            &rows,
            "workload",
            |r| num(r, "rate") * 100.0,
            |r| num(r, "overhead_vs_A") * 100.0,
        );
        lines(
            &panels[2 * i],
            &format!("Figure 11: {a}, overhead"),
            "sampling rate (%)",
            "overhead vs A (%)",
            &over,
            false,
            false,
            None,
        )?;
        let err = by_group(
            &rows,
            "workload",
            |r| num(r, "rate") * 100.0,
            |r| num(r, "error_rate") * 100.0,
        );
        lines(
            &panels[2 * i + 1],
            &format!("Figure 11: {a}, error rate"),
            "sampling rate (%, log)",
            "error rate (%, log; 0 drawn at 0.01)",
            &err,
            true,
            true,
            Some((3.0, "3% target")),
        )?;
    }
    root.present()?;
    Ok(out.clone())
}

fn costmodel(dir: &Path) -> Res<PathBuf> {
    let csv = read(
        dir,
        "costmodel.csv",
        &["analysis"],
        &["measured", "predicted"],
    )?;
    let out = dir.join("costmodel.svg");
    let root = SVGBackend::new(&out, (700, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let rows: Vec<Rec> = csv.recs().collect();
    let pts = by_group(
        &rows,
        "analysis",
        |r| num(r, "measured"),
        |r| num(r, "predicted"),
    );
    let all = finite(
        pts.iter()
            .flat_map(|(_, p)| p.iter().flat_map(|q| [q.0, q.1])),
    );
    let (lo, hi) = min_max(&finite(all.into_iter().filter(|x| *x > 0.0)));
    let (lo, hi) = (lo * 0.7, hi * 1.4);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Cost model: predicted max(A+A_i+A_q, P+P_c) vs measured E_c",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("measured E_c (s, log)")
        .y_desc("predicted (s, log)")
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .draw()?;
    chart
        .draw_series(LineSeries::new([(lo, lo), (hi, hi)], BLACK.stroke_width(1)))?
        .label("predicted = measured")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK));
    for (i, (name, p)) in pts.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(
                p.iter()
                    .filter(|q| q.0 > 0.0 && q.1 > 0.0)
                    .map(|&q| Circle::new(q, 4, c.filled())),
            )?
            .label(name.clone())
            .legend(move |(x, y)| Circle::new((x + 5, y), 4, c.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(out.clone())
}

fn perturbation(dir: &Path) -> Res<PathBuf> {
    let csv = read(
        dir,
        "perturbation.csv",
        &["workload"],
        &["blocks_per_s", "slowdown_vs_largest"],
    )?;
    let out = dir.join("perturbation.svg");
    let root = SVGBackend::new(&out, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let rows: Vec<Rec> = csv.recs().collect();
    let pts = by_group(
        &rows,
        "workload",
        |r| num(r, "blocks_per_s") + 1.0,
        |r| num(r, "slowdown_vs_largest"),
    );
    lines(
        &root,
        "Perturbation: slowdown vs producer blocks per second",
        "blocks/s + 1 (log)",
        "time / time at largest buffer",
        &pts,
        true,
        false,
        Some((1.0, "no slowdown")),
    )?;
    root.present()?;
    Ok(out.clone())
}

/// Render the evaluation's CSV files as SVG plots and regenerate the page's tables.
#[derive(Parser, Debug)]
#[command(name = "plot")]
struct Args {
    /// The directory the `evaluate` example wrote.
    #[arg(value_name = "DIR", default_value = "docs/eval")]
    dir: PathBuf,
    /// The evaluation page whose tables to regenerate (default `DIR/../EVALUATION.md`, when
    /// it exists).
    #[arg(long, value_name = "PATH")]
    page: Option<PathBuf>,
}

fn main() {
    let Args { dir, page } = Args::parse();
    let mut failed = false;
    type Plot = fn(&Path) -> Res<PathBuf>;
    let plots: [(&str, Plot); 6] = [
        ("fig7", fig7),
        ("fig8", fig8),
        ("fig10", fig10),
        ("fig11", fig11),
        ("costmodel", costmodel),
        ("perturbation", perturbation),
    ];
    for (name, plot) in plots {
        match plot(&dir) {
            Ok(p) => eprintln!("wrote {}", p.display()),
            Err(e) => {
                eprintln!("plot: {name}: {e}");
                failed = true;
            }
        }
    }
    // The page's tables. Without `--page`, a directory with no page beside it (a scratch run)
    // only gets its plots.
    let explicit = page.is_some();
    let page = page.unwrap_or_else(|| dir.join("..").join("EVALUATION.md"));
    if explicit || page.exists() {
        match rewrite_page(&page, &dir) {
            Ok(o) => eprintln!(
                "{} {} ({} tables: {})",
                if o.changed { "wrote" } else { "unchanged:" },
                page.display(),
                o.tables.len(),
                o.tables.join(", ")
            ),
            Err(e) => {
                eprintln!("plot: tables: {e}");
                failed = true;
            }
        }
    } else {
        eprintln!("no page at {}; tables not written", page.display());
    }
    if failed {
        std::process::exit(1);
    }
}
