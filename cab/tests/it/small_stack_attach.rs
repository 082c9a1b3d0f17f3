//! A thread with a small stack attaches to the session through a helper thread (making a ring
//! and an analysis instance takes more stack than it has). If that work panics, the thread
//! runs on without a ring, its events dropped and counted, and the session goes on: other
//! threads attach and are analyzed, and it finishes with a full report.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, RunMode, RuntimeConfig, Session};
use std::sync::atomic::{AtomicBool, Ordering};

/// The next analysis instance the factory makes panics.
static REFUSE_NEXT: AtomicBool = AtomicBool::new(false);

use crate::support::Count;

fn factory() -> Count {
    if REFUSE_NEXT.swap(false, Ordering::SeqCst) {
        panic!("this analysis instance is refused");
    }
    Count(0)
}

/// `n` events from a new thread with a stack of `bytes`.
fn emit_on_thread(bytes: usize, n: u64) {
    std::thread::Builder::new()
        .stack_size(bytes)
        .spawn(move || {
            for v in 0..n {
                emit(Event::marker(v).unwrap());
            }
        })
        .unwrap()
        .join()
        .expect("the thread ran to its end");
}

#[test]
fn a_panic_attaching_a_small_thread_leaves_it_ringless_and_the_session_running() {
    let _g = crate::serial();
    for mode in [
        RunMode::Exhaustive,
        RunMode::sampling(1.0),
        RunMode::Sequential,
    ] {
        let config = RuntimeConfig {
            mode,
            pin: false,
            ..RuntimeConfig::default()
        };
        let session = Session::start(config, factory).unwrap();
        REFUSE_NEXT.store(true, Ordering::SeqCst);
        emit_on_thread(16 << 10, 100);
        assert!(
            !REFUSE_NEXT.load(Ordering::SeqCst),
            "{mode:?}: no instance was made"
        );
        emit_on_thread(16 << 10, 50);
        emit_on_thread(2 << 20, 30);
        let report = session.finish();
        assert_eq!(report.analysis.0, 80, "{mode:?}");
        let ringless = report
            .threads
            .iter()
            .find(|t| t.thread == "(threads without a ring)")
            .unwrap_or_else(|| panic!("{mode:?}: {:?}", report.threads));
        assert_eq!((ringless.threads, ringless.events), (1, 100), "{mode:?}");
        assert_eq!(report.totals.events, 180, "{mode:?}");
        assert_eq!(report.totals.dropped, 100, "{mode:?}");
        assert!(report.analyzer_failures.is_empty(), "{mode:?}");
    }
}
