//! `cabprof::sync`'s locks and channels and the waits analysis: where a wait lands (the
//! waiter's context for the block profile, the holder's for the mutex profile, the creation
//! site), how long messages sit in a channel (its latency, per creation site), that the
//! channel wrappers keep the standard library's capacity and order, and that `go tool pprof`
//! reads the profiles. Durations are asserted in generous ranges around what
//! the test itself sleeps, never cabprof's own speed.

use crate::support::serial;
#[cfg(feature = "serve")]
use cabprof::report::WaitProfile;
use cabprof::report::{LatencyEntry, WaitCountsEntry, WaitsData};
use cabprof::sync::mpsc;
use cabprof::sync::{Mutex, RwLock};
use cabprof::{Analysis, ReportData, Session};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Nanoseconds in a millisecond.
pub(crate) const MS: u64 = 1_000_000;

/// A session of the call tree and the waits analysis.
pub(crate) fn session() -> Session {
    Session::builder()
        .analyses(&[Analysis::CallTree, Analysis::Waits])
        .start()
        .expect("start a session")
}

/// The waits of the context whose innermost function is `name` (a single such context).
pub(crate) fn context(data: &ReportData, name: &str) -> WaitCountsEntry {
    let w = data.waits.as_ref().expect("the waits analysis ran");
    let found: Vec<_> = w
        .contexts
        .iter()
        .filter(|c| data.name(c.method) == name)
        .collect();
    assert_eq!(found.len(), 1, "one context of {name} in {:#?}", w.contexts);
    found[0].counts
}

fn waits(data: &ReportData) -> &WaitsData {
    data.waits.as_ref().expect("the waits analysis ran")
}

#[cabprof::profile]
fn hold_lock(m: &Mutex<u64>, rounds: usize, held: &Barrier, done: &Barrier) {
    for _ in 0..rounds {
        let mut g = m.lock();
        held.wait();
        std::thread::sleep(Duration::from_millis(20));
        *g += 1;
        drop(g);
        done.wait();
    }
}

#[cabprof::profile]
fn wait_for_lock(m: &Mutex<u64>) -> u64 {
    *m.lock()
}

/// `rounds` waits of about 20 ms: another thread holds the lock 20 ms each round while this
/// one `take`s it. The lock is made on the line this returns.
pub(crate) fn lock_waits(rounds: usize, take: impl Fn(&Mutex<u64>)) -> u32 {
    let m = Arc::new(Mutex::new(0u64));
    let line = line!() - 1;
    let (held, done) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let holder = {
        let (m, held, done) = (m.clone(), held.clone(), done.clone());
        std::thread::spawn(move || hold_lock(&m, rounds, &held, &done))
    };
    for _ in 0..rounds {
        held.wait();
        take(&m);
        done.wait();
    }
    holder.join().unwrap();
    line
}

/// Holds a lock 20 ms, 25 times, while another thread waits for it each time: about 0.5 s.
/// Returns the line the lock was made on.
fn contend() -> u32 {
    lock_waits(25, |m| {
        std::hint::black_box(wait_for_lock(m));
    })
}

fn contended_mutex() -> (ReportData, u32) {
    let _one = serial();
    let s = session();
    let line = contend();
    (s.finish().data, line)
}

