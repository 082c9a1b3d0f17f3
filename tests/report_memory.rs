//! The heap a deep report takes, phase by phase, measured by a counting global allocator: at
//! 2,000 and 8,000 levels of recursion (call tree, call graph, time, allocations), `finish()`
//! and each rendering must cost a bounded number of bytes per calling context, the same at
//! both depths: a copy of the tree, a copied stack per context or text built twice shows up
//! here without the heavy 100,000-deep run (`tests/tracked/deep_and_odd_reports.rs`, ignored).
//!
//! A wide report (many functions, contexts branching then running past the flame graphs'
//! 64 frames) must render in a fraction of its JSON's size beyond the report itself: the
//! folded text of every stack, or a copy of every stack, shows up as several times that.
//!
//! Alone in their binary: the counts are process-wide, so no other test may run beside them
//! (the two take turns).

#[path = "support/deep.rs"]
mod deep;
use cabprof::report::Weight;
use cabprof::ReportData;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The tests take turns: the counts are process-wide, and one session runs at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes allocated and not yet freed, over every thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The largest `LIVE` since it was last reset.
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// The system allocator, counting live bytes and their peak.
#[derive(Debug)]
struct Counting;

// SAFETY: every call is forwarded unchanged to `System`; the counting only reads sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as the new block before the old one goes: the peak of a moving resize.
        grew(new_size as isize);
        // SAFETY: the caller's block, layout and size, as `GlobalAlloc::realloc` requires.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        p
    }
}

#[global_allocator]
static ALLOC: cabprof::alloc::Tracked<Counting> = cabprof::alloc::Tracked::new(Counting);

/// How far the live heap rose above where it was when `f` started.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (out, (PEAK.load(Ordering::Relaxed) - before).max(0) as usize)
}

/// The peak heap of each phase of a `depth`-deep recursion's report, in report order.
fn phases(depth: u32) -> Vec<(&'static str, usize)> {
    let run = move || {
        let session = deep::session();
        assert_eq!(deep::recurse(depth), depth as u64);
        // `finish()` also drains the events the analyzer has not taken yet: their tree is
        // part of the figure.
        peak_of(|| session.finish().data)
    };
    let (d, finish) = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(d.call_tree.as_ref().unwrap().contexts.len(), depth as usize);
    let mut out = vec![("finish", finish)];
    let mut phase = |name, f: &dyn Fn() -> usize| {
        let (len, peak) = peak_of(f);
        assert!(len > 0, "{name} wrote nothing");
        out.push((name, peak));
    };
    phase("text(5)", &|| d.text(5).len());
    phase("write_json", &|| {
        let mut sink = Count(0);
        d.write_json(&mut sink).unwrap();
        sink.0
    });
    phase("folded", &|| d.folded().len());
    phase("folded_by(Time)", &|| d.folded_by(Weight::Time).len());
    phase("folded_by(AllocBytes)", &|| {
        d.folded_by(Weight::AllocBytes).len()
    });
    #[cfg(feature = "flamegraph")]
    {
        phase("svg", &|| d.svg().len());
        phase("svg_by(Time)", &|| d.svg_by(Weight::Time).len());
    }
    #[cfg(feature = "pprof")]
    phase("pprof", &|| d.pprof().len());
    phase("callgrind", &|| d.callgrind().len());
    // The whole text in one string: its size and no more than a few bytes per context.
    let (json_len, json_peak) = peak_of(|| d.json().len());
    out.push(("json() beyond its text", json_peak.saturating_sub(json_len)));
    out
}

