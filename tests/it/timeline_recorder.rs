//! The flight recorder's outputs while a program runs: a trigger that writes the timeline
//! around a slow call (before the session finishes), a dump on demand, and the Chrome trace
//! written beside a session's report. One session at a time.

use cabprof::{profile, Analysis, Session};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::serial;

#[profile]
fn quick() -> u64 {
    std::hint::black_box(7u64).wrapping_mul(3)
}

#[profile]
fn slow_step(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `X` events of a Chrome trace: (name, ts µs, dur µs).
fn complete_events(path: &Path) -> Vec<(String, f64, f64)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).expect("a JSON trace");
    v["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn named<'a>(events: &'a [(String, f64, f64)], name: &str) -> Vec<&'a (String, f64, f64)> {
    events.iter().filter(|e| e.0.ends_with(name)).collect()
}

/// A call of the watched function over the threshold writes the timeline around it while the
/// program still runs; shorter calls and other functions do not; the window holds the calls
/// of the second before it, not those long before.
#[test]
fn a_slow_call_writes_the_timeline_around_it_while_the_program_runs() {
    let _g = serial();
    let dir = scratch("timeline_trigger");
    let s = Session::builder()
        .analyses(&[Analysis::Timeline])
        .timeline_trigger("slow_step", Duration::from_millis(40))
        .output(dir.join("app.json"))
        .start()
        .unwrap();
    // Long before: a burst of quick calls, then 2.5 s of nothing (outside the window).
    for _ in 0..50 {
        quick();
    }
    slow_step(5);
    std::thread::sleep(Duration::from_millis(2500));
    for _ in 0..20 {
        quick();
    }
    slow_step(60);
    let file = dir.join("app.trigger-1.trace.json");
    let asked = Instant::now();
    while !file.exists() && asked.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        file.exists(),
        "no trigger file while the session ran: {:?}",
        std::fs::read_dir(&dir).unwrap().collect::<Vec<_>>()
    );
    drop(s.finish());
    let events = complete_events(&file);
    let slow = named(&events, "slow_step");
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert!(slow[0].2 >= 55_000.0, "{slow:?}");
    let quick_calls = named(&events, "quick");
    // The 20 of the second before it; not the 50 made 2.5 s before.
    assert_eq!(quick_calls.len(), 20, "{quick_calls:?}");
    assert_eq!(
        named(&events, "slow_step").len(),
        1,
        "the short one is outside too"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("trigger"))
        .collect();
    assert_eq!(names, ["app.trigger-1.trace.json"], "one call fired");
}

#[test]
fn a_trigger_is_refused_without_the_timeline_or_when_malformed() {
    let _g = serial();
    let Err(e) = Session::builder()
        .analyses(&[Analysis::Time])
        .timeline_trigger("f", Duration::from_millis(1))
        .start()
    else {
        panic!("a trigger without the timeline started");
    };
    assert!(e.to_string().contains("timeline_trigger"), "{e}");
    for bad in ["parse", "parse:50", ":5ms", "parse:fast"] {
        let Err(e) = Session::builder()
            .from_vars(|k| (k == "CABPROF_TIMELINE_TRIGGER").then(|| bad.to_string()))
        else {
            panic!("CABPROF_TIMELINE_TRIGGER={bad} accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("CABPROF_TIMELINE_TRIGGER") && e.contains("NAME:DURATION"),
            "{e}"
        );
    }
}

/// `dump_timeline` writes what the recorder holds so far; it never replaces a file that is
/// not a timeline; `finish_and_write` puts the timeline beside the report.
#[test]
fn the_timeline_is_dumped_on_demand_and_beside_the_report() {
    let _g = serial();
    let dir = scratch("timeline_dump");
    let s = Session::builder()
        .analyses(&[Analysis::Timeline])
        .output(dir.join("run.json"))
        .start()
        .unwrap();
    for _ in 0..10 {
        quick();
    }
    slow_step(1);
    let now = dir.join("now.json");
    let n = s.dump_timeline(&now).unwrap();
    assert!(n >= 11, "{n}");
    assert_eq!(named(&complete_events(&now), "quick").len(), 10);
    let input = dir.join("input.csv");
    std::fs::write(&input, "name,size\n").unwrap();
    let e = s.dump_timeline(&input).unwrap_err();
    assert!(e.to_string().contains("input.csv"), "{e}");
    assert_eq!(std::fs::read_to_string(&input).unwrap(), "name,size\n");
    for _ in 0..5 {
        quick();
    }
    s.finish_and_write().unwrap();
    assert!(dir.join("run.json").exists());
    assert_eq!(
        named(&complete_events(&dir.join("run.trace.json")), "quick").len(),
        15
    );
    // Without the timeline there is nothing to dump, and nothing beside the report.
    let s = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .output(dir.join("plain.json"))
        .start()
        .unwrap();
    quick();
    let e = s.dump_timeline(dir.join("none.json")).unwrap_err();
    assert!(e.to_string().contains("timeline analysis"), "{e}");
    s.finish_and_write().unwrap();
    assert!(!dir.join("plain.trace.json").exists());
    assert!(!dir.join("none.json").exists());
}
