//! Heap allocations per function: `cabprof::alloc::Tracked` as the global allocator, the
//! `allocations` analysis, a small word-count pipeline whose stages allocate differently
//! (strings per token, a growing map, a sorted vector), and a worker thread that frees what
//! the main thread made.
//!
//! `cargo run --release --example allocations`

use cabprof::{profile, Analysis, Session};
use std::collections::HashMap;

#[global_allocator]
static ALLOC: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();

/// One owned `String` per word.
#[profile]
fn tokenize(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// The map grows by rehashing; each new word's string is moved in.
#[profile]
fn count(words: Vec<String>) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for w in words {
        *m.entry(w).or_insert(0) += 1;
    }
    m
}

/// A vector of the entries, sorted.
#[profile]
fn top(m: &HashMap<String, u64>, n: usize) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = m.iter().map(|(k, c)| (k.clone(), *c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

#[profile]
fn pipeline(text: &str) -> Vec<(String, u64)> {
    let words = tokenize(text);
    let counts = count(words);
    top(&counts, 5)
}

/// Frees, on this thread, maps made on another.
#[profile]
fn dispose(maps: std::sync::mpsc::Receiver<HashMap<String, u64>>) -> usize {
    maps.into_iter().map(|m| m.len()).sum()
}

fn main() {
    let text =
        "the quick brown fox jumps over the lazy dog; the dog sleeps, the fox runs. ".repeat(2000);
    let session = Session::builder()
        .analyses(&[Analysis::Allocations, Analysis::MethodCount])
        .start()
        .expect("start profiling");
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || dispose(rx));
    let mut best = Vec::new();
    for _ in 0..10 {
        best = pipeline(&text);
        tx.send(count(tokenize("freed elsewhere freed"))).unwrap();
    }
    drop(tx);
    let freed = worker.join().unwrap();
    let report = session.finish();
    println!("top words: {best:?}; {freed} entries freed on the worker");
    print!("{}", report.text(8));
}