/// Counts the bytes written to it.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes per added context each phase may take at its peak: 1.3 to 3 times what each took
/// when written (release and debug alike), far below a copied tree or copied stacks.
fn budget(phase: &str) -> usize {
    match phase {
        // The analyses' trees grow by the events still to drain, then each becomes report
        // nodes: about 530 bytes per context when written, 680-735 since allocation contexts
        // carry their live blocks (measured locally and in CI); a copied tree or copied
        // stacks would take thousands.
        "finish" => 800,
        // Written through a buffer of fixed size, whatever the depth.
        "write_json" => 0,
        // Parent and depth indices of one analysis' contexts at a time: 67 bytes (text),
        // 5 (folded), 0 (SVG), 56 (callgrind; 104 when it kept a vector of children per
        // context), 47 (pprof: the tree of each of three analyses), 0 (json() beyond its
        // text; 853 when it made a compact copy).
        _ => 100,
    }
}

/// Every phase of a deep report's making costs a bounded number of bytes per context: what
/// it takes beyond the 2,000-deep run's peak at 8,000 levels, per added context (so a cost
/// growing with the depth, like a stack copied per context, fails), and at 2,000 levels
/// nothing but that and a fixed allowance.
#[test]
fn deep_report_memory_is_linear_in_contexts() {
    let _serial = serial();
    // What does not grow with the depth (buffers, names, the SVG's fixed parts).
    const FIXED: usize = 512 << 10;
    let (small, large) = (2_000usize, 8_000usize);
    let (at_small, at_large) = (phases(small as u32), phases(large as u32));
    for ((phase, p_small), (_, p_large)) in at_small.into_iter().zip(at_large) {
        let per_context = p_large.saturating_sub(p_small) / (large - small);
        eprintln!(
            "{phase}: peak {p_small} bytes at depth {small}, {p_large} at {large}: \
             {per_context} per added context"
        );
        assert!(
            per_context <= budget(phase),
            "{phase}: peak {p_small} bytes at depth {small}, {p_large} at {large}: \
             {per_context} per added context (at most {} allowed)",
            budget(phase)
        );
        assert!(
            p_small <= FIXED + small * budget(phase),
            "{phase}: peak {p_small} bytes at depth {small}"
        );
    }
}

/// 64 profiled functions with names as long as a service's (`report_memory::service::
/// request_handlers::a17`), calling each other along a pseudo-random tree: two callees each
/// while `left` is above `chain`, then one chain of single calls whose length the seed picks.
mod service {
    pub(crate) mod request_handlers {
        /// A 64-bit mix (splitmix64's finaliser): the choice of callees.
        fn mix(mut x: u64) -> u64 {
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        }

        fn step(seed: u64, left: u32, chain: u32) {
            std::hint::black_box(vec![0u8; (seed % 48) as usize + 1]);
            if left == 0 {
                return;
            }
            for k in 0..if left > chain { 2 } else { 1 } {
                let s = mix(seed ^ (k + 1));
                let next = if left - 1 == chain {
                    1 + (s % chain as u64) as u32
                } else {
                    left - 1
                };
                ALL[(s % 64) as usize](s, next, chain);
            }
        }

        macro_rules! functions {
            ($($f:ident)*) => {
                $(
                    #[cabprof::profile]
                    pub(crate) fn $f(seed: u64, left: u32, chain: u32) {
                        step(seed, left, chain)
                    }
                )*
                pub(crate) const ALL: [fn(u64, u32, u32); 64] = [$($f),*];
            };
        }

        functions!(a00 a01 a02 a03 a04 a05 a06 a07 a08 a09 a10 a11 a12 a13 a14 a15
            a16 a17 a18 a19 a20 a21 a22 a23 a24 a25 a26 a27 a28 a29 a30 a31
            a32 a33 a34 a35 a36 a37 a38 a39 a40 a41 a42 a43 a44 a45 a46 a47
            a48 a49 a50 a51 a52 a53 a54 a55 a56 a57 a58 a59 a60 a61 a62 a63);
    }
}

