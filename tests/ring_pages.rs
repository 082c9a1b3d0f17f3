//! A thread's ring and the page faults of its first lap (Linux). A 2 MiB ring in 4 KiB pages
//! takes 512 faults as the producer first reaches each page; backed by a transparent huge page
//! (the default, `huge_pages(true)`), one. The faults are the thread's own minor faults
//! (`/proc/thread-self/stat`), counted around the calls that fill its ring once and a half;
//! the counts the session reports must be the same either way.

#![cfg(target_os = "linux")]

use cabprof::{profile, Analysis, Session};

#[profile]
fn ring_pages_leaf(i: u64) -> u64 {
    i.rotate_left(7) ^ 0x5a
}

/// This thread's minor page faults so far.
fn thread_minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("procfs");
    // The fields after the command name (which may hold spaces) start with the state;
    // `minflt` is the 10th field of the line, the 8th after the name.
    let rest = stat.rsplit_once(')').expect("a stat line").1;
    rest.split_whitespace()
        .nth(7)
        .and_then(|f| f.parse().ok())
        .expect("minflt")
}

/// Whether the kernel hands out transparent huge pages to regions that ask.
fn thp_available() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| !s.contains("[never]"))
}

/// Calls: two events each, 16 bytes, so 200,000 calls write 3.2 MB: more than one lap of a
/// 2 MiB ring.
const CALLS: u64 = 200_000;

/// Run `CALLS` calls on a fresh thread in a session with `huge` pages; the thread's minor
/// faults over them and the calls the session counted.
fn first_lap(huge: bool) -> (u64, u64) {
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .buffer_bytes(2 << 20)
        .chunk_bytes(128 << 10)
        .huge_pages(huge)
        .pin(false)
        .start()
        .expect("starts");
    let faults = std::thread::spawn(|| {
        // Fault in this thread's stack and its thread-locals before counting.
        std::hint::black_box(ring_pages_leaf(0));
        let before = thread_minor_faults();
        for i in 1..CALLS {
            std::hint::black_box(ring_pages_leaf(i));
        }
        thread_minor_faults() - before
    })
    .join()
    .unwrap();
    let d = session.finish().data;
    let names = d.method_names();
    let calls = d
        .method_count
        .as_ref()
        .expect("method count ran")
        .iter()
        .find(|e| names.name(e.method).contains("ring_pages_leaf"))
        .map_or(0, |e| e.count);
    (faults, calls)
}

#[test]
fn a_huge_page_ring_takes_a_few_faults_where_4k_pages_take_hundreds() {
    let (small_faults, small_calls) = first_lap(false);
    let (huge_faults, huge_calls) = first_lap(true);
    eprintln!("first lap of a 2 MiB ring: {small_faults} faults in 4 KiB pages, {huge_faults} with huge pages");
    assert_eq!(small_calls, CALLS);
    assert_eq!(huge_calls, CALLS);
    // 4 KiB pages: at least most of the ring's 512 (the ring is made at the first call,
    // before the count starts, which takes its first page).
    assert!(
        small_faults >= 400,
        "4 KiB pages: {small_faults} faults over a lap of a 2 MiB ring"
    );
    if thp_available() {
        assert!(
            huge_faults <= 16,
            "huge pages: {huge_faults} faults over a lap of a 2 MiB ring (4 KiB pages: {small_faults})"
        );
    } else {
        eprintln!("transparent huge pages are off in this kernel: {huge_faults} faults");
    }
}
