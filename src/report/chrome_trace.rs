//! The timeline as Chrome's Trace Event JSON: what `chrome://tracing`, Perfetto's UI, the
//! DevTools performance panel and speedscope open.
//!
//! One `X` (complete) event per slice, with its start (`ts`) and duration (`dur`) in
//! microseconds, on its thread (`tid`: the timeline's threads numbered from 1 in report order),
//! preceded by `M` (metadata) events naming the process and each thread. Every event is named
//! (the DevTools trace engine rejects nameless ones). A thread's slices are written by start,
//! a parent before the children it encloses; start and end are rounded to the nanosecond
//! before the duration is taken, so a child's rounded interval stays inside its parent's.
//! The report's other analyses are not in it; `otherData` says whether the events were sampled
//! (`sampled_events`: a sampled ring keeps bursts of events, so calls are missing), whether one
//! call in `sample_period` was timed (only timed calls are slices), and whether the calls are
//! compensated (then cabprof's own time is in slices named `cabprof`, category `cabprof`). A
//! wait at a `cabprof::sync` lock or channel is a slice of category `wait`, named by its kind
//! and site, inside the call that waited.

use super::ReportData;
use crate::model::{TimelineSlice, CABPROF_SLICE};
use std::fmt::Write as _;

impl ReportData {
    /// The timeline as Chrome Trace Event JSON (`{"traceEvents": [...]}`); `None` if the
    /// report has no timeline (the `timeline` analysis did not run). See
    /// `src/report/chrome_trace.rs` for what it holds.
    pub fn chrome_trace(&self) -> Option<String> {
        let t = self.timeline.as_ref()?;
        let names = self.method_names();
        let mut o = String::from("{\"traceEvents\":[\n");
        let json = |s: &str| miniserde::json::to_string(s);
        let _ = write!(
            o,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":{}}}}}",
            json("cabprof")
        );
        for (i, th) in t.threads.iter().enumerate() {
            let tid = i + 1;
            let _ = write!(
                o,
                ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
                json(&th.thread)
            );
            let _ = write!(
                o,
                ",\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"
            );
        }
        for (i, th) in t.threads.iter().enumerate() {
            let tid = i + 1;
            let mut slices: Vec<&TimelineSlice> = th.slices.iter().collect();
            // By start, then outermost first: a reader that nests by order sees each parent
            // before its children.
            slices.sort_by(|a, b| {
                a.start_ns
                    .total_cmp(&b.start_ns)
                    .then(a.depth.cmp(&b.depth))
            });
            for s in slices {
                let start = s.start_ns.round();
                let end = (s.start_ns + s.duration_ns).round();
                let _ = write!(
                    o,
                    ",\n{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":1,\"tid\":{tid},\"args\":{{\"depth\":{}}}}}",
                    json(&slice_label(&names, s)),
                    match (s.method, s.poll) {
                        _ if s.wait.is_some() => "wait",
                        (CABPROF_SLICE, _) => "cabprof",
                        (_, true) => "poll",
                        _ => "call",
                    },
                    micros(start),
                    micros((end - start).max(0.0)),
                    s.depth
                );
            }
        }
        flows(t, &mut o);
        let _ = write!(
            o,
            "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"producer\":\"cabprof\",\"sampled_events\":{},\"sample_period\":{},\"slices_per_thread\":{},\"compensated\":{}}}}}\n",
            self.is_sampled(),
            t.sample_period,
            t.slices_per_thread,
            t.compensated
        );
        Some(o)
    }
}

/// A slice's name: a wait's kind and site (`lock wait: Mutex src/lib.rs:12:9`), else
/// [`slice_name`].
pub(crate) fn slice_label(names: &crate::model::MethodNames<'_>, s: &TimelineSlice) -> String {
    match &s.wait {
        Some(w) => format!("{} wait: {}", w.kind, w.site),
        None => slice_name(names, s.method),
    }
}

