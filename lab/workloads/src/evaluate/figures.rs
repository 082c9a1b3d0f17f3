//! The figures' CSV tables (Figures 7, 8, 10 and 11, the cost model, pinning and the
//! workloads), each built from the measured cells.

use super::cells::{
    basis_points, cfg_fields, fig10_analysis, fig11_analyses, fig7_analyses, fig8_analyses, Cfg,
    ConcurrentFields, FIG10_CHUNK_BYTES,
};
use super::measure::{results_key, WorkloadResults};
use super::table::{f, Table};
use super::Options;
use crate::{Variant, Workload};
use cabprof::{Analysis, BufferDesign, ReportData};
use cabprof_bench_support::stats::median;
use std::collections::HashMap;

pub(crate) fn fig7(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "design",
        "median_s",
        "ratio_to_cab",
        "producer_blocks",
    ]);
    for r in res {
        for a in fig7_analyses(&r.workload) {
            let cab = r.cell(Cfg::concurrent(a)).median_s();
            for d in BufferDesign::ALL {
                let c = r.cell(
                    ConcurrentFields {
                        design: d,
                        ..cfg_fields(Cfg::concurrent(a))
                    }
                    .into(),
                );
                t.push(vec![
                    r.workload.name.into(),
                    a.name().into(),
                    d.name().into(),
                    f(c.median_s(), 6),
                    f(c.median_s() / cab, 4),
                    f(c.median_of(|x| x.blocks as f64), 0),
                ]);
            }
        }
    }
    t
}

/// Figure 8's bars of `(workload, analysis)`, in order.
fn bars(a: Analysis) -> [(&'static str, Cfg); 5] {
    let v = Variant::for_analysis(a);
    [
        ("instrument", Cfg::Instrument(v)),
        ("enqueue", Cfg::Enqueue(v)),
        ("communication", Cfg::Communication(v)),
        ("concurrent", Cfg::concurrent(a)),
        ("sequential", Cfg::sequential(a)),
    ]
}

pub(crate) fn fig8(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "bar",
        "median_s",
        "overhead_vs_A",
        "A_s",
        "min_s",
        "max_s",
    ]);
    for r in res {
        for a in fig8_analyses(&r.workload) {
            for (bar, c) in bars(a) {
                let cell = r.cell(c);
                let (lo, hi) = cell.spread();
                t.push(vec![
                    r.workload.name.into(),
                    a.name().into(),
                    bar.into(),
                    f(cell.median_s(), 6),
                    f(r.overhead(c), 4),
                    f(r.a(), 6),
                    f(lo, 6),
                    f(hi, 6),
                ]);
            }
        }
    }
    t
}

pub(crate) fn fig10_cfg(w: &Workload, buffer: usize) -> Cfg {
    let a = fig10_analysis(w);
    Cfg::Concurrent {
        variant: Variant::for_analysis(a),
        analysis: a,
        design: BufferDesign::Cab,
        buffer,
        chunk: FIG10_CHUNK_BYTES,
        unpinned: false,
    }
}

pub(crate) fn fig10(res: &[WorkloadResults], o: &Options) -> (Table, Table) {
    let mut t = Table::new(&[
        "workload",
        "buffer_bytes",
        "median_s",
        "producer_blocks",
        "blocks_per_s",
        "analysis",
        "overhead_vs_A",
        "blocked_s",
    ]);
    let mut p = Table::new(&[
        "workload",
        "buffer_bytes",
        "blocks_per_s",
        "slowdown_vs_largest",
        "results_identical",
        "analysis",
        "blocked_fraction",
        "runs_compared",
    ]);
    let largest = *o.buffers.iter().max().expect("at least one buffer size");
    for r in res {
        let w = &r.workload;
        let big = r.cell(fig10_cfg(w, largest));
        let reference = big.runs[0]
            .data
            .as_ref()
            .map(results_key)
            .expect("report kept");
        for &b in &o.buffers {
            let c = r.cell(fig10_cfg(w, b));
            let blocks = c.median_of(|x| x.blocks as f64);
            let bps = c.median_of(|x| x.blocks as f64 / x.secs);
            let blocked = c.median_of(|x| x.blocked_s);
            let identical = c
                .runs
                .iter()
                .all(|x| x.data.as_ref().map(results_key).expect("report kept") == reference);
            let name = fig10_analysis(w).name();
            t.push(vec![
                w.name.into(),
                b.to_string(),
                f(c.median_s(), 6),
                f(blocks, 0),
                f(bps, 1),
                name.into(),
                f(r.overhead(fig10_cfg(w, b)), 4),
                f(blocked, 6),
            ]);
            p.push(vec![
                w.name.into(),
                b.to_string(),
                f(bps, 1),
                f(c.median_s() / big.median_s(), 4),
                identical.to_string(),
                name.into(),
                f(c.median_of(|x| x.blocked_s / x.secs), 4),
                c.runs.len().to_string(),
            ]);
        }
    }
    (t, p)
}

