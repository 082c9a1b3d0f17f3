//! Runtime benchmarks, printed as ratios measured in one run:
//!
//! 1. Aggregate throughput of 4 producer threads vs 1, one analyzer, exhaustive mode, a cheap
//!    counting analysis (2-core machine: the 4 producers share one core with each other).
//! 2. Idle cost: a session whose threads have rings but emit nothing; the process's CPU time
//!    over a few seconds of wall time (the analyzer must back off, not spin a core).
//!
//! `cargo bench -p cabprof-cab --bench runtime`

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, RingAnalysis, RuntimeConfig, Session};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Count(u64);

impl RingAnalysis for Count {
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
}