#[test]
fn a_lock_wait_lands_in_the_waiters_context_and_the_hold_in_the_holders() {
    let (data, line) = contended_mutex();
    let waiter = context(&data, "it::waits::wait_for_lock");
    assert_eq!(waiter.block.count, 25, "every round waited");
    let ns = waiter.block.ns;
    assert!(
        (400 * MS..=2_500 * MS).contains(&ns),
        "about 25 x 20 ms waited: {ns} ns"
    );
    assert_eq!(waiter.mutex.count, 0);
    // The holder released with one waiter each time (a waiter late by the whole 20 ms on a
    // loaded host may be missed by its hold, never counted twice).
    let holder = context(&data, "it::waits::hold_lock");
    assert_eq!(holder.block.count, 0);
    assert!((15..=25).contains(&holder.mutex.count), "{holder:?}");
    assert!(
        (250 * MS..=2_500 * MS).contains(&holder.mutex.ns),
        "{holder:?}"
    );
    // One creation site: this file's line.
    let w = waits(&data);
    assert_eq!(w.sites.len(), 1, "{:#?}", w.sites);
    assert_eq!(w.sites[0].kind, "Mutex");
    assert!(
        w.sites[0].site.contains(&format!("waits.rs:{line}:")),
        "{}",
        w.sites[0].site
    );
    assert_eq!(w.sites[0].counts.block, w.totals.block);
    assert_eq!(w.sites[0].counts.mutex, w.totals.mutex);
    let text = data.text(10);
    assert!(text.contains("waits: 25 waits for"), "{text}");
    assert!(text.contains("by creation site"), "{text}");
    assert!(text.contains("it::waits::wait_for_lock"), "{text}");
}

#[cabprof::profile]
fn read_shared(l: &RwLock<Vec<u32>>) -> usize {
    l.read().len()
}

#[test]
fn a_reader_waiting_for_a_writer_is_a_wait() {
    let _one = serial();
    let s = session();
    let l = Arc::new(RwLock::new(vec![1, 2, 3]));
    let held = Arc::new(Barrier::new(2));
    let writer = {
        let (l, held) = (l.clone(), held.clone());
        std::thread::spawn(move || {
            let mut g = l.write();
            held.wait();
            std::thread::sleep(Duration::from_millis(30));
            g.push(4);
        })
    };
    held.wait();
    assert_eq!(read_shared(&l), 4);
    writer.join().unwrap();
    let data = s.finish().data;
    let reader = context(&data, "it::waits::read_shared");
    assert_eq!(reader.block.count, 1);
    assert!(
        (20 * MS..=2_000 * MS).contains(&reader.block.ns),
        "{reader:?}"
    );
    let w = waits(&data);
    assert_eq!(w.sites[0].kind, "RwLock");
    // The writer (outside instrumented functions: the root) released with the reader
    // waiting: one waiter's worth of the hold after the reader arrived.
    assert_eq!(w.root.mutex.count, 1, "{w:?}");
    assert!((10 * MS..=2_000 * MS).contains(&w.root.mutex.ns), "{w:?}");
}

#[test]
fn uncontended_locks_record_nothing() {
    let _one = serial();
    let s = session();
    let m = Mutex::new(0u32);
    let l = RwLock::new(0u32);
    for _ in 0..1000 {
        *m.lock() += 1;
        *l.write() += 1;
        std::hint::black_box(*l.read());
    }
    assert!(m.try_lock().is_some());
    let data = s.finish().data;
    let w = waits(&data);
    assert_eq!(w.totals, WaitCountsEntry::default());
    assert!(w.sites.is_empty());
    assert!(data.text(10).contains("no wait was recorded"));
}

#[cabprof::profile]
fn produce(tx: &mpsc::SyncSender<u32>, n: u32) {
    for i in 0..n {
        tx.send(i).unwrap();
    }
}

#[test]
fn a_full_channel_is_a_blocked_send_in_the_senders_context() {
    let _one = serial();
    let s = session();
    let (tx, rx) = mpsc::sync_channel(1);
    let consumer = slow_consumer(rx);
    produce(&tx, 40);
    drop(tx);
    assert_eq!(consumer.join().unwrap(), (0..40).collect::<Vec<_>>());
    let data = s.finish().data;
    let sender = context(&data, "it::waits::produce");
    // The channel holds one message and the consumer has one in hand: the first sends do
    // not wait, the others wait about 5 ms each.
    assert!((30..=40).contains(&sender.block.count), "{sender:?}");
    assert!(
        (150 * MS..=1_500 * MS).contains(&sender.block.ns),
        "about 40 x 5 ms blocked: {sender:?}"
    );
    let site = &waits(&data).sites[0];
    assert_eq!(site.kind, "sync_channel");
    assert!(site.site.contains("waits.rs"), "{}", site.site);
}