pub(crate) fn sampling_cfg(a: Analysis, rate: f64) -> Cfg {
    Cfg::Sampling {
        variant: Variant::for_analysis(a),
        analysis: a,
        basis_points: basis_points(rate),
    }
}

/// The error of one sampled report against the exact one, for analysis `a`.
pub(crate) fn error_of(sampled: &ReportData, exact: &ReportData, a: Analysis) -> f64 {
    if sampled.session.rate_used <= 0.0 {
        return f64::NAN;
    }
    let e = sampled.sampling_error(exact);
    match a {
        Analysis::CallGraph => e.call_graph,
        Analysis::Paths => e.paths,
        Analysis::CallTree => e.call_tree,
        Analysis::MethodCount => e.method_count,
        _ => None,
    }
    .unwrap_or(f64::NAN)
}

/// A count-weighted error of one sampled report: `sum |actual - sampled/rate| / sum actual`
/// over the exact profile's entries (call-graph edges or paths). Unlike the paper's error
/// rate, which weighs a once-seen edge like the hottest one, this says how much of the
/// profile's mass the estimate misplaces.
pub(crate) fn weighted_error_of(sampled: &ReportData, exact: &ReportData, a: Analysis) -> f64 {
    let rate = sampled.estimate_rate();
    if sampled.session.rate_used <= 0.0 {
        return f64::NAN;
    }
    let (x, y) = (entries(exact, a), entries(sampled, a));
    let total: u64 = x.values().sum();
    if total == 0 {
        return f64::NAN;
    }
    let off: f64 = x
        .iter()
        .map(|(k, &n)| (n as f64 - y.get(k).copied().unwrap_or(0) as f64 / rate).abs())
        .sum();
    off / total as f64
}

/// The entries of a profile the error rates run over: call-graph edges or (method, path).
pub(crate) fn entries(d: &ReportData, a: Analysis) -> HashMap<(u32, u32), u64> {
    match a {
        Analysis::CallGraph => d.edge_counts(),
        Analysis::Paths => d.path_counts(),
        _ => None,
    }
    .unwrap_or_default()
}

/// A sample expecting fewer hits than this of an entry (`count × rate`) cannot estimate it
/// well: the paper's metric gives each such entry an error near 100 % (or far above, when
/// one burst happens to catch it).
pub(crate) const FEW_EXPECTED: f64 = 10.0;

pub(crate) fn fig11(res: &[WorkloadResults], o: &Options) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "rate",
        "median_s",
        "overhead_vs_A",
        "error_rate",
        "exhaustive_overhead_vs_A",
        "overhead_ratio_to_exhaustive",
        "events_lapped",
        "weighted_error",
        "entries",
        "entries_expecting_under_10",
    ]);
    for r in res {
        for a in fig11_analyses(&r.workload) {
            let exh = r.cell(Cfg::concurrent(a));
            let exact = exh.runs[0].data.as_ref().expect("report kept");
            let exact_entries = entries(exact, a);
            let exh_over = r.overhead(Cfg::concurrent(a));
            for &rate in &o.rates {
                let c = r.cell(sampling_cfg(a, rate));
                let err = median(
                    &c.runs
                        .iter()
                        .map(|x| error_of(x.data.as_ref().expect("report kept"), exact, a))
                        .filter(|e| e.is_finite())
                        .collect::<Vec<_>>(),
                );
                let lapped = c.median_of(|x| {
                    x.data
                        .as_ref()
                        .map_or(0.0, |d| d.totals.events_lapped as f64)
                });
                let werr = median(
                    &c.runs
                        .iter()
                        .map(|x| weighted_error_of(x.data.as_ref().expect("report kept"), exact, a))
                        .filter(|e| e.is_finite())
                        .collect::<Vec<_>>(),
                );
                let over = r.overhead(sampling_cfg(a, rate));
                t.push(vec![
                    r.workload.name.into(),
                    a.name().into(),
                    f(rate, 2),
                    f(c.median_s(), 6),
                    f(over, 4),
                    f(err, 4),
                    f(exh_over, 4),
                    f(over / exh_over, 4),
                    f(lapped, 0),
                    f(werr, 4),
                    exact_entries.len().to_string(),
                    exact_entries
                        .values()
                        .filter(|&&n| (n as f64) * rate < FEW_EXPECTED)
                        .count()
                        .to_string(),
                ]);
            }
        }
    }
    t
}

