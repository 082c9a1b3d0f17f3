//! Overhead compensation as a user meets it: the calibration stated in the report, the raw
//! figures kept beside the compensated ones, the time a thread spends inside cabprof (a
//! snapshot here) taken out of the frames open meanwhile, and reports written before
//! compensation existed still read back. One session at a time.

use cabprof::{profile, Analysis, ReportData, RunMode, Session};
use std::time::{Duration, Instant};

use crate::support::SERIAL;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[profile]
fn leaf(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(3)
}

#[profile]
fn caller(n: u64) -> u64 {
    (0..n).fold(0, |a, i| a ^ leaf(i))
}

/// Spins `spin` and takes a snapshot of the running session in the middle.
#[profile]
fn snapshotting(s: &cabprof::Snapshotter, spin: Duration) -> Duration {
    let t = Instant::now();
    while t.elapsed() < spin {
        std::hint::spin_loop();
    }
    let taken = Instant::now();
    let _ = s.snapshot().expect("the session runs");
    taken.elapsed()
}

/// The report of a session of the time analysis around `caller(n)`.
fn timed_caller(n: u64) -> ReportData {
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    std::hint::black_box(caller(n));
    s.finish().data
}

fn entry<'a>(d: &'a ReportData, name: &str) -> &'a cabprof::report::FunctionTimeEntry {
    let t = d.time.as_ref().expect("time ran");
    t.functions
        .iter()
        .find(|f| d.name(f.method).ends_with(name))
        .unwrap_or_else(|| panic!("{name} in the report"))
}

#[test]
fn the_report_states_the_calibration_and_keeps_the_raw_figures() {
    let _g = serial();
    for mode in [
        RunMode::Exhaustive,
        RunMode::Sequential,
        RunMode::sampling(1.0),
    ] {
        let s = Session::builder()
            .analyses(&[Analysis::Time])
            .mode(mode)
            .time_raw(true)
            .start()
            .unwrap();
        std::hint::black_box(caller(20_000));
        let r = s.finish();
        let t = r.data.time.as_ref().unwrap();
        let c = t.compensation.as_ref().expect("calibrated");
        assert!(c.timed_ns > 0.0, "{mode:?}: {c:?}");
        assert!(
            c.timed_ns_at_finish.is_some(),
            "{mode:?}: measured again at finish"
        );
        let text = r.text(10);
        assert!(
            text.contains("compensated: each timed call's own time less"),
            "{text}"
        );
        if matches!(mode, RunMode::Sampling { .. }) {
            // A sampling ring may lose any word (the caller's one call among them).
            continue;
        }
        let (l, cl) = (entry(&r.data, "leaf"), entry(&r.data, "caller"));
        assert_eq!(l.calls, 20_000);
        // Compensated below raw: the caller loses what its 20 000 timed calls cost it.
        let raw = cl.raw_inclusive_ns.unwrap();
        assert!(
            cl.inclusive_ns < raw,
            "{mode:?}: {} vs raw {raw}",
            cl.inclusive_ns
        );
        assert!(
            raw - cl.inclusive_ns >= 0.5 * 20_000.0 * c.timed_ns,
            "{mode:?}: at least half of the calibrated cost of its calls is taken out"
        );
        assert!(l.mean_ns <= l.raw_mean_ns.unwrap());
        assert!(
            text.contains("raw incl"),
            "time_raw shows the raw columns: {text}"
        );
    }
}

#[test]
fn a_snapshot_is_taken_out_of_the_frames_open_around_it() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time, Analysis::CallTree])
        .start()
        .unwrap();
    // Enough events for the snapshot to have work to do.
    std::hint::black_box(caller(50_000));
    let snap_took = snapshotting(&s.snapshotter(), Duration::from_millis(3));
    let r = s.finish();
    let f = entry(&r.data, "snapshotting");
    let t = r.data.time.as_ref().unwrap();
    let inside = t.inside_cabprof_ns.unwrap();
    assert!(t.inside_cabprof_entries.unwrap() >= 1);
    let raw = f.raw_inclusive_ns.unwrap();
    let snap = snap_took.as_nanos() as f64;
    assert!(
        raw >= 3e6 + snap * 0.9,
        "raw {raw} holds the spin and the snapshot ({snap})"
    );
    assert!(
        f.inclusive_ns <= raw - 0.9 * snap,
        "the snapshot ({snap} ns) is taken out: {} of raw {raw} (inside cabprof {inside})",
        f.inclusive_ns
    );
    assert!(
        f.inclusive_ns >= 3e6 * 0.95,
        "the spin stays: {}",
        f.inclusive_ns
    );
}

