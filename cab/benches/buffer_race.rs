//! The buffer race: 8-byte events streamed from a producer thread to a consumer thread through
//! every design, pinned producer on one core and consumer on the other.
//!
//! Designs: the floor (the same events written into a private array of the same size, no
//! consumer), CAB exhaustive, CAB exhaustive growing from 16 KB to the size (as the runtime
//! makes rings), CAB sampling, FastForward, N-way buffering, rtrb (per item and its
//! chunk API) and crossbeam's ArrayQueue, at 64 KB, 2 MB and 16 MB (pinned) and 2 MB unpinned.
//!
//! **The table** is paired by rounds. At each buffer size, every round runs every design once
//! (`EVENTS` events each, end to end: first push to the consumer's last event), in an order
//! shuffled afresh each round, so a slow spell of the shared machine lands on whichever designs
//! ran in it rather than on one design. Each design's time is divided by the floor's and by CAB
//! exhaustive's *of the same round*; the table prints the median of those per-round ratios with
//! a 95 % percentile-bootstrap interval (`cabprof_bench_support::stats::median_interval`, fixed seed) and
//! a verdict: `faster` or `slower` when the whole interval is below or above 1, `unresolved`
//! when it contains 1. Each interval is 95 % on its own, not jointly over the table.
//!
//! ```text
//! cargo bench -p cabprof-cab --bench buffer_race                 # criterion's groups, then the table
//! cargo bench -p cabprof-cab --bench buffer_race -- --table      # the table only
//!     [--events N] [--rounds N] [--quick]
//! ```
//!
//! `--events` (default 100M) and `--rounds` (default 17, at least 9: see
//! `cabprof_bench_support::stats::ROUNDS`) set the cost and imply `--table`; `--quick` races 2 MB pinned
//! only.

use cabprof_bench_support::stats::{self, MedianInterval, Side};
use cabprof_cab::event::{Event, MethodId};
use cabprof_cab::fastforward::FastForward;
use cabprof_cab::nway::NWay;
use cabprof_cab::ring::{self, Cab, CabSampling};
use cabprof_cab::{EventConsumer, EventProducer, Mode, Poll, RingConfig, Transport};
use criterion::{Criterion, Throughput};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Events per table run by default: 800 MB of traffic, 0.1 s or more per run even for the
/// floor, so that thread start-up and a short stall of the shared machine are small against it.
const EVENTS: u64 = 100_000_000;
/// Confidence level of the intervals.
const LEVEL: f64 = 0.95;
const SIZES: [usize; 3] = [64 << 10, 2 << 20, 16 << 20];
const SAMPLING_RATE: f64 = 0.10;
/// The floor's name in the race: the first reference of the ratios.
const FLOOR: &str = "floor (private array)";
const GROWING: &str = "CAB growing from 16 KB";

/// The i-th event of the stream: cheap to make, different each time, never a sentinel.
#[inline(always)]
fn event(i: u64) -> Event {
    let callee = MethodId::new((i & 0xFFFF) as u32 + 1).unwrap();
    Event::call(MethodId::ROOT, callee)
}

fn expected_sum(events: u64) -> u64 {
    (0..events).fold(0u64, |s, i| s.wrapping_add(event(i).word()))
}

/// Chunk size used with a given buffer: 16 chunks, at most 128 KB (the paper's chunk).
fn chunk_for(buffer: usize) -> usize {
    (buffer / 16).min(128 << 10)
}

/// Pin the calling thread to `core`. The core list comes from the machine, not from the
/// calling thread's (inherited) affinity mask, so a consumer spawned by a pinned producer
/// still lands on its own core.
fn pin(core: usize, pinned: bool) {
    if pinned {
        let ids = cabprof_cab::runtime::online_cores();
        if let Some(id) = ids.get(core % ids.len().max(1)) {
            core_affinity::set_for_current(*id);
        }
    }
}

/// Run `produce` on a new thread (core 0) and `consume` on another (core 1), both released by
/// a barrier; returns the time from the producer's start to the consumer's end, and the
/// consumer's sum. The bench's main thread is never pinned, so the unpinned runs really are
/// unpinned; the start is read on the producer's thread, not on the main thread, which on a
/// 2-core machine may not run again until both pinned threads are done (that read gave runs
/// of "0 ns").
fn race<P, C>(pinned: bool, produce: P, consume: C) -> (Duration, u64)
where
    P: FnOnce() + Send + 'static,
    C: FnOnce() -> u64 + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(3));
    let (b1, b2) = (barrier.clone(), barrier.clone());
    let consumer = std::thread::spawn(move || {
        pin(1, pinned);
        b2.wait();
        let sum = consume();
        (Instant::now(), sum)
    });
    let producer = std::thread::spawn(move || {
        pin(0, pinned);
        b1.wait();
        let start = Instant::now();
        produce();
        start
    });
    barrier.wait();
    let start = producer.join().unwrap();
    let (end, sum) = consumer.join().unwrap();
    (end.duration_since(start), sum)
}

