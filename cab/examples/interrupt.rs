//! A long-running "service" that ends on Ctrl-C with a full report (used by the Ctrl-C test).
//!
//! Two threads emit a known number of events each, then the process idles until SIGINT. The
//! report printed by the handler must count every event, including those still sitting in a
//! partly filled chunk of a thread that is still alive.
//!
//! `cargo run -p cabprof-cab --example interrupt -- 123457` then press Ctrl-C.

use cabprof_cab::event::Event;
use cabprof_cab::runtime::{emit, EventAnalysis, RuntimeConfig, Session};
use clap::Parser;

#[derive(Default)]
struct Count {
    n: u64,
    sum: u64,
}

impl EventAnalysis for Count {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            if let Some(cabprof_cab::EventKind::Marker { value }) = cabprof_cab::event::decode(w) {
                self.n += 1;
                self.sum += value;
            }
        }
    }
    fn merge(&mut self, o: Self) {
        self.n += o.n;
        self.sum += o.sum;
    }
}

/// Emit events from worker threads until Ctrl-C, then print the final report.
#[derive(Parser, Debug)]
struct Args {
    /// Events each of the two threads emits.
    #[arg(value_name = "EVENTS_PER_THREAD", default_value_t = 1_000_000)]
    events_per_thread: u64,
}

fn main() {
    let per = Args::parse().events_per_thread;
    let mut config = RuntimeConfig::default();
    if let Err(e) = config.from_env() {
        eprintln!("{e}");
        std::process::exit(2)
    }
    let session = Session::start(config, Count::default).expect("start session");
    session
        .on_ctrlc(|r| {
            println!(
                "report: events={} sum={} threads={} dropped={} blocks={}",
                r.analysis.n,
                r.analysis.sum,
                r.threads.len(),
                r.totals.dropped,
                r.totals.blocks
            );
        })
        .expect("install Ctrl-C handler");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let _worker = std::thread::spawn(move || {
        for v in 1..=per {
            emit(Event::marker(v).unwrap());
        }
        done_tx.send(()).unwrap();
        // Stay alive, ring unflushed, until the process is interrupted.
        loop {
            std::thread::park();
        }
    });
    for v in 1..=per {
        emit(Event::marker(v).unwrap());
    }
    // "ready" only once both threads have emitted everything: the test interrupts right after.
    done_rx.recv().unwrap();
    println!("ready: emitted {} events", 2 * per);
    loop {
        std::thread::park();
    }
}
