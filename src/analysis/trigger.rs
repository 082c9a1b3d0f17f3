//! The timeline's trigger (`CABPROF_TIMELINE_TRIGGER=parse:50ms`,
//! [`SessionBuilder::timeline_trigger`]): when a call of the chosen function lasts at least
//! the threshold, the timeline around it, from [`AROUND`] before its start to [`AROUND`] after
//! its end, is written as a Chrome trace beside the report (`<report>.trigger-<n>.trace.json`),
//! while the program runs.
//!
//! The analyzer that sees the call close only queues it ([`fire`]): a snapshot of the session
//! needs the analyzers, so taking one there would wait on itself. A writer thread waits
//! [`AROUND`] after the call, takes a snapshot and writes the window; calls queued when the
//! session finishes are written from its final report. A call inside a window already queued
//! is not written again, and a session writes at most [`MAX_FILES`] files (later firings are
//! counted in the message of the last).
//!
//! [`SessionBuilder::timeline_trigger`]: crate::SessionBuilder::timeline_trigger

use crate::model::{ReportData, TimelineData};
use crate::Report;
use cabprof_analyses::timeline::{Fired, Trigger};
use cabprof_cab::event::{MethodId, MAX_PAYLOAD};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Timeline kept on each side of a firing call.
pub(crate) const AROUND: Duration = Duration::from_secs(1);
/// Trigger files one session writes at most.
pub(crate) const MAX_FILES: usize = 16;

/// Which calls fire the trigger: of `function` (its name as the report prints it, or the
/// last segments of it: `parse` matches `json::parse` and `Parser::parse`), lasting at least
/// `min`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineTrigger {
    /// The function's name, or its last `::` segments.
    pub function: String,
    /// The shortest call that fires.
    pub min: Duration,
}

impl TimelineTrigger {
    /// What `CABPROF_TIMELINE_TRIGGER` accepts, for its error message.
    pub(crate) const FORM: &'static str =
        "NAME:DURATION, a function and a threshold (parse:50ms; units ns, us, ms, s)";

    /// `NAME:DURATION` (`parse:50ms`, `Parser::parse:1.5s`); `None` if malformed.
    pub fn parse(s: &str) -> Option<TimelineTrigger> {
        let (function, min) = s.trim().rsplit_once(':')?;
        let function = function.trim().trim_end_matches(':');
        if function.is_empty() {
            return None;
        }
        let min = min.trim();
        let split = min.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ' '))?;
        let (n, unit) = min.split_at(split);
        let n: f64 = n.trim().parse().ok().filter(|n: &f64| n.is_finite())?;
        let ns = n * match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            _ => return None,
        };
        (1.0..1e18).contains(&ns).then(|| TimelineTrigger {
            function: function.to_string(),
            min: Duration::from_nanos(ns as u64),
        })
    }

    /// Whether `name` (a report's function name) is this trigger's function.
    fn names(&self, name: &str) -> bool {
        name == self.function
            || name
                .strip_suffix(self.function.as_str())
                .is_some_and(|head| head.ends_with("::"))
    }
}

/// How a snapshot of the running session is taken.
pub(crate) type Snapshot = Arc<dyn Fn() -> Option<Report> + Send + Sync>;

/// Where a session's trigger files go and how it is snapshot.
struct Armed {
    snapshot: Snapshot,
    /// Files are `<dir>/<stem>.trigger-<n>.trace.json`.
    dir: PathBuf,
    stem: String,
}

#[derive(Default)]
struct State {
    /// The clock's rate, measured once as the session starts ([`prepare`]).
    ticks_per_ns: f64,
    armed: Option<Armed>,
    /// Set by [`disarm`]: the writer leaves what it has not written.
    stopping: bool,
    queue: VecDeque<Fired>,
    /// The last window queued (ticks modulo 2^60): a call within it is written with it.
    covered: Option<(u64, u64)>,
    written: usize,
    /// Firings beyond [`MAX_FILES`].
    dropped: u64,
    writer: Option<std::thread::JoinHandle<()>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    ticks_per_ns: 0.0,
    armed: None,
    stopping: false,
    queue: VecDeque::new(),
    covered: None,
    written: 0,
    dropped: 0,
    writer: None,
});
static WAKE: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A session with trigger `t` (or none) is about to start, its timing begun: measure the
/// clock's rate for the thresholds, and set the instrumentation's (see
/// `__private::set_trigger_ticks`).
pub(crate) fn prepare(t: Option<&TimelineTrigger>) {
    let ticks = match t {
        Some(t) => {
            let ticks_per_ns = super::time::clock_calibration().ticks_per_ns;
            state().ticks_per_ns = ticks_per_ns;
            min_ticks(t, ticks_per_ns)
        }
        None => u64::MAX,
    };
    crate::__private::set_trigger_ticks(ticks);
}

