//! Every workload at `Size::Smoke`: every variant (plain, instrumented, calls, paths, memory)
//! gives the same checksum, with no session and inside a running session; the session sees
//! the instrumented twin's events (calls, paths where it has `paths`, memory accesses where it
//! has `memory`, one ring per thread for the pool), none from the plain twin, and from each
//! single-kind variant only its kind.
//!
//! One session per process: every test holds `LOCK`, also while no session runs (so that "no
//! session" really means none).

use cabprof::{Report, Session};
use cabprof_workloads::{Size, Variant, Workload};

use crate::serial as lock;

fn workload(name: &str) -> Workload {
    cabprof_workloads::by_name(name).unwrap_or_else(|| panic!("no workload {name}"))
}

/// Run `f` inside a session with every analysis; its result and the report.
fn in_session(f: impl FnOnce() -> u64) -> (u64, Report) {
    let session = Session::builder()
        .all_analyses()
        .start()
        .expect("start a session");
    let h = f();
    (h, session.finish())
}

fn twins_agree(name: &str) {
    let _g = lock();
    let w = workload(name);
    let plain = (w.run_plain)(Size::Smoke);
    let instrumented = (w.run_instrumented)(Size::Smoke);
    assert_eq!(
        plain, instrumented,
        "{name}: twins disagree with no session"
    );
    assert_eq!(
        plain,
        (w.run_plain)(Size::Smoke),
        "{name}: not deterministic"
    );
    for v in Variant::ALL {
        assert_eq!(
            w.run_variant(v, Size::Smoke),
            plain,
            "{name}: variant {v:?} disagrees"
        );
    }
}

/// What a report saw: `(calls, path events, simulated memory accesses)`.
fn kinds(name: &str, report: &Report) -> (u64, u64, u64) {
    let d = &report.data;
    assert!(
        d.analyzer_failures.is_empty(),
        "{name}: {:?}",
        d.analyzer_failures
    );
    let calls = d
        .method_count
        .as_ref()
        .expect("method count ran")
        .iter()
        .map(|e| e.count)
        .sum();
    let paths = d
        .paths
        .as_ref()
        .expect("path profile ran")
        .iter()
        .map(|e| e.count)
        .sum();
    let mem = d
        .cache
        .as_ref()
        .expect("cache simulation ran")
        .levels
        .first()
        .map_or(0, |l| {
            l.load_hits + l.load_misses + l.store_hits + l.store_misses
        });
    (calls, paths, mem)
}

fn variants_emit_their_kind(name: &str) {
    let _g = lock();
    let w = workload(name);
    let expect = (w.run_plain)(Size::Smoke);
    for (v, want_paths, want_mem) in [
        (Variant::Calls, false, false),
        (Variant::Paths, w.paths, false),
        (Variant::Memory, false, w.memory),
    ] {
        let (h, report) = in_session(|| w.run_variant(v, Size::Smoke));
        assert_eq!(h, expect, "{name}: {v:?} disagrees inside a session");
        let (calls, paths, mem) = kinds(name, &report);
        assert!(calls > 0, "{name}: {v:?} made no calls");
        assert_eq!(paths > 0, want_paths, "{name}: {v:?}: {paths} path events");
        assert_eq!(mem > 0, want_mem, "{name}: {v:?}: {mem} memory events");
        // The time analysis times every call: a call returns with its duration (a
        // `TimedReturn` in place of its `Return`), so no word is added per call. The only
        // others are `Stall` words, the time spent inside cabprof: one per ring attached, name
        // registered, wait for the analyzer or calibration probe.
        let timed: u64 = report
            .data
            .time
            .as_ref()
            .map_or(0, |t| t.functions.iter().map(|f| f.timed).sum());
        assert_eq!(timed, calls, "{name}: {v:?}: every call timed");
        let d = &report.data;
        let stalls = d.time.as_ref().and_then(|t| t.inside_cabprof_entries);
        // And the words of the calibration probes the thread ran as its ring lapped.
        let probes = d
            .time
            .as_ref()
            .and_then(|t| t.compensation.as_ref()?.during.as_ref())
            .map_or(0, |p| p.words);
        assert_eq!(
            2 * calls + paths + mem + stalls.expect("the time analysis ran") + probes,
            d.totals.events,
            "{name}: {v:?}: events other than calls, paths, memory accesses, stalls and probes"
        );
        let module = format!("::{}", v.name());
        assert!(
            report
                .data
                .methods
                .iter()
                .all(|m| m.module.ends_with(&module)),
            "{name}: {v:?}: a method outside module {module}"
        );
    }
}

