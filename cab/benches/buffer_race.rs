//! The buffer race: 8-byte events streamed from a producer thread to a consumer thread through
//! every design, pinned producer on one core and consumer on the other.
//!
//! Designs: the floor (the same events written into a private array of the same size, no
//! consumer), CAB exhaustive, CAB sampling, FastForward, N-way buffering, rtrb (per item and its
//! chunk API) and crossbeam's ArrayQueue, at 64 KB, 2 MB and 16 MB. Each cell is the median of
//! several runs of `EVENTS` events, end to end (first push to the consumer's last event), in one
//! process, and the table prints every design's ratio to CAB exhaustive.
//!
//! `cargo bench -p cabprof-cab --bench buffer_race` runs criterion's groups and then prints the
//! race table; `cargo bench -p cabprof-cab --bench buffer_race -- --table` prints only the
//! table.

use cabprof_cab::event::{Event, MethodId};
use cabprof_cab::fastforward::FastForward;
use cabprof_cab::nway::NWay;
use cabprof_cab::ring::{Cab, CabSampling};
use cabprof_cab::stats;
use cabprof_cab::{EventConsumer, EventProducer, Mode, Poll, RingConfig, Transport};
use criterion::{Criterion, Throughput};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Events per table run: 2^24 words = 128 MB of traffic, long enough that thread start-up is
/// noise, short enough for many repetitions on a 2-core machine.
const EVENTS: u64 = 1 << 24;
/// Repetitions per table cell; the median is reported with min and max.
const REPS: usize = 5;
const SIZES: [usize; 3] = [64 << 10, 2 << 20, 16 << 20];
const SAMPLING_RATE: f64 = 0.10;

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
/// a barrier; returns the time from release to the consumer's end, and the consumer's sum.
/// The bench's main thread is never pinned, so the unpinned runs really are unpinned.
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
        produce();
    });
    barrier.wait();
    let start = Instant::now();
    producer.join().unwrap();
    let (end, sum) = consumer.join().unwrap();
    (end.duration_since(start), sum)
}

fn run_transport<T: Transport>(cfg: RingConfig, events: u64, pinned: bool) -> (Duration, u64)
where
    T::Producer: 'static,
    T::Consumer: 'static,
{
    let (mut tx, mut rx) = T::channel(&cfg).unwrap();
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
            name: "floor (private array)",
            exact: false,
            run: |b, e, _| run_floor(b, e),
        },
        Entry {
            name: Cab::NAME,
            exact: true,
            run: |b, e, p| run_transport::<Cab>(RingConfig::new(b, chunk_for(b)), e, p),
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

/// Median, min and max of one cell's runs.
fn median(xs: Vec<f64>) -> (f64, f64, f64) {
    let (min, max) = stats::min_max(&xs);
    (stats::median(&xs), min, max)
}

fn table(pinned: bool, sizes: &[usize]) {
    let expect = expected_sum(EVENTS);
    println!(
        "\nbuffer race, {} events of 8 bytes, {}, median of {REPS} (min..max) ns/event, ratio = design / CAB",
        EVENTS,
        if pinned { "producer pinned to core 0, consumer to core 1" } else { "unpinned" }
    );
    for &size in sizes {
        println!(
            "\n  buffer {:>6} KB (chunk {} KB)",
            size >> 10,
            chunk_for(size) >> 10
        );
        let mut rows = Vec::new();
        for e in entries() {
            let mut ns = Vec::new();
            for _ in 0..REPS {
                let (t, sum) = (e.run)(size, EVENTS, pinned);
                if e.exact {
                    assert_eq!(sum, expect, "{} lost or corrupted events", e.name);
                }
                ns.push(t.as_nanos() as f64 / EVENTS as f64);
            }
            rows.push((e.name, median(ns)));
        }
        let cab = rows.iter().find(|r| r.0 == Cab::NAME).unwrap().1 .0;
        for (name, (med, lo, hi)) in rows {
            println!(
                "    {name:<24} {med:>7.3} ns/event ({lo:.3}..{hi:.3})   ratio {:>6.2}",
                med / cab
            );
        }
    }
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
    let table_only = args.iter().any(|a| a == "--table");
    let quick = args.iter().any(|a| a == "--quick");
    if !table_only {
        let mut c = Criterion::default().configure_from_args();
        criterion_groups(&mut c);
        c.final_summary();
    }
    if args.iter().any(|a| a == "--list" || a == "--test") && !table_only {
        return;
    }
    if quick {
        table(true, &[2 << 20]);
        return;
    }
    table(true, &SIZES);
    table(false, &[2 << 20]);
}
