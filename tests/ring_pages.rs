//! A thread's ring and the page faults of its first lap (Linux). A 2 MiB ring in 4 KiB pages
//! takes two faults per page as the producer first reaches it (it reads a slot before writing
//! it: the zero page, then a copy), about a thousand; backed by a transparent huge page (the
//! default, `huge_pages(true)`), one, taken at the first event. The faults are the thread's
//! own minor faults (`/proc/thread-self/stat`), counted around the calls that fill its ring
//! once and a half; the counts the session reports must be the same either way.
//!
//! Its own test binary, not a module of `tests/it/`: freed rings are kept process-wide for the
//! next ring of their size, so a ring another test freed would come with its pages already in.

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

/// Whether the kernel grants a transparent huge page right now to a 2 MiB-aligned region
/// advised `MADV_HUGEPAGE`, as a ring is: not when they are off (`never`, or disabled for the
/// process or its container) or none can be had (fragmented memory).
fn huge_page_granted() -> bool {
    const HUGE: usize = 2 << 20;
    // SAFETY: a fresh anonymous mapping of ours; the 2 MiB inside it at a 2 MiB boundary is
    // advised and written once, then the whole mapping is unmapped.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            2 * HUGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let start = (p as usize).next_multiple_of(HUGE);
        libc::madvise(start as *mut libc::c_void, HUGE, libc::MADV_HUGEPAGE);
        std::ptr::write_volatile(start as *mut u8, 1);
        let kib = anon_huge_kib(start);
        libc::munmap(p, 2 * HUGE);
        kib >= 2048
    }
}

/// The `AnonHugePages` (KiB) of the mapping of `/proc/self/smaps` that holds `addr`, or 0.
fn anon_huge_kib(addr: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("procfs");
    let mut inside = false;
    for line in smaps.lines() {
        let range = line.split(' ').next().and_then(|r| r.split_once('-'));
        if let Some((Ok(lo), Ok(hi))) =
            range.map(|(lo, hi)| (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)))
        {
            if inside {
                break;
            }
            inside = (lo..hi).contains(&addr);
        } else if let Some(kib) = line.strip_prefix("AnonHugePages:").filter(|_| inside) {
            return kib
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0);
        }
    }
    0
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
        // One size from the start: the lap measured is a 2 MiB ring's, not a growing one's.
        .buffer_start_bytes(2 << 20)
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
    let (mut huge_faults, huge_calls) = first_lap(true);
    eprintln!("first lap of a 2 MiB ring: {small_faults} faults in 4 KiB pages, {huge_faults} with huge pages");
    assert_eq!(small_calls, CALLS);
    assert_eq!(huge_calls, CALLS);
    // 4 KiB pages (`huge_pages(false)` advises against huge ones, so whatever the kernel's
    // mode): two per page for most of the ring's 512 (the ring is made at the first call,
    // before the count starts, which takes its first page).
    assert!(
        small_faults >= 400,
        "4 KiB pages: {small_faults} faults over a lap of a 2 MiB ring"
    );
    // Whether a huge page can be had depends on the machine and the moment: a ring without
    // one fails only if the kernel grants one to a region that asks, twice over.
    for _ in 0..2 {
        if huge_faults <= 16 || !huge_page_granted() {
            break;
        }
        huge_faults = first_lap(true).0;
    }
    if huge_faults > 16 {
        assert!(
            !huge_page_granted(),
            "huge pages: {huge_faults} faults over a lap of a 2 MiB ring (4 KiB pages: \
             {small_faults}), though the kernel grants huge pages to regions that ask"
        );
        eprintln!("no transparent huge page to be had here: {huge_faults} faults");
    }
}
