//! The allocation analysis with `cabprof::alloc::Tracked` as this test binary's global
//! allocator: known allocation patterns (a `Vec` growing through known capacities, a `Box`, a
//! `String`) give exact counts per calling context and function, in exhaustive and sequential
//! mode; a block allocated on one thread and freed on another balances; a thread whose first
//! event is an allocation makes its ring without recursing or deadlocking.
//!
//! Its own test binary, not a module of `tests/it/`: it installs `Tracked` and checks process-
//! wide counters (live and peak bytes, all frees since the start), which other tests'
//! allocations would move.

use cabprof::alloc::{global_counts, Tracked};
use cabprof::report::{context_stack, AllocCountsEntry, AllocationsData, ReportData};
use cabprof::{profile, Analysis, RunMode, Session};
use std::sync::{mpsc, Arc, Barrier};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

#[global_allocator]
static ALLOC: Tracked = Tracked::system();

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn session(mode: RunMode) -> Session {
    Session::builder()
        .analyses(&[Analysis::Allocations])
        .mode(mode)
        .pin(false)
        .buffer_bytes(64 << 10)
        .chunk_bytes(4 << 10)
        .start()
        .expect("session starts")
}

/// A `Vec<u64>` pushed to 100 elements: capacity 4 (32 B, one alloc), then doubling by
/// realloc to 8, 16, 32, 64, 128 (five reallocs); 1024 bytes allocated in all; then freed.
#[profile]
fn grow_vec() -> usize {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..100 {
        v.push(i);
    }
    std::hint::black_box(&v);
    v.capacity()
}

/// One 100-byte box, freed here.
#[profile]
fn boxed() -> u8 {
    let b = Box::new([7u8; 100]);
    std::hint::black_box(&b)[99]
}

/// `String::new()` then 5 bytes: capacity 8 (one alloc); 10 more: 16 (one realloc). Kept.
#[profile]
fn make_string() -> String {
    let mut s = String::new();
    s.push_str("hello");
    s.push_str(", world!!!");
    s
}

#[profile]
fn pattern() -> usize {
    let cap = grow_vec();
    let b = boxed();
    let s = make_string();
    let n = cap + b as usize + s.len();
    drop(s);
    n
}

fn counts(allocs: u64, bytes: u64, reallocs: u64, frees: u64, freed: u64) -> AllocCountsEntry {
    AllocCountsEntry {
        allocs,
        bytes,
        reallocs,
        frees,
        freed_bytes: freed,
    }
}

/// A method's name without its module path.
fn short(data: &ReportData, m: u32) -> String {
    let name = data.name(m);
    name.rsplit("::").next().unwrap_or(&name).to_string()
}

fn allocations(data: &ReportData) -> &AllocationsData {
    data.allocations.as_ref().expect("allocations ran")
}

/// The counts of the context named `names` (outermost first; none: the root's own).
fn context(data: &ReportData, names: &[&str]) -> AllocCountsEntry {
    let a = allocations(data);
    if names.is_empty() {
        return a.root();
    }
    let parents = a.parent_indices();
    (0..a.contexts.len())
        .find(|&i| {
            let stack = context_stack(&a.contexts, &parents, i);
            stack.len() == names.len()
                && stack.iter().zip(names).all(|(&m, n)| short(data, m) == *n)
        })
        .map(|i| a.contexts[i].counts)
        .unwrap_or_else(|| panic!("no context {names:?} in {:#?}", a.contexts))
}

fn function(data: &ReportData, name: &str) -> (AllocCountsEntry, AllocCountsEntry) {
    let f = allocations(data)
        .functions
        .iter()
        .find(|f| f.method != 0 && short(data, f.method) == name)
        .unwrap_or_else(|| panic!("no function {name}"));
    (f.self_, f.inclusive)
}

fn check_pattern(mode: RunMode) {
    let _g = serial();
    let s = session(mode);
    let n = pattern();
    let report = s.finish();
    let d = &report.data;
    assert_eq!(n, 128 + 7 + 15);
    let a = allocations(d);
    assert!(a.tracked && !a.approximate, "{mode:?}");
    // Process-wide, from the session's start: the test harness's other threads allocate and
    // free too (blocks made before the session can take `live` below zero), so only the
    // invariants hold here; the exact figures are checked alone in
    // `tests/alloc_live_peak.rs`.
    assert!(a.peak_bytes > 0 && a.peak_bytes >= a.live_bytes, "{a:?}");
    assert_eq!(
        context(d, &["pattern", "grow_vec"]),
        counts(1, 1024, 5, 1, 1024)
    );
    assert_eq!(context(d, &["pattern", "boxed"]), counts(1, 100, 0, 1, 100));
    assert_eq!(
        context(d, &["pattern", "make_string"]),
        counts(1, 16, 1, 0, 0)
    );
    // The string is freed by its caller.
    assert_eq!(context(d, &["pattern"]), counts(0, 0, 0, 1, 16));
    let (own, incl) = function(d, "pattern");
    assert_eq!(own, counts(0, 0, 0, 1, 16));
    assert_eq!(incl, counts(3, 1140, 6, 3, 1140));
    assert_eq!(function(d, "grow_vec").0, counts(1, 1024, 5, 1, 1024));
    // The runtime's own allocations (this thread's ring, the analyzer) are counted apart.
    assert!(a.runtime.allocs > 0, "{:?}", a.runtime);
    // Every section renders.
    let text = report.text(10);
    assert!(text.contains("allocations: "), "{text}");
    assert!(
        text.contains("pattern > alloc_tracking::grow_vec"),
        "{text}"
    );
    let back = ReportData::from_json(&report.json()).unwrap();
    assert_eq!(back.allocations, d.allocations);
    // The bytes-weighted flame graph's lines are the contexts' bytes.
    let folded = d.folded_by(cabprof::report::Weight::AllocBytes);
    assert!(
        folded
            .lines()
            .any(|l| l.ends_with("alloc_tracking::pattern;alloc_tracking::grow_vec 1024")),
        "{folded}"
    );
}