fn run_transport<T: Transport>(cfg: RingConfig, events: u64, pinned: bool) -> (Duration, u64)
where
    T::Producer: 'static,
    T::Consumer: 'static,
{
    let (tx, rx) = T::channel(&cfg).unwrap();
    run_pair(tx, rx, events, pinned)
}

/// CAB exhaustive as the runtime makes it: a ring that starts at 16 KB and doubles while its
/// producer outpaces the consumer, up to `buffer` (every larger size granted): what a ring
/// costs once it has grown, with the growing included.
fn run_growing(buffer: usize, events: u64, pinned: bool) -> (Duration, u64) {
    let cfg = RingConfig::new(buffer, chunk_for(buffer));
    let grant: ring::Grant =
        Box::new(|_| Some(Box::new(()) as Box<dyn std::any::Any + Send + Sync>));
    let (tx, rx) = ring::growing_channel(&cfg, ring::Growth::new(16 << 10, grant)).unwrap();
    run_pair(tx, rx, events, pinned)
}

fn run_pair<P, C>(mut tx: P, mut rx: C, events: u64, pinned: bool) -> (Duration, u64)
where
    P: EventProducer + Send + 'static,
    C: EventConsumer + Send + 'static,
{
    race(
        pinned,
        move || {
            for i in 0..events {
                tx.push(event(i));
            }
            tx.close();
        },
        move || {
            let mut sum = 0u64;
            loop {
                let r = rx.poll(&mut |w: &[u64]| {
                    sum = w.iter().fold(sum, |s, &x| s.wrapping_add(x));
                });
                match r {
                    Poll::Closed => return sum,
                    Poll::Empty => std::hint::spin_loop(),
                    Poll::Consumed(_) => {}
                }
            }
        },
    )
}

fn run_floor(buffer: usize, events: u64) -> (Duration, u64) {
    let mut buf = vec![0u64; buffer / 8];
    let start = Instant::now();
    let mut i = 0usize;
    for n in 0..events {
        // SAFETY: `i < buf.len()` by the wrap below; volatile so the stores stay one per
        // event, as in every ring (no vectorized fill the rings could not do either).
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(i), event(n).word()) };
        i += 1;
        if i == buf.len() {
            i = 0;
        }
    }
    let el = start.elapsed();
    black_box(&buf);
    (el, 0)
}

fn run_rtrb_items(buffer: usize, events: u64, pinned: bool) -> (Duration, u64) {
    let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(buffer / 8);
    race(
        pinned,
        move || {
            for i in 0..events {
                let mut w = event(i).word();
                while let Err(rtrb::PushError::Full(back)) = tx.push(w) {
                    w = back;
                    std::hint::spin_loop();
                }
            }
        },
        move || {
            let mut sum = 0u64;
            let mut left = events;
            while left > 0 {
                match rx.pop() {
                    Ok(v) => {
                        sum = sum.wrapping_add(v);
                        left -= 1;
                    }
                    Err(_) => std::hint::spin_loop(),
                }
            }
            sum
        },
    )
}

/// rtrb's chunk API on both sides: the producer reserves up to 256 slots at a time and fills
/// them, the consumer reads everything available at once.
fn run_rtrb_chunks(buffer: usize, events: u64, pinned: bool) -> (Duration, u64) {
    const BATCH: u64 = 256;
    let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(buffer / 8);
    race(
        pinned,
        move || {
            let mut i = 0u64;
            while i < events {
                let want = BATCH.min(events - i) as usize;
                let n = tx.slots().min(want);
                if n == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                let chunk = tx.write_chunk_uninit(n).unwrap();
                let base = i;
                let written =
                    chunk.fill_from_iter((base..base + n as u64).map(|k| event(k).word()));
                i += written as u64;
            }
        },
        move || {
            let mut sum = 0u64;
            let mut left = events;
            while left > 0 {
                let n = rx.slots();
                if n == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                let chunk = rx.read_chunk(n).unwrap();
                let (a, b) = chunk.as_slices();
                sum = a.iter().chain(b).fold(sum, |s, &x| s.wrapping_add(x));
                chunk.commit_all();
                left -= n as u64;
            }
            sum
        },
    )
}

