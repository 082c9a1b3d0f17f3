//! Where the time waits: a producer feeding four workers through a bounded channel, the
//! workers sharing a cache behind one lock that one of them holds while it rebuilds. The
//! `waits` analysis shows who waited (the block profile), who held them up (the mutex
//! profile) and at which lock or channel, and how long the jobs sat in the channel.
//!
//! `cargo run --release --example waits`

use cabprof::sync::{mpsc, Mutex};
use cabprof::{profile, Analysis, Session};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Look a key up, computing it under the lock on a miss (the slow part: the lock is held).
#[profile]
fn lookup(cache: &Mutex<HashMap<u64, u64>>, key: u64) -> u64 {
    let mut map = cache.lock();
    if let Some(&v) = map.get(&key) {
        return v;
    }
    std::thread::sleep(Duration::from_millis(2));
    let v = key.wrapping_mul(0x9e37_79b9);
    map.insert(key, v);
    v
}

#[profile]
fn handle(cache: &Mutex<HashMap<u64, u64>>, job: u64) -> u64 {
    std::thread::sleep(Duration::from_micros(500));
    lookup(cache, job % 64)
}

#[profile]
fn worker(jobs: &Mutex<mpsc::Receiver<u64>>, cache: &Mutex<HashMap<u64, u64>>) -> u64 {
    let mut sum = 0u64;
    loop {
        let job = jobs.lock().recv();
        match job {
            Ok(job) => sum = sum.wrapping_add(handle(cache, job)),
            Err(_) => return sum,
        }
    }
}

#[profile]
fn produce(tx: mpsc::SyncSender<u64>, n: u64) {
    for job in 0..n {
        tx.send(job).unwrap();
    }
}

fn main() {
    let session = Session::builder()
        .analyses(&[Analysis::CallTree, Analysis::Waits])
        .start()
        .expect("start a session");
    let (tx, rx) = mpsc::sync_channel(4);
    let jobs = Arc::new(Mutex::new(rx));
    let cache = Arc::new(Mutex::new(HashMap::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (jobs, cache) = (jobs.clone(), cache.clone());
            std::thread::spawn(move || worker(&jobs, &cache))
        })
        .collect();
    produce(tx, 400);
    let sum = workers
        .into_iter()
        .fold(0u64, |a, w| a.wrapping_add(w.join().unwrap()));
    println!("checksum {sum:x}");
    print!("{}", session.finish().text(6));
}