/// The report of the tree below 2^`branch` calls with chains of up to `chain` calls, then
/// `hot` calls of one function at the top (a hot path, beside which most of the tree is too
/// narrow to draw, as in a long-running service), from the session of the deep test (call
/// tree, call graph, time, allocations).
fn wide_report(branch: u32, chain: u32, hot: u32) -> ReportData {
    let session = deep::session();
    service::request_handlers::a00(1, branch + chain, chain);
    for _ in 0..hot {
        service::request_handlers::a01(47, 0, chain);
    }
    session.finish().data
}

/// Rendering a wide report takes at most a fraction of its JSON's size beyond the report
/// itself, whatever the format: the stacks are walked where they lie (flame graphs and pprof
/// profiles), inferno is handed only the frames it draws, and folded stacks and JSON stream
/// to their writer. Reading the report back takes its text and the report, no tree.
#[test]
fn wide_report_renders_in_a_fraction_of_its_size() {
    let _serial = serial();
    let d = wide_report(10, 32, 400_000);
    let contexts = d.call_tree.as_ref().unwrap().contexts.len();
    assert!(contexts > 15_000, "{contexts} contexts");
    let json = d.json();
    let size = json.len();
    let (back, read) = peak_of(|| ReportData::from_json(&json).unwrap());
    drop(json);
    assert_eq!(
        back.call_tree.as_ref().unwrap().contexts.len(),
        contexts,
        "the report reads back whole"
    );
    drop(back);
    let mut phases: Vec<(&str, usize)> = vec![("from_json beyond its text", read)];
    let mut phase = |name, f: &dyn Fn() -> usize| {
        let (len, peak) = peak_of(f);
        assert!(len > 0, "{name} wrote nothing");
        phases.push((name, peak));
    };
    phase("text(10)", &|| d.text(10).len());
    phase("write_json", &|| {
        let mut sink = Count(0);
        d.write_json(&mut sink).unwrap();
        sink.0
    });
    for weight in [Weight::Calls, Weight::Time, Weight::AllocBytes] {
        phase("write_folded_by", &|| {
            let mut sink = Count(0);
            d.write_folded_by(weight, &mut sink).unwrap();
            sink.0
        });
        // Not by time: how much of the tree is wide enough to draw beside the hot path
        // would depend on the machine's speed.
        #[cfg(feature = "flamegraph")]
        if weight != Weight::Time {
            phase("svg_by", &|| d.svg_by(weight).len());
        }
    }
    #[cfg(feature = "pprof")]
    phase("pprof", &|| d.pprof().len());
    phase("callgrind", &|| d.callgrind().len());
    phase("dot", &|| d.dot().len());
    let over: Vec<String> = phases
        .into_iter()
        .filter_map(|(name, peak)| {
            let ratio = peak as f64 / size as f64;
            eprintln!(
                "{name}: peak {peak} bytes, {ratio:.3} x the JSON's {size} ({contexts} contexts)"
            );
            (ratio > wide_budget(name)).then(|| {
                format!(
                    "{name}: {ratio:.3} times the JSON (at most {})",
                    wide_budget(name)
                )
            })
        })
        .collect();
    assert!(over.is_empty(), "over budget: {over:?}");
}

/// The peak each phase of the wide report may take, as a multiple of its JSON's size. A
/// rendering that copies each stack or writes every stack's folded text took 4.8 times the
/// JSON for flame graphs and folded stacks and 3.1 for pprof on a report of this shape with
/// chains of up to 96 calls (19 MB), and about 0.4 as much per context at the chains of 32
/// used here (a copied stack grows with its depth, a context's JSON does not); walking them
/// in place takes 0.28 (SVG, folded) and 0.25 (pprof) here, 0.54, 0.39 and 0.23 there.
fn wide_budget(phase: &str) -> f64 {
    match phase {
        // Written through a buffer of fixed size.
        "write_json" => 0.01,
        // The typed report, built straight from the text: 0.41.
        "from_json beyond its text" => 0.7,
        // Tables, the call graph: 0.08 and less.
        "text(10)" | "callgrind" | "dot" => 0.25,
        _ => 1.0,
    }
}