fn run_array_queue(buffer: usize, events: u64, pinned: bool) -> (Duration, u64) {
    let q = Arc::new(crossbeam_queue::ArrayQueue::<u64>::new(buffer / 8));
    let q2 = q.clone();
    race(
        pinned,
        move || {
            for i in 0..events {
                let mut w = event(i).word();
                while let Err(back) = q.push(w) {
                    w = back;
                    std::hint::spin_loop();
                }
            }
        },
        move || {
            let mut sum = 0u64;
            let mut left = events;
            while left > 0 {
                match q2.pop() {
                    Some(v) => {
                        sum = sum.wrapping_add(v);
                        left -= 1;
                    }
                    None => std::hint::spin_loop(),
                }
            }
            sum
        },
    )
}

/// A design in the race: name, whether its consumer must see every event, and how to run it.
struct Entry {
    name: &'static str,
    exact: bool,
    run: fn(usize, u64, bool) -> (Duration, u64),
}

fn entries() -> Vec<Entry> {
    vec![
        Entry {
            name: FLOOR,
            exact: false,
            run: |b, e, _| run_floor(b, e),
        },
        Entry {
            name: Cab::NAME,
            exact: true,
            run: |b, e, p| run_transport::<Cab>(RingConfig::new(b, chunk_for(b)), e, p),
        },
        Entry {
            name: GROWING,
            exact: true,
            run: run_growing,
        },
        Entry {
            name: "CAB sampling 10%",
            exact: false,
            run: |b, e, p| {
                let cfg = RingConfig::new(b, chunk_for(b)).with_mode(Mode::sampling(SAMPLING_RATE));
                run_transport::<CabSampling>(cfg, e, p)
            },
        },
        Entry {
            name: FastForward::NAME,
            exact: true,
            run: |b, e, p| run_transport::<FastForward>(RingConfig::new(b, chunk_for(b)), e, p),
        },
        Entry {
            name: NWay::NAME,
            exact: true,
            run: |b, e, p| run_transport::<NWay>(RingConfig::new(b, chunk_for(b)), e, p),
        },
        Entry {
            name: "rtrb push/pop",
            exact: true,
            run: run_rtrb_items,
        },
        Entry {
            name: "rtrb chunks",
            exact: true,
            run: run_rtrb_chunks,
        },
        Entry {
            name: "crossbeam ArrayQueue",
            exact: true,
            run: run_array_queue,
        },
    ]
}

/// What the table runs: `--events`, `--rounds` and `--quick`.
#[derive(Clone, Copy, Debug)]
struct Plan {
    events: u64,
    rounds: usize,
    quick: bool,
}

impl Plan {
    /// The table's options from the bench's arguments; the error names the flag and its range.
    fn from_args(args: &[String]) -> Result<Plan, String> {
        fn value<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
            args: &[String],
            flag: &str,
            default: T,
            min: T,
        ) -> Result<T, String> {
            let Some(i) = args.iter().position(|a| a == flag) else {
                return Ok(default);
            };
            let raw = args.get(i + 1).map(String::as_str).unwrap_or("");
            match raw.replace('_', "").parse::<T>() {
                Ok(v) if v >= min => Ok(v),
                _ => Err(format!("{flag}: expected an integer >= {min}, got {raw:?}")),
            }
        }
        Ok(Plan {
            events: value(args, "--events", EVENTS, 1 << 16)?,
            rounds: value(args, "--rounds", stats::ROUNDS, stats::MIN_ROUNDS)?,
            quick: args.iter().any(|a| a == "--quick"),
        })
    }
}

/// The per-round ratios of `num` to `den` summarized: median and bootstrap interval.
fn ratio(num: &[f64], den: &[f64]) -> MedianInterval {
    stats::median_interval(
        &stats::paired_ratios(num, den),
        LEVEL,
        stats::RESAMPLES,
        stats::SEED,
    )
}

/// `median [lo, hi] verdict` of a time ratio (below 1: the design is faster).
fn cell(ci: MedianInterval) -> String {
    format!(
        "{:>6.3} [{:>6.3}, {:>6.3}] {:<10}",
        ci.median,
        ci.lo,
        ci.hi,
        ci.time_verdict()
    )
}