#[test]
fn known_pattern_is_exact_in_exhaustive_mode() {
    check_pattern(RunMode::Exhaustive);
}

#[test]
fn known_pattern_is_exact_in_sequential_mode() {
    check_pattern(RunMode::Sequential);
}

#[profile]
fn produce(tx: &mpsc::SyncSender<Box<[u8; 4096]>>) {
    tx.send(Box::new([1u8; 4096])).unwrap();
}

#[profile]
fn consume(rx: &mpsc::Receiver<Box<[u8; 4096]>>) -> u8 {
    let b = rx.recv().unwrap();
    let x = b[4095];
    drop(b);
    x
}

#[test]
fn a_block_freed_on_another_thread_balances_and_live_and_peak_are_exact() {
    let _g = serial();
    let s = session(RunMode::Exhaustive);
    // A bounded channel allocates its slots when made, so sending allocates nothing more.
    let (btx, brx) = mpsc::sync_channel(8);
    let barrier = Arc::new(Barrier::new(2));
    let b2 = barrier.clone();
    let consumer = std::thread::spawn(move || {
        b2.wait(); // started
        b2.wait(); // go
        (0..8).map(|_| consume(&brx) as u32).sum::<u32>()
    });
    barrier.wait();
    // The consumer is parked: of this test's threads only this one allocates between the two
    // readings.
    let before = global_counts();
    produce(&btx);
    let mid = global_counts();
    for _ in 0..7 {
        produce(&btx);
    }
    // All sent before the consumer runs: no one waits on the channel (waking a waiter frees
    // a little of the channel's own bookkeeping).
    barrier.wait();
    assert_eq!(consumer.join().unwrap(), 8);
    let report = s.finish();
    let d = &report.data;
    assert_eq!(context(d, &["produce"]), counts(8, 8 * 4096, 0, 0, 0));
    assert_eq!(context(d, &["consume"]), counts(0, 0, 0, 8, 8 * 4096));
    // Process-wide counters: the test harness's threads may free a little of their own
    // bookkeeping meanwhile (72 bytes were seen), so this is within a small tolerance; the
    // per-context figures above are exact.
    let grew = mid.live_bytes - before.live_bytes;
    assert!((grew - 4096).abs() < 1024, "live grew by {grew}");
    let a = allocations(d);
    assert!(a.peak_bytes >= mid.live_bytes, "{a:?}");
    assert!(a.peak_bytes >= a.live_bytes);
}

#[profile]
fn after_first_alloc() -> Vec<u8> {
    Vec::with_capacity(777)
}

fn first_event_is_an_allocation(mode: RunMode) {
    let _g = serial();
    let s = session(mode);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // No instrumented call before: this allocation's event makes the thread's ring (or
        // inline analysis), whose own allocations must not come back here as events.
        let first = Vec::<u8>::with_capacity(12_345);
        std::hint::black_box(&first);
        let v = after_first_alloc();
        tx.send(v.capacity() + first.capacity()).unwrap();
    });
    let got = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a thread whose first event is an allocation finished (no deadlock)");
    assert_eq!(got, 777 + 12_345);
    let report = s.finish();
    let d = &report.data;
    assert_eq!(context(d, &["after_first_alloc"]), counts(1, 777, 0, 0, 0));
    assert!(context(d, &[]).bytes >= 12_345);
    assert!(allocations(d).runtime.allocs > 0);
}

#[test]
fn a_thread_whose_first_event_is_an_allocation_makes_its_ring_exhaustive() {
    first_event_is_an_allocation(RunMode::Exhaustive);
}

#[test]
fn a_thread_whose_first_event_is_an_allocation_makes_its_ring_sequential() {
    first_event_is_an_allocation(RunMode::Sequential);
}

const MIB: usize = 1 << 20;

/// A `Vec<u8>` of 900 MiB resized in place to 1,200 MiB, then freed: sizes past what one
/// `Realloc` word holds. Nothing is written to it, so its pages are never touched: the
/// system allocator maps them (and `mremap`s them on Linux) without committing memory.
#[profile]
fn resize_past_a_gigabyte() -> usize {
    let mut v: Vec<u8> = Vec::with_capacity(900 * MIB);
    v.reserve_exact(1200 * MIB);
    std::hint::black_box(&v);
    v.capacity()
}

fn resize_past_a_gigabyte_is_one_realloc(mode: RunMode) {
    let _g = serial();
    let s = session(mode);
    assert_eq!(resize_past_a_gigabyte(), 1200 * MIB);
    let report = s.finish();
    let d = &report.data;
    // One allocation of 900 MiB, one resize that grew it by 300 MiB, one free of 1,200 MiB.
    // (Before two-word resizes: two allocations, 2,100 MiB allocated, no resize.)
    let mib = MIB as u64;
    assert_eq!(
        context(d, &["resize_past_a_gigabyte"]),
        counts(1, 1200 * mib, 1, 1, 1200 * mib),
        "{mode:?}"
    );
    assert!(!allocations(d).approximate, "{mode:?}");
}

#[test]
fn a_resize_past_a_gigabyte_is_one_realloc_exhaustive() {
    resize_past_a_gigabyte_is_one_realloc(RunMode::Exhaustive);
}

#[test]
fn a_resize_past_a_gigabyte_is_one_realloc_sequential() {
    resize_past_a_gigabyte_is_one_realloc(RunMode::Sequential);
}