/// The cost model's terms of one `(workload, analysis)`.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// `A`: the uninstrumented time.
    pub a: f64,
    /// `A_i`: instrumentation.
    pub a_i: f64,
    /// `A_q`: enqueuing.
    pub a_q: f64,
    /// `P`: the analysis alone (replay).
    pub p: f64,
    /// `P_c`: the analyzer's communication (dequeue, clear, poll).
    pub p_c: f64,
    /// `E_s`: sequential (inline) analysis.
    pub e_s: f64,
    /// `E_c`: concurrent analysis.
    pub e_c: f64,
}

impl Model {
    /// The application's side: `A + A_i + A_q`.
    pub fn app_side(&self) -> f64 {
        self.a + self.a_i + self.a_q
    }
    /// The analyzer's side: `P + P_c`.
    pub fn analyzer_side(&self) -> f64 {
        self.p + self.p_c
    }
    /// The model's `E_c`: the larger side.
    pub fn predicted(&self) -> f64 {
        self.app_side().max(self.analyzer_side())
    }
    /// `I_ap = E_s − A − A_i − P` (equation 1 solved for the interference).
    pub fn i_ap(&self) -> f64 {
        self.e_s - self.a - self.a_i - self.p
    }
}

pub(crate) fn model(r: &WorkloadResults, a: Analysis) -> Model {
    let v = Variant::for_analysis(a);
    let t_a = r.a();
    let t_i = r.cell(Cfg::Instrument(v)).median_s();
    let t_q = r.cell(Cfg::Enqueue(v)).median_s();
    Model {
        a: t_a,
        a_i: t_i - t_a,
        a_q: t_q - t_i,
        p: r.cell(Cfg::Replay(v, a)).median_s(),
        p_c: r
            .cell(Cfg::Communication(v))
            .median_of(|x| x.analyzer_cpu_s),
        e_s: r.cell(Cfg::sequential(a)).median_s(),
        e_c: r.cell(Cfg::concurrent(a)).median_s(),
    }
}

pub(crate) fn costmodel(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "A",
        "A_i",
        "A_q",
        "P",
        "P_c",
        "E_s",
        "E_c",
        "predicted",
        "measured",
        "predicted_over_measured",
        "dominant",
        "I_ap",
        "events",
        "P_extrapolated",
    ]);
    for r in res {
        for a in fig8_analyses(&r.workload) {
            let m = model(r, a);
            let v = Variant::for_analysis(a);
            t.push(vec![
                r.workload.name.into(),
                a.name().into(),
                f(m.a, 6),
                f(m.a_i, 6),
                f(m.a_q, 6),
                f(m.p, 6),
                f(m.p_c, 6),
                f(m.e_s, 6),
                f(m.e_c, 6),
                f(m.predicted(), 6),
                f(m.e_c, 6),
                f(m.predicted() / m.e_c, 4),
                if m.app_side() >= m.analyzer_side() {
                    "application".into()
                } else {
                    "analyzer".into()
                },
                f(m.i_ap(), 6),
                r.events.get(&v).copied().unwrap_or(0).to_string(),
                r.extrapolated.contains(&v).to_string(),
            ]);
        }
    }
    t
}

pub(crate) fn pinning(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "analysis",
        "pinned_s",
        "unpinned_s",
        "pinned_overhead_vs_A",
        "unpinned_overhead_vs_A",
    ]);
    for r in res {
        let a = fig10_analysis(&r.workload);
        let pinned = Cfg::concurrent(a);
        let unpinned: Cfg = ConcurrentFields {
            unpinned: true,
            ..cfg_fields(pinned)
        }
        .into();
        if let Some(u) = r.cells.get(&unpinned) {
            t.push(vec![
                r.workload.name.into(),
                a.name().into(),
                f(r.cell(pinned).median_s(), 6),
                f(u.median_s(), 6),
                f(r.overhead(pinned), 4),
                f(r.overhead(unpinned), 4),
            ]);
        }
    }
    t
}

pub(crate) fn workloads_table(res: &[WorkloadResults]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "size",
        "threads",
        "A_s",
        "events_calls_variant",
        "events_paths_variant",
        "events_memory_variant",
        "wall_s",
    ]);
    for r in res {
        let ev = |v| {
            r.events
                .get(&v)
                .map_or(String::new(), |n: &u64| n.to_string())
        };
        t.push(vec![
            r.workload.name.into(),
            r.size.name().into(),
            r.workload.threads.to_string(),
            f(r.a(), 6),
            ev(Variant::Calls),
            ev(Variant::Paths),
            ev(Variant::Memory),
            f(r.wall_s, 1),
        ]);
    }
    t
}