fn session_sees_events(name: &str) {
    let _g = lock();
    let w = workload(name);
    let expect = (w.run_plain)(Size::Smoke);

    let (h, report) = in_session(|| (w.run_instrumented)(Size::Smoke));
    assert_eq!(
        h, expect,
        "{name}: instrumented twin disagrees inside a session"
    );
    let d = &report.data;
    assert!(
        d.analyzer_failures.is_empty(),
        "{name}: {:?}",
        d.analyzer_failures
    );
    assert!(d.totals.events > 0, "{name}: no events");
    assert_eq!(
        d.totals.dropped, 0,
        "{name}: exhaustive mode dropped events"
    );
    let counts = d.method_count.as_ref().expect("method count ran");
    assert!(!counts.is_empty(), "{name}: method count is empty");
    // Every profiled function lives in the instrumented twin.
    for e in counts {
        let m = d
            .methods
            .iter()
            .find(|m| m.id == e.method)
            .unwrap_or_else(|| panic!("{name}: method {} has no name", e.method));
        assert!(
            m.module.ends_with("::instrumented"),
            "{name}: {}::{} is not in the instrumented twin",
            m.module,
            m.name
        );
    }
    let edges = d.call_graph.as_ref().expect("call graph ran");
    assert!(
        edges.iter().any(|e| e.caller != 0),
        "{name}: no caller -> callee edge between profiled functions"
    );
    let paths = d.paths.as_ref().expect("path profile ran");
    assert_eq!(
        !paths.is_empty(),
        w.paths,
        "{name}: paths {:?}",
        paths.len()
    );
    let cache = d.cache.as_ref().expect("cache simulation ran");
    let accesses: u64 = cache.levels.first().map_or(0, |l| {
        l.load_hits + l.load_misses + l.store_hits + l.store_misses
    });
    assert_eq!(
        accesses > 0,
        w.memory,
        "{name}: {accesses} simulated accesses"
    );
    let calls: u64 = counts.iter().map(|e| e.count).sum();
    let path_events: u64 = paths.iter().map(|e| e.count).sum();
    assert!(
        2 * calls + path_events + accesses <= d.totals.events,
        "{name}: more analysed events than produced"
    );
    let emitting = d.threads.iter().filter(|t| t.events > 0).count();
    assert!(
        emitting >= w.threads,
        "{name}: {emitting} threads emitted, expected {}",
        w.threads
    );
    if w.threads > 1 {
        let workers = d
            .threads
            .iter()
            .filter(|t| t.thread.starts_with("pool-worker-") && t.events > 0)
            .count();
        assert_eq!(workers, w.threads - 1, "{name}: worker rings");
    }

    // The plain twin emits nothing, even inside a session.
    let (h, report) = in_session(|| (w.run_plain)(Size::Smoke));
    assert_eq!(h, expect, "{name}: plain twin disagrees inside a session");
    assert_eq!(
        report.data.totals.events, 0,
        "{name}: the plain twin emitted events"
    );
}

macro_rules! workload_tests {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn twins_agree() {
                    super::twins_agree(stringify!($name));
                }

                #[test]
                fn session_sees_events() {
                    super::session_sees_events(stringify!($name));
                }

                #[test]
                fn variants_emit_their_kind() {
                    super::variants_emit_their_kind(stringify!($name));
                }
            }
        )*

        #[test]
        fn every_workload_is_tested() {
            let mut tested = vec![$(stringify!($name)),*];
            let mut all: Vec<&str> = cabprof_workloads::all().iter().map(|w| w.name).collect();
            tested.sort_unstable();
            all.sort_unstable();
            assert_eq!(tested, all);
        }
    };
}

workload_tests!(interp, vm, sort, text, matrix, lz77, pool);

/// The inputs and the programs are fixed: a changed checksum means a changed workload, and
/// figures measured before and after the change are not comparable.
#[test]
fn smoke_checksums_are_stable() {
    let _g = lock();
    let expected: &[(&str, u64)] = &[
        ("interp", 0xE193_6FD8_0EEA_C89C),
        ("vm", 0x6EA8_54A8_FEF7_3ED9),
        ("sort", 0xE736_F15C_5A48_9D4A),
        ("text", 0xEB86_5462_03AA_4D6A),
        ("matrix", 0x8750_F8B9_6141_A7FF),
        ("lz77", 0x8C2C_5408_2049_3152),
        ("pool", 0x3D62_B109_C549_188E),
    ];
    let got: Vec<(&str, u64)> = cabprof_workloads::all()
        .iter()
        .map(|w| (w.name, (w.run_plain)(Size::Smoke)))
        .collect();
    assert_eq!(got, expected, "smoke checksums changed");
}

#[test]
fn sizes_parse() {
    for s in Size::ALL {
        assert_eq!(Size::parse(s.name()), Some(s));
    }
    assert_eq!(Size::parse("FULL"), Some(Size::Full));
    assert_eq!(Size::parse("huge"), None);
}