/// A slice's name: its function's, or `cabprof` for time inside cabprof.
pub(crate) fn slice_name(names: &crate::model::MethodNames<'_>, method: u32) -> String {
    if method == CABPROF_SLICE {
        "cabprof".into()
    } else {
        names.name(method)
    }
}

/// Flow events tying each future's polls together, in time order across threads: a flow
/// starts (`s`) at its first poll, steps (`t`) through the next and finishes (`f`) at its
/// last, each bound to the poll slice that starts at its instant. One flow per task id
/// (`id`: the task's; a task id freed by a finished future and taken by a later one joins
/// their flows).
fn flows(t: &crate::model::TimelineData, o: &mut String) {
    let mut polls: std::collections::BTreeMap<u32, Vec<(f64, usize)>> = Default::default();
    for (i, th) in t.threads.iter().enumerate() {
        for s in &th.slices {
            if let (true, Some(task)) = (s.poll, s.task) {
                polls
                    .entry(task)
                    .or_default()
                    .push((s.start_ns.round(), i + 1));
            }
        }
    }
    for (task, mut list) in polls {
        if list.len() < 2 {
            continue;
        }
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        let last = list.len() - 1;
        for (k, (start, tid)) in list.into_iter().enumerate() {
            let ph = match k {
                0 => "s",
                k if k == last => "f",
                _ => "t",
            };
            let _ = write!(
                o,
                ",\n{{\"name\":\"future\",\"cat\":\"poll\",\"ph\":\"{ph}\",\"id\":{task},\"ts\":{},\"pid\":1,\"tid\":{tid}{}}}",
                micros(start),
                if ph == "s" { "" } else { ",\"bp\":\"e\"" }
            );
        }
    }
}

/// Whole nanoseconds `ns` as microseconds with three decimals (exact in decimal).
fn micros(ns: f64) -> String {
    let ns = ns.max(0.0) as u64;
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

#[cfg(test)]
mod tests {
    use crate::model::{MethodEntry, ReportData, TimelineData, TimelineSlice, TimelineThread};

    fn slice(method: u32, depth: u32, start_ns: f64, duration_ns: f64) -> TimelineSlice {
        TimelineSlice {
            method,
            depth,
            poll: false,
            task: None,
            wait: None,
            start_ns,
            duration_ns,
        }
    }

    #[test]
    fn slices_become_named_complete_events_on_named_threads() {
        let mut d = ReportData::default();
        assert_eq!(d.chrome_trace(), None);
        d.methods = ["outer", "inner \"x\""]
            .iter()
            .enumerate()
            .map(|(i, n)| MethodEntry {
                id: i as u32 + 1,
                name: (*n).into(),
                module: String::new(),
                file: String::new(),
                line: 0,
            })
            .collect();
        d.timeline = Some(TimelineData {
            ticks_per_ns: 1.0,
            sample_period: 1,
            slices_per_thread: 10,
            compensated: false,
            origin_ticks: None,
            threads: vec![TimelineThread {
                thread: "main".into(),
                overwritten: 0,
                slices: vec![slice(2, 1, 1500.4, 999.9), slice(1, 0, 1000.0, 5000.0)],
            }],
        });
        let t = d.chrome_trace().unwrap();
        let v: miniserde::json::Value = miniserde::json::from_str(&t).expect("valid JSON");
        drop(v);
        assert!(
            t.contains(r#""name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"main"}"#)
        );
        let outer = t.find(r#""name":"outer""#).unwrap();
        let inner = t.find(r#""name":"inner \"x\"""#).unwrap();
        assert!(outer < inner, "the parent first");
        assert!(t.contains(r#""ph":"X","ts":1.000,"dur":5.000"#));
        // 1500.4 → 1500, end 2500.3 → 2500.
        assert!(t.contains(r#""ph":"X","ts":1.500,"dur":1.000"#));
        assert!(t.contains(r#""sampled_events":false,"sample_period":1"#));
    }
}
