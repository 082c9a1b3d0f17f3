//! What production code names compiles with and without cabprof's `enabled` feature:
//! `#[profile]`, `flush_thread`, the `mem` events and the `Tracked` allocator. Compiled out
//! they are inert: the attribute hands the item back unchanged, and nothing starts even with
//! `CABPROF=1`. CI runs this file three ways (`cargo test -p cabprof --no-default-features
//! --test compiled_out`, the same with `--features sync,crossbeam,tokio`, and with the
//! workspace's `--all-features`). Each build has one test,
//! so that the threads it counts are its own.

use std::alloc::{GlobalAlloc, Layout, System};

#[global_allocator]
static ALLOC: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();

#[cabprof::profile]
fn parse(x: u64) -> u64 {
    x.rotate_left(7) ^ 0x5A
}

/// What a program's hot path does with cabprof: an annotated call, explicit memory events, a
/// flush before the thread waits. Returns `parse`'s results, xored.
fn production_code(n: u64) -> u64 {
    let mut acc = 0;
    let table = [3u32, 5, 7];
    for i in 0..n {
        acc ^= parse(i);
        cabprof::mem::load(&table[(i % 3) as usize]);
        cabprof::mem::store(&acc);
    }
    cabprof::flush_thread();
    acc
}

/// What production code does with `cabprof::sync` (feature `sync`): the same calls compile
/// against the wrappers and, compiled out, against parking_lot's and the standard library's
/// own types.
#[cfg(feature = "sync")]
fn production_sync_code() {
    use cabprof::sync::{mpsc, Mutex, RwLock};
    let m = Mutex::new(1u32);
    *m.lock() += 1;
    assert_eq!(*m.try_lock().unwrap(), 2);
    let l = RwLock::new(vec![1u8]);
    l.write().push(2);
    assert_eq!(l.read().len(), 2);
    let (tx, rx) = mpsc::sync_channel(1);
    tx.send(3u8).unwrap();
    assert_eq!(rx.recv(), Ok(3));
    drop(tx);
    assert!(rx.iter().next().is_none());
    let mutex = std::any::type_name::<cabprof::sync::Mutex<u32>>();
    let sender = std::any::type_name::<mpsc::SyncSender<u8>>();
    if cfg!(feature = "enabled") {
        assert!(mutex.starts_with("cabprof::sync::"), "{mutex}");
    } else {
        // The very types: parking_lot's `Mutex` is lock_api's, and std's sender.
        assert!(mutex.starts_with("lock_api::"), "{mutex}");
        assert!(sender.starts_with("std::sync::mpsc::"), "{sender}");
    }
    production_channel_code();
}

/// The same for the channels of features `crossbeam` and `tokio`: the wrappers, or compiled
/// out crossbeam-channel's and tokio's own types.
#[cfg(feature = "sync")]
fn production_channel_code() {
    #[cfg(feature = "crossbeam")]
    {
        use cabprof::sync::crossbeam;
        let (tx, rx) = crossbeam::bounded(1);
        tx.send(4u8).unwrap();
        assert!(tx.is_full());
        assert_eq!(rx.clone().recv(), Ok(4));
        drop(tx);
        assert_eq!(rx.recv(), Err(crossbeam::RecvError));
        let sender = std::any::type_name::<crossbeam::Sender<u8>>();
        if !cfg!(feature = "enabled") {
            assert!(sender.starts_with("crossbeam_channel::"), "{sender}");
        }
    }
    #[cfg(feature = "tokio")]
    {
        use cabprof::sync::tokio_mpsc;
        // A current-thread runtime: no thread of its own.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, mut rx) = tokio_mpsc::channel(1);
        rt.block_on(async {
            tx.send(5u8).await.unwrap();
            assert_eq!(tx.capacity(), 0);
            assert_eq!(rx.recv().await, Some(5));
        });
        let sender = std::any::type_name::<tokio_mpsc::Sender<u8>>();
        if !cfg!(feature = "enabled") {
            assert!(sender.starts_with("tokio::sync::mpsc::"), "{sender}");
        }
    }
}

