//! Runtime benchmarks, printed as ratios measured in one run:
//!
//! 1. Aggregate throughput of 4 producer threads vs 1, one analyzer, exhaustive mode, a cheap
//!    counting analysis (2-core machine: the 4 producers share one core with each other).
//! 2. Idle cost: a session whose threads have rings but emit nothing; the process's CPU time
//!    over a few seconds of wall time (the analyzer must back off, not spin a core).
//! 3. New threads: what a thread's ring costs it, on huge and on 4 KiB pages, alternated
//!    round by round. (a) Thread churn, as a test harness makes it: 300 threads one after
//!    another, each emitting 200 events and exiting; the kept rings of exited threads serve
//!    the next ones. (b) A fresh ring's first lap: one thread emitting one ring's worth of
//!    events into a ring of a size no earlier round used, so none is kept for it.
//!
//! `cargo bench -p cabprof-cab --bench runtime`

use cabprof_bench_support::stats::median;
use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, EventAnalysis, RuntimeConfig, Session};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Count(u64);

impl EventAnalysis for Count {
    fn consume(&mut self, words: &[u64]) {
        self.0 += words.len() as u64;
    }
    fn merge(&mut self, o: Self) {
        self.0 += o.0;
    }
}

const EVENTS: u64 = 1 << 26;

fn throughput(threads: usize) -> f64 {
    let session = Session::start(RuntimeConfig::default(), Count::default).unwrap();
    let per = EVENTS / threads as u64;
    let start = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let e = Event::marker(1).unwrap();
                for _ in 0..per {
                    emit(e);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let r = session.finish();
    let el = start.elapsed();
    assert_eq!(r.analysis.0, per * threads as u64);
    r.analysis.0 as f64 / el.as_secs_f64()
}

/// User + system CPU time of this process, from /proc/self/stat (clock ticks of 10 ms).
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// The same stream pushed straight into a ring (no runtime, no TLS), consumer on a thread.
fn raw_ring() -> f64 {
    let cfg = RuntimeConfig::default().ring_config().unwrap();
    let (mut tx, mut rx) = cabprof_cab::ring::channel(&cfg).unwrap();
    let start = Instant::now();
    let c = std::thread::spawn(move || {
        let mut n = 0u64;
        loop {
            match rx.poll_with(|w| n += w.len() as u64) {
                cabprof_cab::Poll::Closed => return n,
                cabprof_cab::Poll::Empty => std::thread::yield_now(),
                cabprof_cab::Poll::Consumed(_) => {}
            }
        }
    });
    let e = Event::marker(1).unwrap();
    for _ in 0..EVENTS {
        tx.push(e);
    }
    tx.close();
    let n = c.join().unwrap();
    assert_eq!(n, EVENTS);
    n as f64 / start.elapsed().as_secs_f64()
}

/// A session of the default configuration with huge pages `huge` and ring size `buffer`.
fn session_with(huge: bool, buffer: Option<usize>) -> Session<Count> {
    let config = RuntimeConfig {
        huge_pages: huge,
        buffer_bytes: buffer,
        chunk_bytes: buffer.map(|b| b / 16),
        ..RuntimeConfig::default()
    };
    Session::start(config, Count::default).unwrap()
}

/// Section 3a: microseconds per thread of 300 threads made one after another, each emitting
/// 200 events and exiting.
fn churn(huge: bool) -> f64 {
    const THREADS: u64 = 300;
    let session = session_with(huge, None);
    let start = Instant::now();
    for _ in 0..THREADS {
        std::thread::spawn(|| {
            for v in 1..=200 {
                emit(Event::marker(v).unwrap());
            }
        })
        .join()
        .unwrap();
    }
    let el = start.elapsed();
    assert_eq!(session.finish().analysis.0, THREADS * 200);
    el.as_secs_f64() * 1e6 / THREADS as f64
}

/// Section 3b: milliseconds a new thread takes to emit one lap of a fresh ring of `buffer`
/// bytes, from its first event.
fn first_lap(huge: bool, buffer: usize) -> f64 {
    let session = session_with(huge, Some(buffer));
    let words = (buffer / 8) as u64;
    let ms = std::thread::spawn(move || {
        let start = Instant::now();
        for v in 1..=words {
            emit(Event::marker(v).unwrap());
        }
        start.elapsed().as_secs_f64() * 1e3
    })
    .join()
    .unwrap();
    assert_eq!(session.finish().analysis.0, words);
    ms
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let mut raws: Vec<f64> = (0..5).map(|_| raw_ring()).collect();
    raws.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut ones = Vec::new();
    let mut fours = Vec::new();
    for _ in 0..5 {
        ones.push(throughput(1));
        fours.push(throughput(4));
    }
    ones.sort_by(|a, b| a.partial_cmp(b).unwrap());
    fours.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (one, four) = (ones[2], fours[2]);
    println!("aggregate throughput, exhaustive, 1 analyzer, median of 5 runs of {EVENTS} events:");
    println!("  1 producer : {:>8.1} M events/s", one / 1e6);
    println!("  4 producers: {:>8.1} M events/s", four / 1e6);
    println!(
        "  slowdown 1 -> 4 producers: {:.2}x (target <= 1.5x)",
        one / four
    );
    println!(
        "  raw ring push (no runtime), 1 producer: {:>8.1} M events/s; emit() costs {:.2}x the raw push",
        raws[2] / 1e6,
        raws[2] / one
    );

    let session = Session::start(RuntimeConfig::default(), Count::default).unwrap();
    let idle: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                emit(Event::marker(1).unwrap()); // the thread now has its ring
                std::thread::sleep(Duration::from_secs(4));
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (c0, t0) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let (c1, wall) = (cpu_time(), t0.elapsed());
    for h in idle {
        h.join().unwrap();
    }
    let r = session.finish();
    assert_eq!(r.analysis.0, 4);
    if let (Some(a), Some(b)) = (c0, c1) {
        println!(
            "idle session (4 threads with rings, 1 analyzer): CPU {:?} over {:?} wall = {:.2}% of one core",
            b - a,
            wall,
            100.0 * (b - a).as_secs_f64() / wall.as_secs_f64()
        );
    }

    // 3. New threads, huge against 4 KiB pages, alternated; 9 rounds.
    let (mut churn_huge, mut churn_small, mut lap_huge, mut lap_small) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..9 {
        // A ring size of its own per round and kind (4 MiB and up, in steps of 256 KiB), so
        // the first-lap threads never find a kept ring. (Making one may unmap kept rings of
        // other kinds to make room: part of the cost of a new kind's first ring.)
        let fresh = |k: usize| (4 << 20) + (2 * round + k) * (256 << 10);
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for huge in order {
            let c = churn(huge);
            let l = first_lap(huge, fresh(usize::from(huge)));
            if huge {
                churn_huge.push(c);
                lap_huge.push(l);
            } else {
                churn_small.push(c);
                lap_small.push(l);
            }
        }
    }
    let (ch, cs, lh, ls) = (
        median(&churn_huge),
        median(&churn_small),
        median(&lap_huge),
        median(&lap_small),
    );
    println!("new threads, huge / 4 KiB pages, median of 9 alternated rounds:");
    println!(
        "  thread churn (300 threads x 200 events, kept rings reused): {ch:.1} / {cs:.1} us per thread ({:.2}x)",
        ch / cs
    );
    println!(
        "  a fresh 4+ MiB ring's first lap: {lh:.2} / {ls:.2} ms ({:.2}x)",
        lh / ls
    );
}