/// A small deterministic generator (xorshift), so the cases need no dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Many random sequences of sends and receives on a wrapped and a plain `sync_channel` of the
/// same bound, in one thread: every step answers the same (so the capacity is the same) and
/// messages come out in the same order. A session records, so the wrapped paths run.
#[test]
fn channels_keep_the_plain_channels_capacity_and_order() {
    let _one = serial();
    let s = session();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut received = 0u64;
    for case in 0..300 {
        let bound = (rng.next() % 5) as usize;
        let (tx, rx) = mpsc::sync_channel::<u64>(bound);
        let (ptx, prx) = std_mpsc::sync_channel::<u64>(bound);
        let mut queued = 0usize;
        for step in 0..60 {
            let v = rng.next();
            match rng.next() % 4 {
                0 => {
                    // The same answer, and a refused message comes back bare.
                    let a = tx.try_send(v);
                    let b = ptx.try_send(v);
                    assert_eq!(a, b, "case {case} step {step}: try_send");
                    queued += a.is_ok() as usize;
                    assert!(queued <= bound, "case {case}: more than {bound} queued");
                }
                // A blocking send only where it cannot block: the plain one agrees it fits.
                1 if queued < bound => {
                    tx.send(v).unwrap();
                    ptx.send(v).unwrap();
                    queued += 1;
                }
                2 => {
                    let a = rx.try_recv();
                    let b = prx.try_recv();
                    assert_eq!(a, b, "case {case} step {step}: try_recv");
                    queued -= a.is_ok() as usize;
                    received += a.is_ok() as u64;
                }
                _ if queued > 0 => {
                    assert_eq!(rx.recv().ok(), prx.recv().ok(), "case {case}: recv");
                    queued -= 1;
                    received += 1;
                }
                _ => {
                    let a = rx.recv_timeout(Duration::from_micros(10));
                    let b = prx.recv_timeout(Duration::from_micros(10));
                    assert_eq!(a, b, "case {case}: recv_timeout");
                    received += a.is_ok() as u64;
                }
            }
        }
        // What is there now, without blocking, in order.
        if case % 2 == 0 {
            let a: Vec<u64> = rx.try_iter().collect();
            assert_eq!(
                a,
                prx.try_iter().collect::<Vec<_>>(),
                "case {case}: try_iter"
            );
            received += a.len() as u64;
        }
        // Full at exactly the bound, then drained in order.
        while tx.try_send(1).is_ok() {
            ptx.try_send(1).unwrap();
        }
        assert!(ptx.try_send(1).is_err(), "case {case}: same capacity");
        assert_eq!(
            tx.try_send(2),
            Err(mpsc::TrySendError::Full(2)),
            "case {case}: a full channel gives the message back"
        );
        drop((tx, ptx));
        let rest = rx.iter().collect::<Vec<_>>();
        assert_eq!(rest, prx.iter().collect::<Vec<_>>());
        received += rest.len() as u64;
    }
    // Every message that came out, whichever way, had its latency taken once; the 300
    // channels are one site, made on the same line.
    let data = s.finish().data;
    let latency = channel_latency(&data, "sync_channel");
    assert_eq!(latency.count, received, "{latency:?}");
    assert_eq!(latency.buckets.iter().sum::<u64>(), received);
    let s = session();
    // Across threads: a bound-2 channel's sender blocks and resumes in order.
    let (tx, rx) = mpsc::sync_channel(2);
    let producer = std::thread::spawn(move || {
        for i in 0..2000u32 {
            tx.send(i).unwrap();
        }
    });
    let got: Vec<u32> = rx.into_iter().collect();
    producer.join().unwrap();
    assert_eq!(got, (0..2000).collect::<Vec<_>>());
    let (tx, rx) = mpsc::channel();
    tx.send(7u8).unwrap();
    drop(tx);
    assert_eq!(rx.recv(), Ok(7));
    assert_eq!(rx.recv(), Err(mpsc::RecvError));
    // Disconnected: the message comes back bare.
    let (tx, rx) = mpsc::channel();
    let (stx, srx) = mpsc::sync_channel(1);
    drop((rx, srx));
    assert_eq!(tx.send(8u8), Err(mpsc::SendError(8)));
    assert_eq!(stx.send(9u8), Err(mpsc::SendError(9)));
    assert_eq!(stx.try_send(10), Err(mpsc::TrySendError::Disconnected(10)));
    drop(s.finish());
}