#[test]
fn a_report_without_compensation_reads_back() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::Time])
        .start()
        .unwrap();
    std::hint::black_box(caller(100));
    let json = s.finish().data.json();
    // As a report from before compensation existed: none of its fields.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let t = v["time"].as_object_mut().unwrap();
    for k in [
        "compensation",
        "inside_cabprof_ns",
        "inside_cabprof_entries",
        "show_raw",
    ] {
        assert!(t.remove(k).is_some(), "{k} is written");
    }
    // Every entry of `list` loses `keys`, which it must have had if `written` (a function's
    // `below_resolution` is written only with compensation).
    let strip = |list: &mut serde_json::Value, keys: &[&str], written: bool| {
        for e in list.as_array_mut().unwrap() {
            let e = e.as_object_mut().unwrap();
            for k in keys {
                assert!(e.remove(*k).is_some() || !written, "{k} is written");
            }
        }
    };
    let (raw, below) = (["raw_inclusive_ns", "raw_exclusive_ns"], "below_resolution");
    strip(
        &mut t["functions"],
        &[raw[0], raw[1], "raw_mean_ns", below],
        false,
    );
    strip(
        &mut t["contexts"],
        &[raw[0], raw[1], "exclusive_clipped", below],
        true,
    );
    let old = ReportData::from_json(&v.to_string()).expect("an older report reads back");
    let t = old.time.as_ref().unwrap();
    assert!(t.compensation.is_none() && t.functions[0].raw_inclusive_ns.is_none());
    assert!(t.contexts.iter().all(|c| c.below_resolution.is_none()));
    assert!(old.text(20).contains("time by calling context"));
}

/// The program's own threads measure again as their rings lap: a small ring laps many times
/// over a run, and the report says how many probes ran and what they measured; the probes'
/// time is taken out of the frames open around them, and their words are no calls.
#[test]
fn threads_measure_again_as_their_rings_lap() {
    let _g = serial();
    let s = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::Time])
        .buffer_bytes(64 << 10)
        .chunk_bytes(8 << 10)
        .start()
        .unwrap();
    // 2 words per call, a lap every 4096 calls: about 50 laps, probed at most every few
    // milliseconds.
    let mut v = 0;
    let mut rounds = 0u64;
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(60) {
        v ^= caller(20_000);
        rounds += 1;
    }
    std::hint::black_box(v);
    let r = s.finish();
    let d = &r.data;
    let c = d
        .time
        .as_ref()
        .and_then(|t| t.compensation.as_ref())
        .expect("compensated");
    let during = c.during.as_ref().expect("probes ran during the session");
    assert!(during.probes >= 2, "{during:?}");
    assert!(
        during.timed_ns.min > 0.0 && during.timed_ns.min <= during.timed_ns.median,
        "{during:?}"
    );
    // Inside cabprof: the probes' time, one entry each at least.
    let t = d.time.as_ref().unwrap();
    assert!(
        t.inside_cabprof_entries.unwrap_or(0) >= during.probes,
        "{t:?}"
    );
    // No function but the program's: the probe is not a call.
    let names: Vec<String> = t.functions.iter().map(|f| d.name(f.method)).collect();
    assert!(
        names.iter().all(|n| !n.contains("calibration")),
        "{names:?}"
    );
    // Exactly the program's calls: the probes' words are no calls of any function.
    let counted = d.method_count.as_ref().expect("method count ran");
    let count = |name: &str| {
        counted
            .iter()
            .filter(|e| d.name(e.method).ends_with(name))
            .map(|e| e.count)
            .sum::<u64>()
    };
    assert_eq!(
        (count("::caller"), count("::leaf")),
        (rounds, rounds * 20_000)
    );
    assert_eq!(
        counted.iter().map(|e| e.count).sum::<u64>(),
        rounds * 20_001,
        "{counted:?}"
    );
    assert!(entry(d, "caller").calibration_error_ns.is_some());
}

/// A caller's own time less what callees below resolution took out of it is uncertain by as
/// much: the text names the caller and the amount, where it is at least a tenth of the
/// caller's own time, and says nothing otherwise. A real session's report, its flags and
/// figures set to each case.
#[test]
fn own_times_leaning_on_callees_below_resolution_are_named() {
    let _g = serial();
    let data = timed_caller(1000);
    let id = |name: &str| entry(&data, name).method;
    let (caller_id, leaf_id) = (id("::caller"), id("::leaf"));
    // What leaf took out of caller: 1 ms (a loaded host may compensate it to 0).
    let taken = 1e6;
    let with = |leaf_bounded: bool, caller_own: f64| {
        let mut d = data.clone();
        let t = d.time.as_mut().unwrap();
        let edge = t
            .edges
            .iter_mut()
            .find(|e| (e.caller, e.callee) == (caller_id, leaf_id))
            .expect("the caller -> leaf edge");
        edge.inclusive_ns = taken;
        for f in &mut t.functions {
            if f.method == leaf_id {
                f.below_resolution = Some(leaf_bounded);
            } else if f.method == caller_id {
                f.below_resolution = Some(false);
                f.exclusive_ns = caller_own;
            }
        }
        d.text(20)
    };
    let line = |text: &str| {
        text.lines()
            .find(|l| l.contains("own times less callees below resolution"))
            .map(str::to_string)
    };
    let text = with(true, 5.0 * taken);
    let l = line(&text).unwrap_or_else(|| panic!("the line in {text}"));
    assert!(l.contains("time_compensation::caller ("), "{l}");
    assert!(l.contains("(1.00 ms taken out)"), "{l}");
    assert!(
        !l.contains("::leaf ("),
        "the bounded callee is not listed: {l}"
    );
    // Under a tenth of the caller's own time, or no callee below resolution: no line.
    assert_eq!(line(&with(true, 20.0 * taken)), None);
    assert_eq!(line(&with(false, 5.0 * taken)), None);
}