/// One buffer size: `plan.rounds` rounds of every design in a shuffled order, then one row per
/// design. Returns how many of the comparisons the intervals resolved, and how many there were.
fn race_size(
    plan: Plan,
    size: usize,
    pinned: bool,
    expect: u64,
    rng: &mut fastrand::Rng,
) -> (usize, usize) {
    let entries = entries();
    let run = |e: &Entry, events: u64| {
        let (t, sum) = (e.run)(size, events, pinned);
        if e.exact && events == plan.events {
            assert_eq!(sum, expect, "{} lost or corrupted events", e.name);
        }
        t.as_nanos() as f64 / events as f64
    };
    // Warm-up: one short run of each design (page faults, thread start-up, frequency).
    for e in &entries {
        run(e, (plan.events / 16).max(1 << 16));
    }
    let mut ns = vec![Vec::with_capacity(plan.rounds); entries.len()];
    let mut order: Vec<usize> = (0..entries.len()).collect();
    for round in 0..plan.rounds {
        eprint!(
            "\r  {} KB{}: round {}/{}",
            size >> 10,
            if pinned { "" } else { " unpinned" },
            round + 1,
            plan.rounds
        );
        rng.shuffle(&mut order);
        for &i in &order {
            ns[i].push(run(&entries[i], plan.events));
        }
    }
    eprintln!();
    let find = |name: &str| &ns[entries.iter().position(|e| e.name == name).unwrap()];
    let (floor, cab) = (find(FLOOR), find(Cab::NAME));
    println!(
        "\n  buffer {:>6} KB (chunk {} KB){}",
        size >> 10,
        chunk_for(size) >> 10,
        if pinned { "" } else { ", unpinned" }
    );
    println!(
        "    {:<24} {:>22}   {:<36} {:<36}",
        "design",
        "ns/event median (min..max)",
        "/ floor: median [95% CI]",
        "/ CAB: median [95% CI]"
    );
    let (mut resolved, mut total) = (0, 0);
    for (e, xs) in entries.iter().zip(&ns) {
        let (lo, hi) = stats::min_max(xs);
        let mut row = format!(
            "    {:<24} {:>7.3} ({:.3}..{:.3})    ",
            e.name,
            stats::median(xs),
            lo,
            hi
        );
        for reference in [floor, cab] {
            if std::ptr::eq(xs, reference) {
                row.push_str(&format!("{:<37}", "  (reference)"));
            } else {
                let ci = ratio(xs, reference);
                total += 1;
                resolved += usize::from(ci.side_of(1.0) != Side::Contains);
                row.push_str(&cell(ci));
                row.push(' ');
            }
        }
        println!("{}", row.trim_end());
    }
    (resolved, total)
}

fn table(plan: Plan) {
    let expect = expected_sum(plan.events);
    println!(
        "\nbuffer race: {} events of 8 bytes per run, {} rounds per buffer size, each round every \
         design once in a shuffled order; ratio = design / reference in the same round, median over \
         the rounds with a {:.0}% bootstrap interval ({} resamples, seed {:#x})",
        plan.events,
        plan.rounds,
        LEVEL * 100.0,
        stats::RESAMPLES,
        stats::SEED
    );
    let mut rng = fastrand::Rng::with_seed(stats::SEED);
    let mut cases: Vec<(usize, bool)> = if plan.quick {
        vec![(2 << 20, true)]
    } else {
        SIZES.iter().map(|&s| (s, true)).collect()
    };
    if !plan.quick {
        cases.push((2 << 20, false));
    }
    let (mut resolved, mut total) = (0, 0);
    for (size, pinned) in cases {
        let (r, t) = race_size(plan, size, pinned, expect, &mut rng);
        resolved += r;
        total += t;
    }
    println!(
        "\n  {resolved} of {total} comparisons resolved at {:.0}%",
        LEVEL * 100.0
    );
}

fn criterion_groups(c: &mut Criterion) {
    const PER_ITER: u64 = 1 << 16;
    let size = 2 << 20;
    let mut g = c.benchmark_group("buffer_race_2MB");
    g.throughput(Throughput::Elements(PER_ITER));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_millis(500));
    for e in entries() {
        g.bench_function(e.name, |b| {
            b.iter_custom(|iters| (e.run)(size, iters * PER_ITER, true).0)
        });
    }
    g.finish();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let plan = match Plan::from_args(&args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("buffer_race: {e}");
            std::process::exit(2);
        }
    };
    // Criterion's own parser knows neither `--events` nor `--rounds`: they imply the table.
    let table_only = args
        .iter()
        .any(|a| a == "--table" || a == "--events" || a == "--rounds");
    if !table_only {
        let mut c = Criterion::default().configure_from_args();
        criterion_groups(&mut c);
        c.final_summary();
        if args.iter().any(|a| a == "--list" || a == "--test") {
            return;
        }
    }
    table(plan);
}