/// The latency of the one site of `kind` (a single such site, with latencies).
pub(crate) fn channel_latency(data: &ReportData, kind: &str) -> LatencyEntry {
    let w = waits(data);
    let found: Vec<_> = w.sites.iter().filter(|s| s.kind == kind).collect();
    assert_eq!(found.len(), 1, "one site of {kind} in {:#?}", w.sites);
    found[0]
        .latency
        .clone()
        .unwrap_or_else(|| panic!("latencies at {kind}: {:#?}", found[0]))
}

/// 20 messages through a `sync_channel(4)` whose consumer takes 5 ms over each, sent as fast
/// as the channel takes them. A message's latency runs from its `send` to its receive, any wait
/// for room included. Message `k` is received at about `5k` ms. From the fifth on, its send
/// begins when the one before it got in, once message `k - 5` was received (about `5(k - 5)`
/// ms), waits for room until message `k - 4` is received, and the message is taken out at `5k`:
/// 25 ms. The first five are sent at once: 0, 5, 10, 15 and 20 ms. Mean: (50 + 15 x 25) / 20 =
/// 21.25 ms (were the wait for room left out, 17.5 ms). A slower consumer (a loaded host
/// oversleeps) only lengthens it; a producer late to refill could shorten it a little.
#[test]
fn a_full_channel_holds_each_message_for_the_consumers_pace() {
    let _one = serial();
    let s = session();
    let (tx, rx) = mpsc::sync_channel(4);
    let line = line!() - 1;
    let consumer = slow_consumer(rx);
    produce(&tx, 20);
    drop(tx);
    assert_eq!(consumer.join().unwrap(), (0..20).collect::<Vec<_>>());
    let data = s.finish().data;
    let l = channel_latency(&data, "sync_channel");
    assert_eq!(l.count, 20, "{l:?}");
    let mean = l.mean_ns();
    assert!(
        (19 * MS..=100 * MS).contains(&mean),
        "about 21.25 ms on average: {l:?}"
    );
    assert!((25 * MS..=1_000 * MS).contains(&l.max_ns), "{l:?}");
    // Most took between 10 and 100 ms (the bucket of 25 ms); the median is bounded by it.
    assert!(l.buckets[5] >= 15, "{l:?}");
    assert_eq!(l.quantile_ns(0.5), (100 * MS).min(l.max_ns), "{l:?}");
    let site = waits(&data)
        .sites
        .iter()
        .find(|s| s.kind == "sync_channel")
        .unwrap();
    assert!(
        site.site.contains(&format!("waits.rs:{line}:")),
        "{}",
        site.site
    );
    let text = data.text(10);
    assert!(text.contains("channel latency"), "{text}");
    assert!(text.contains(&format!("waits.rs:{line}:")), "{text}");
}