fn min_ticks(t: &TimelineTrigger, ticks_per_ns: f64) -> u64 {
    ((t.min.as_nanos() as f64 * ticks_per_ns) as u64).max(1)
}

/// The analysis' trigger for `t`: it watches the functions `t` names and queues their long
/// calls for the writer.
pub(crate) fn analysis_trigger(t: &TimelineTrigger) -> Trigger {
    let ticks_per_ns = state().ticks_per_ns;
    let wanted = t.clone();
    Trigger {
        watched: Arc::new(move |m: MethodId| {
            crate::names::lookup(m.get()).is_some_and(|n| wanted.names(&n.name))
        }),
        min_ticks: min_ticks(t, ticks_per_ns),
        fire: Arc::new(fire),
    }
}

/// Queue a firing call (on an analyzer's thread: never waits for the session).
fn fire(f: Fired) {
    let mut s = state();
    if s.armed.is_none() || s.stopping {
        return;
    }
    let end = f.start.wrapping_add(f.ticks) & MAX_PAYLOAD;
    // Within the window already queued (a snapshot's copy of the analysis, or a second long
    // call close to the first): written with it.
    if let Some((from, to)) = s.covered {
        if ticks_between(from, f.start) && ticks_between(end, to) {
            return;
        }
    }
    if s.written + s.queue.len() >= MAX_FILES {
        s.dropped += 1;
        return;
    }
    let around = around_ticks(&s);
    s.covered = Some((
        f.start.wrapping_sub(around) & MAX_PAYLOAD,
        end.wrapping_add(around) & MAX_PAYLOAD,
    ));
    s.queue.push_back(f);
    WAKE.notify_all();
}

/// Whether `a` comes at or before `b` on the clock (modulo 2^60, within half of it).
fn ticks_between(a: u64, b: u64) -> bool {
    b.wrapping_sub(a) & MAX_PAYLOAD <= MAX_PAYLOAD / 2
}

fn around_ticks(s: &State) -> u64 {
    (AROUND.as_nanos() as f64 * s.ticks_per_ns) as u64
}

/// A session with a trigger started: its files go to `dir`, named after `stem`.
pub(crate) fn arm(snapshot: Snapshot, dir: PathBuf, stem: String) {
    // A writer left by a session that ended without `disarm` (dropped unfinished) stops first:
    // two writers would write one window twice.
    let old = {
        let mut s = state();
        s.stopping = true;
        WAKE.notify_all();
        s.writer.take()
    };
    if let Some(w) = old {
        let _ = w.join();
    }
    let mut s = state();
    *s = State {
        ticks_per_ns: s.ticks_per_ns,
        armed: Some(Armed {
            snapshot,
            dir,
            stem,
        }),
        ..State::default()
    };
    match std::thread::Builder::new()
        .name("cabprof-trigger".into())
        .spawn(write_queued)
    {
        Ok(h) => s.writer = Some(h),
        Err(e) => eprintln!("cabprof: the timeline trigger is off: its thread did not start: {e}"),
    }
}

