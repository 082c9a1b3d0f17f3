//! Live and peak bytes are process-wide, so they are checked in a process of their own (no
//! test harness threads allocating meanwhile): a `Vec<u64>` grown to 100 elements (capacity
//! 128: 1024 bytes at its largest) and freed, then a 100-byte box kept past the session's end.

use cabprof::alloc::Tracked;
use cabprof::{profile, Analysis, Session};

#[global_allocator]
static ALLOC: Tracked = Tracked::system();

#[profile]
fn grow() -> usize {
    let mut v: Vec<u64> = Vec::new();
    for i in 0..100 {
        v.push(i);
    }
    std::hint::black_box(&v);
    v.capacity()
}

#[profile]
fn keep() -> Box<[u8; 100]> {
    std::hint::black_box(Box::new([3u8; 100]))
}

fn main() {
    let session = Session::builder()
        .analyses(&[Analysis::Allocations])
        .pin(false)
        .start()
        .expect("session starts");
    assert_eq!(grow(), 128);
    let kept = keep();
    let report = session.finish();
    let a = report.data.allocations.as_ref().expect("allocations ran");
    assert_eq!((a.live_bytes, a.peak_bytes), (100, 1024), "{a:?}");
    assert_eq!(a.totals.bytes, 1024 + 100);
    assert_eq!(a.totals.freed_bytes, 1024);
    assert!(a.runtime.allocs > 0, "{:?}", a.runtime);
    drop(kept);
    println!("1 passed, 0 failed");
}