/// A calling context whose calls are cheaper than the calibration resolves is marked as its
/// function is, and the contexts' table shows bounds for it, not the estimate.
#[test]
fn contexts_below_resolution_show_bounds() {
    let _g = serial();
    let data = timed_caller(20_000);
    let t = data.time.as_ref().expect("time ran");
    let resolution = t.compensation.as_ref().expect("compensated").resolution_ns;
    let leaf_id = entry(&data, "::leaf").method;
    let context = |d: &ReportData| {
        let t = d.time.as_ref().unwrap();
        let i = t.contexts.iter().position(|c| c.method == leaf_id);
        i.expect("leaf's context")
    };
    let c = &t.contexts[context(&data)];
    // One context: the same calls, the same verdict as the function's.
    assert_eq!(c.calls, 20_000);
    assert_eq!(c.below_resolution, entry(&data, "::leaf").below_resolution);
    assert_eq!(
        c.below_resolution,
        Some(c.inclusive_ns < resolution * c.calls as f64),
        "{c:?}, resolution {resolution} ns"
    );
    let leaf_row = |d: &ReportData| {
        let text = d.text(20);
        let rows = text
            .split("time by calling context")
            .nth(1)
            .unwrap_or("")
            .to_string();
        rows.lines()
            .find(|l| l.contains("::leaf (depth"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("leaf's row in {text}"))
    };
    for bounded in [true, false] {
        let mut d = data.clone();
        let k = context(&d);
        let t = d.time.as_mut().unwrap();
        t.contexts[k].below_resolution = Some(bounded);
        t.contexts[k].inclusive_ns = 3.5e6;
        t.contexts[k].exclusive_ns = 3.5e6;
        t.contexts[k].exclusive_clipped = Some(false);
        // 20,000 calls each under 100 ns.
        t.compensation.as_mut().unwrap().resolution_ns = 100.0;
        let row = leaf_row(&d);
        let bound = "<2.00 ms";
        if bounded {
            assert_eq!(row.matches(bound).count(), 2, "{row}");
            assert!(!row.contains("3.50 ms"), "{row}");
        } else {
            assert_eq!(row.matches("3.50 ms").count(), 2, "{row}");
            assert!(!row.contains('<') && !row.contains('~'), "{row}");
            // Half its calls timed (sampled timing): its time is an estimate, marked so.
            d.time.as_mut().unwrap().contexts[k].timed = 10_000;
            let row = leaf_row(&d);
            assert!(row.contains("~3.50 ms incl"), "{row}");
        }
    }
}

/// With every call timed, a time the calibration's error moves by 5 % or more shows that
/// error (`±`, and a note saying what it is); a smaller one is the plain figure.
#[test]
fn a_large_calibration_error_is_shown_beside_the_figure() {
    let _g = serial();
    let data = timed_caller(1000);
    let caller_id = entry(&data, "::caller").method;
    let text = |error: f64| {
        let mut d = data.clone();
        let t = d.time.as_mut().unwrap();
        for f in &mut t.functions {
            // The other functions show no error.
            f.calibration_error_ns = None;
            if f.method == caller_id {
                f.timed = f.calls;
                f.below_resolution = Some(false);
                f.inclusive_ns = 1e6;
                f.calibration_error_ns = Some(error);
            }
        }
        d.text(20)
    };
    let row = |text: &str| {
        text.lines()
            .find(|l| l.trim_end().ends_with("time_compensation::caller"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("caller's row in {text}"))
    };
    let note = "±, every call timed: how far an inclusive time may be off";
    let large = text(2e5);
    assert!(row(&large).contains("1.00 ms±200.00 µs"), "{large}");
    assert!(large.contains(note), "{large}");
    let small = text(1e3);
    assert!(row(&small).contains(" 1.00 ms "), "{small}");
    assert!(!small.contains('±'), "{small}");
}