#[cfg(not(feature = "sync"))]
fn production_sync_code() {}

fn expected(n: u64) -> u64 {
    (0..n).fold(0, |acc, i| acc ^ (i.rotate_left(7) ^ 0x5A))
}

/// The wrapper's constructors and `GlobalAlloc` calls, on a wrapper of its own: the bytes
/// come back as the inner allocator gives them.
fn the_tracked_allocator_forwards_to_its_inner_one() {
    let tracked = cabprof::alloc::Tracked::new(System);
    let _: &System = tracked.inner();
    let layout = Layout::from_size_align(64, 16).unwrap();
    // SAFETY: `layout` has a non-zero size; every block is freed once, by the same allocator,
    // with the layout it was made with (the resized one with its new size).
    unsafe {
        let zeroed = tracked.alloc_zeroed(layout);
        assert!(!zeroed.is_null());
        assert!(std::slice::from_raw_parts(zeroed, 64)
            .iter()
            .all(|&b| b == 0));
        zeroed.write_bytes(0xAB, 64);
        let grown = tracked.realloc(zeroed, layout, 256);
        assert!(!grown.is_null());
        assert!(std::slice::from_raw_parts(grown, 64)
            .iter()
            .all(|&b| b == 0xAB));
        tracked.dealloc(grown, Layout::from_size_align(256, 16).unwrap());
        let p = tracked.alloc(layout);
        assert!(!p.is_null());
        assert_eq!(p as usize % 16, 0);
        tracked.dealloc(p, layout);
    }
    // And as this binary's global allocator.
    let v: Vec<u64> = (0..1000).collect();
    assert_eq!(v.iter().sum::<u64>(), 499_500);
}

/// Compiled out, the attribute returns the item as written: on an `impl` block, its `const
/// fn` (which the attribute leaves alone when instrumenting too) stays one and runs at
/// compile time. (`#[profile]` on a `const fn` itself is an error either way: the compile-fail
/// cases of `cabprof-compile-tests` run against cabprof compiled out.)
#[cfg(not(feature = "enabled"))]
struct Doubler;

#[cfg(not(feature = "enabled"))]
#[cabprof::profile]
impl Doubler {
    const fn twice(x: u32) -> u32 {
        2 * x
    }
}

#[cfg(not(feature = "enabled"))]
const TWICE: u32 = Doubler::twice(21);

/// The threads of this process (Linux).
#[cfg(not(feature = "enabled"))]
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Compiled out, `CABPROF=1` starts nothing: the code runs as written and no analyzer thread
/// appears.
#[cfg(not(feature = "enabled"))]
#[test]
fn compiled_out_code_runs_as_written_and_starts_nothing() {
    assert_eq!(TWICE, 42);
    // As a user's run asks for a profile. Nothing else of this binary runs meanwhile (its
    // only test), and the compiled-out build has no code that reads it.
    std::env::set_var("CABPROF", "1");
    let before = threads();
    assert_eq!(production_code(10_000), expected(10_000));
    production_sync_code();
    the_tracked_allocator_forwards_to_its_inner_one();
    let after = threads();
    std::env::remove_var("CABPROF");
    assert_eq!(after, before, "a compiled-out cabprof started a thread");
}

/// With `enabled` the same code is instrumented: a test profile counts its calls.
#[cfg(feature = "enabled")]
#[test]
fn enabled_the_same_code_is_profiled() {
    let profile = cabprof::test_profile();
    assert_eq!(production_code(25), expected(25));
    production_sync_code();
    the_tracked_allocator_forwards_to_its_inner_one();
    let report = profile.finish();
    assert_eq!(report.data.calls("parse"), 25);
    assert_eq!(report.data.calls("compiled_out::parse"), 25);
    // `arse` ends `parse` but is not a segment of its path.
    assert_eq!(report.data.calls("arse"), 0);
}