/// The writer: each queued call, [`AROUND`] after it, from a snapshot.
fn write_queued() {
    loop {
        let mut s = state();
        while s.queue.is_empty() && !s.stopping {
            s = WAKE.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.stopping {
            return;
        }
        // Let the time after the call pass (or the session finish).
        let (s, _) = WAKE
            .wait_timeout_while(s, AROUND, |s| !s.stopping)
            .unwrap_or_else(|e| e.into_inner());
        if s.stopping {
            return;
        }
        let Some(f) = s.queue.front().copied() else {
            continue;
        };
        let Some(snapshot) = s.armed.as_ref().map(|a| a.snapshot.clone()) else {
            return;
        };
        drop(s);
        let Some(report) = snapshot() else {
            // Finished meanwhile: `disarm` writes it from the final report.
            return;
        };
        let target = {
            let mut s = state();
            if s.stopping {
                return;
            }
            s.queue.pop_front();
            next_target(&mut s)
        };
        if let Some(target) = target {
            let mut data = report.data;
            if let Some(t) = data.timeline.take() {
                write_window(target, &mut data, &t, f);
            }
        }
    }
}

/// The session finished with `report` (`None`: dropped without one): stop the writer and
/// write what it left.
pub(crate) fn disarm(report: Option<&Report>) {
    let writer = {
        let mut s = state();
        if s.armed.is_none() {
            return;
        }
        s.stopping = true;
        WAKE.notify_all();
        s.writer.take()
    };
    if let Some(w) = writer {
        let _ = w.join();
    }
    let mut s = state();
    // One copy of the report, its timeline taken out, for all the windows left.
    let mut left = report
        .filter(|_| !s.queue.is_empty())
        .map(|r| r.data.clone())
        .and_then(|mut d| Some((d.timeline.take()?, d)));
    while let Some(f) = s.queue.pop_front() {
        if let (Some((t, data)), Some(target)) = (left.as_mut(), next_target(&mut s)) {
            write_window(target, data, t, f);
        }
    }
    if s.dropped > 0 {
        eprintln!(
            "cabprof: the timeline trigger fired {} more times (at most {MAX_FILES} files are written)",
            s.dropped
        );
    }
    *s = State::default();
    crate::__private::set_trigger_ticks(u64::MAX);
}

/// Where the next trigger file goes, and the clock's rate: taken under the lock, so that the
/// file is written without it (an analyzer queueing a call never waits for a write).
struct Target {
    path: PathBuf,
    dir: PathBuf,
    around: u64,
}

/// The next file's [`Target`], counted as written; `None` if disarmed.
fn next_target(s: &mut State) -> Option<Target> {
    let armed = s.armed.as_ref()?;
    let (dir, stem) = (armed.dir.clone(), armed.stem.clone());
    s.written += 1;
    Some(Target {
        path: dir.join(format!("{stem}.trigger-{}.trace.json", s.written)),
        dir,
        around: around_ticks(s),
    })
}

/// Write the timeline around `f` from `t` (with the rest of the report, `data`, its timeline
/// taken out) to `target`, and say so on standard error.
fn write_window(target: Target, data: &mut ReportData, t: &TimelineData, f: Fired) {
    let from = f.start.wrapping_sub(target.around) & MAX_PAYLOAD;
    let to = f.start.wrapping_add(f.ticks).wrapping_add(target.around) & MAX_PAYLOAD;
    data.timeline = Some(t.between(from, to));
    let trace = data.chrome_trace();
    data.timeline = None;
    let Some(trace) = trace else {
        return;
    };
    let path = target.path;
    let name = crate::names::lookup(f.method.get()).map_or_else(|| "?".into(), |n| n.name);
    let ms = f.ticks as f64 / t.ticks_per_ns / 1e6;
    let written = std::fs::create_dir_all(&target.dir).and_then(|()| {
        crate::report::file::write(&path, crate::report::file::Contents::ChromeTrace, |w| {
            w.write_all(trace.as_bytes())
        })
    });
    match written {
        Ok(_) => eprintln!(
            "cabprof: {name} took {ms:.1} ms: the timeline around it is in {}",
            path.display()
        ),
        Err(e) => eprintln!("cabprof: {name} took {ms:.1} ms; its timeline was not written: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_is_a_name_and_a_duration() {
        for (text, function, ns) in [
            ("parse:50ms", "parse", 50_000_000),
            (
                " json::Parser::parse : 1.5s ",
                "json::Parser::parse",
                1_500_000_000,
            ),
            ("f:250us", "f", 250_000),
            ("f:10ns", "f", 10),
            ("f:3µs", "f", 3_000),
        ] {
            let t = TimelineTrigger::parse(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(t.function, function, "{text}");
            assert_eq!(t.min, Duration::from_nanos(ns), "{text}");
        }
        for bad in [
            "",
            "parse",
            ":50ms",
            "parse:",
            "parse:50",
            "parse:50 m",
            "parse:-1ms",
            "f:0s",
            "f:nanms",
        ] {
            assert_eq!(TimelineTrigger::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_trigger_names_a_function_by_its_last_segments() {
        let t = TimelineTrigger::parse("Parser::parse:1ms").unwrap();
        assert!(t.names("Parser::parse"));
        assert!(t.names("json::Parser::parse"));
        assert!(!t.names("MyParser::parse"));
        assert!(!t.names("parse"));
    }
}