/// An unbounded channel never blocks a send, but its messages wait for the receiver: ten sent
/// at once and received 20 ms later each sat at least 20 ms, even with no wait recorded.
#[test]
fn an_unbounded_channels_messages_have_their_latency() {
    let _one = serial();
    let s = session();
    let (tx, rx) = mpsc::channel();
    for i in 0..10u32 {
        tx.send(i).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        rx.try_iter().collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    let data = s.finish().data;
    let l = channel_latency(&data, "channel");
    assert_eq!(l.count, 10, "{l:?}");
    assert!((20 * MS..=2_000 * MS).contains(&l.mean_ns()), "{l:?}");
    // No send or receive waited: the site is there for its latency alone.
    let w = waits(&data);
    assert_eq!(w.totals, WaitCountsEntry::default());
    let text = data.text(10);
    assert!(text.contains("no wait was recorded"), "{text}");
    assert!(text.contains("channel latency"), "{text}");
    // A window reads it back and subtracts it.
    let back = ReportData::from_json(&data.json()).expect("reads back");
    assert_eq!(back.waits, data.waits);
    assert!(waits(&data.since(&data)).sites.is_empty());
}

/// Messages sent while no session records, or while one records without the waits analysis,
/// carry no send time: receiving them while a waits session records writes nothing; a message
/// sent and received during it does.
#[test]
fn messages_sent_without_a_session_have_no_latency() {
    let _one = serial();
    let (tx, rx) = mpsc::sync_channel(8);
    let (utx, urx) = mpsc::channel();
    for i in 0..3u32 {
        tx.send(i).unwrap();
        utx.send(i).unwrap();
    }
    let other = Session::builder()
        .analyses(&[Analysis::CallTree])
        .start()
        .expect("start a session without the waits analysis");
    for i in 3..5u32 {
        tx.send(i).unwrap();
        utx.send(i).unwrap();
    }
    drop(other.finish());
    let s = session();
    assert_eq!(
        rx.try_iter().collect::<Vec<_>>(),
        (0..5).collect::<Vec<_>>()
    );
    assert_eq!(urx.try_iter().count(), 5);
    tx.send(5).unwrap();
    assert_eq!(rx.recv(), Ok(5));
    let data = s.finish().data;
    assert_eq!(channel_latency(&data, "sync_channel").count, 1);
    assert!(
        waits(&data).sites.iter().all(|s| s.kind != "channel"),
        "{:#?}",
        waits(&data).sites
    );
    // Sent during a session, received after it: nothing to record it in.
    let s = session();
    tx.send(6).unwrap();
    drop(s.finish());
    assert_eq!(rx.recv(), Ok(6));
}

#[test]
fn the_waits_read_back_and_subtract() {
    let (data, _) = contended_mutex();
    let back = ReportData::from_json(&data.json()).expect("reads back");
    assert_eq!(back.waits, data.waits);
    let none = data.since(&data);
    let w = waits(&none);
    assert_eq!(w.totals, WaitCountsEntry::default());
    assert!(w.sites.is_empty());
}

/// `/metrics` has a channel's latency as a Prometheus histogram: ten messages that each sat
/// about 20 ms are all in the 100 ms bucket, none in the 10 ms one.
#[cfg(feature = "serve")]
#[test]
fn metrics_serve_the_channel_latency_histogram() {
    use crate::serve_support::get;
    let _one = serial();
    let (s, addr) = served_session();
    let (tx, rx) = mpsc::channel();
    for i in 0..10u32 {
        tx.send(i).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(rx.try_iter().count(), 10);
    cabprof::flush_thread();
    let metrics = get(addr, "/metrics").text();
    assert!(
        metrics.contains("# TYPE cabprof_channel_latency_seconds histogram"),
        "{metrics}"
    );
    let value = |name: &str, le: Option<&str>| {
        let head = match le {
            Some(le) => format!("{name}{{le=\"{le}\",kind=\"channel\",site=\""),
            None => format!("{name}{{kind=\"channel\",site=\""),
        };
        metrics
            .lines()
            .find(|l| l.starts_with(&head))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    let bucket = |le| value("cabprof_channel_latency_seconds_bucket", Some(le));
    assert_eq!(bucket("+Inf").as_deref(), Some("10"), "{metrics}");
    assert_eq!(bucket("0.01").as_deref(), Some("0"), "{metrics}");
    assert_eq!(
        value("cabprof_channel_latency_seconds_count", None).as_deref(),
        Some("10"),
        "{metrics}"
    );
    let sum: f64 = value("cabprof_channel_latency_seconds_sum", None)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a sum in {metrics}"));
    assert!((0.2..=20.0).contains(&sum), "ten of about 20 ms: {sum}");
    drop(s.finish());
}

/// `go tool pprof -top` of `data`'s `profile` written to a file named by `name`, at sample
/// `index` (`delay` in ns, `contentions` in counts): function -> (flat, cum). `None` where `go`
/// is missing (outside CI).
#[cfg(feature = "serve")]
pub(crate) fn go_top(
    data: &ReportData,
    profile: WaitProfile,
    index: &str,
    name: &str,
) -> Option<std::collections::BTreeMap<String, (u64, u64)>> {
    use crate::serve_support::available;
    if !available("go", &["version"], "golang-go") {
        return None;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("waits");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}-{}.pb.gz", profile.name()));
    std::fs::write(&file, data.pprof_waits(profile, &[]).unwrap()).unwrap();
    Some(crate::go_pprof::top_rows(&go_pprof_top(
        file.as_os_str(),
        index,
    )))
}

/// `go tool pprof -top` of `source` (a file or a URL) at sample `index`, in whole units
/// (`delay` in ns): its output.
#[cfg(feature = "serve")]
fn go_pprof_top(source: &std::ffi::OsStr, index: &str) -> String {
    let unit = if index == "delay" {
        "-unit=ns"
    } else {
        "-unit=minimum"
    };
    let out = std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-nodefraction=0"])
        .arg(format!("-sample_index={index}"))
        .arg(unit)
        .arg(source)
        .env("PPROF_TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(feature = "serve")]
#[test]
fn go_tool_pprof_reads_the_block_and_mutex_profiles() {
    let (data, _) = contended_mutex();
    for (profile, name, expected) in [
        (
            WaitProfile::Block,
            "it::waits::wait_for_lock",
            context(&data, "it::waits::wait_for_lock").block,
        ),
        (
            WaitProfile::Mutex,
            "it::waits::hold_lock",
            context(&data, "it::waits::hold_lock").mutex,
        ),
    ] {
        for (index, value) in [("delay", expected.ns), ("contentions", expected.count)] {
            let Some(rows) = go_top(&data, profile, index, "lock") else {
                return;
            };
            let (flat, _) = rows
                .get(name)
                .unwrap_or_else(|| panic!("{name} in the {index} top: {rows:?}"));
            assert_eq!(*flat, value, "{profile:?} {index}: {rows:?}");
        }
    }
}

#[cfg(feature = "serve")]
#[test]
fn go_tool_pprof_fetches_the_block_profile_over_http() {
    use crate::go_pprof::top_rows;
    use crate::serve_support::{available, get};
    if !available("go", &["version"], "golang-go") {
        return;
    }
    let _one = serial();
    let (s, addr) = served_session();
    contend();
    cabprof::flush_thread();
    assert_eq!(get(addr, "/debug/pprof/mutex").status, 200);
    let metrics = get(addr, "/metrics").text();
    for part in [
        "cabprof_waits_total{kind=\"Mutex\",site=\"",
        "cabprof_wait_seconds_total{kind=\"Mutex\",site=\"",
        "profile=\"block\"} 25",
        "profile=\"mutex\"}",
        "# TYPE cabprof_lock_wait_seconds histogram",
        "cabprof_lock_wait_seconds_count{kind=\"Mutex\",site=\"",
    ] {
        assert!(metrics.contains(part), "{part} in:\n{metrics}");
    }
    // Every one of the 25 waits of about 20 ms is in the 100 ms bucket, none in the 1 ms one.
    let bucket = |le: &str| {
        let head = format!("cabprof_lock_wait_seconds_bucket{{le=\"{le}\",kind=\"Mutex\"");
        metrics
            .lines()
            .find(|l| l.starts_with(&head))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    assert_eq!(bucket("+Inf").as_deref(), Some("25"), "{metrics}");
    assert_eq!(bucket("0.001").as_deref(), Some("0"), "{metrics}");
    let url = format!("http://{addr}/debug/pprof/block");
    let text = go_pprof_top(url.as_ref(), "delay");
    let rows = top_rows(&text);
    let (flat, _) = rows
        .get("it::waits::wait_for_lock")
        .unwrap_or_else(|| panic!("the waiter in the block profile:\n{text}"));
    assert!((400 * MS..=2_500 * MS).contains(flat), "{text}");
    drop(s.finish());
}

#[test]
fn a_windows_wait_histogram_holds_the_windows_waits_only() {
    let _one = serial();
    let s = session();
    let wait = |m: &Mutex<u64>| {
        std::hint::black_box(wait_for_lock(m));
    };
    lock_waits(3, wait);
    cabprof::flush_thread();
    let before = s.snapshot().expect("a snapshot").data;
    lock_waits(2, wait);
    cabprof::flush_thread();
    let after = s.snapshot().expect("a snapshot").data;
    drop(s.finish());
    let window = after.since(&before);
    let site = &waits(&window).sites[0];
    assert_eq!(site.counts.block.count, 2, "{site:?}");
    let buckets = site
        .block_buckets
        .as_ref()
        .expect("a lock site's histogram");
    assert_eq!(buckets.iter().sum::<u64>(), 2, "{site:?}");
    let whole = &waits(&after).sites[0];
    let all = whole
        .block_buckets
        .as_ref()
        .expect("a lock site's histogram");
    assert_eq!(all.iter().sum::<u64>(), 5, "{whole:?}");
}

/// The latencies `data` counted, over all channel sites.
fn latencies(data: &ReportData) -> u64 {
    let w = waits(data);
    w.sites
        .iter()
        .filter_map(|s| s.latency.as_ref())
        .map(|l| l.count)
        .sum()
}

#[test]
fn a_refused_second_start_leaves_the_running_session_stamping() {
    let _one = serial();
    let s = session();
    let second = Session::builder().analyses(&[Analysis::Waits]).start();
    assert!(second.is_err(), "a second session cannot start");
    let (tx, rx) = mpsc::channel();
    for i in 0..4u32 {
        tx.send(i).unwrap();
    }
    assert_eq!(rx.try_iter().count(), 4);
    let data = s.finish().data;
    assert_eq!(latencies(&data), 4, "{:#?}", waits(&data).sites);
}

#[test]
fn a_message_from_before_the_session_is_not_its_latency() {
    let _one = serial();
    let (tx, rx) = mpsc::channel();
    // Sent with no session, after one was dropped without `finish`.
    drop(session());
    tx.send(1u32).unwrap();
    // Sent in an earlier session, received in the next.
    let earlier = session();
    tx.send(2u32).unwrap();
    drop(earlier.finish());
    std::thread::sleep(Duration::from_millis(20));
    let s = session();
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.recv(), Ok(2));
    tx.send(3u32).unwrap();
    assert_eq!(rx.recv(), Ok(3));
    let data = s.finish().data;
    assert_eq!(latencies(&data), 1, "{:#?}", waits(&data).sites);
}

/// A consumer thread that takes 5 ms over each message of `rx` until it disconnects: what it
/// got, in order.
pub(crate) fn slow_consumer<I>(rx: I) -> std::thread::JoinHandle<Vec<u32>>
where
    I: IntoIterator<Item = u32> + Send + 'static,
{
    std::thread::spawn(move || {
        rx.into_iter()
            .inspect(|_| std::thread::sleep(Duration::from_millis(5)))
            .collect()
    })
}

/// A session of the call tree and the waits analysis with its endpoint, and the endpoint's
/// address.
#[cfg(feature = "serve")]
fn served_session() -> (Session, std::net::SocketAddr) {
    let s = Session::builder()
        .analyses(&[Analysis::CallTree, Analysis::Waits])
        .serve("127.0.0.1:0")
        .start()
        .expect("start a served session");
    let addr = s.serve_addr().expect("an endpoint");
    (s, addr)
}
