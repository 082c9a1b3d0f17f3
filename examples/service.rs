//! Profiling a long-running service: a line-protocol key-value server on 127.0.0.1 with a
//! worker pool, profiled in sampling mode (the workers never block on the profiler), writing a
//! snapshot report every few seconds and a complete final report on Ctrl-C or SIGTERM.
//!
//! Built with cabprof's `serve` feature, it also serves live profiles over HTTP when
//! `CABPROF_SERVE` names an address (the session reads `CABPROF_*` variables):
//!
//! ```text
//! CABPROF=1 CABPROF_SERVE=127.0.0.1:6060 cargo run --release --features serve --example service -- --requests 100000000
//! go tool pprof -top http://127.0.0.1:6060/debug/pprof/profile?seconds=10
//! curl -s http://127.0.0.1:6060/metrics
//! ```
//!
//! and `http://127.0.0.1:6060/` in a browser: the flame graph and the top functions, reloading.
//!
//! Protocol, one request per line: `SET key value` → `OK`, `GET key` → the value or `NIL`,
//! `DEL key` → `1`/`0`, `STATS` → the number of keys.
//!
//! ```text
//! cargo run --release --example service                    # serve until Ctrl-C
//! cargo run --release --example service -- --requests 200000   # plus a built-in load generator
//! cargo run --release --example service -- --requests 200000 --plain   # handlers without #[profile]
//! ```
//!
//! Options: `--port P` (default 0: any free port, printed), `--workers N` (4),
//! `--requests N` (built-in client: N requests over 4 connections, then it reports
//! `load done` and the throughput), `--snapshot-every SECS` (2), `--out DIR`
//! (`target/cabprof/service`), `--rate R` (sampling rate, 0.05), `--plain` (serve with the
//! uninstrumented copy of the handlers and no session: the baseline for the overhead figure),
//! `--exit-after-load` (finish and exit once the load is done instead of waiting for Ctrl-C),
//! `--compare ROUNDS` (measure what sampling costs this server, see below).
//!
//! `--compare ROUNDS --requests N` runs this program again, `ROUNDS` times each as the plain
//! server (`plain A`), profiled in sampling mode, and plain again (`plain B`: an A/A control, two
//! runs of the same binary), the three one at a time in an order rotated each round (A, S, B;
//! S, B, A; B, A, S; ...), each with the built-in load of N requests and `--exit-after-load`.
//! It prints every run's throughput, then the median over the rounds of the sampling run's
//! throughput over the mean of the round's two plain ones, and of `plain B` over `plain A`, each
//! with a 95 % bootstrap interval:
//!
//! ```text
//! cargo run --release --example service -- --compare 17 --requests 20000000
//! ```

use cabprof::{Analysis, Session};
use clap::Parser;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

type Store = Arc<RwLock<HashMap<String, String>>>;

/// The request handlers, written once and compiled twice: `profiled` with `#[profile]` on
/// every function, `plain` without (the baseline).
macro_rules! handlers {
    ($($attr:meta)?) => {
        use super::Store;
        use std::io::{BufRead, Write};

        $(#[$attr])?
        pub(crate) fn serve_connection(stream: std::net::TcpStream, store: &Store) -> std::io::Result<u64> {
            let mut reader = std::io::BufReader::new(stream.try_clone()?);
            let mut writer = std::io::BufWriter::new(stream);
            let mut line = String::new();
            let mut served = 0;
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 {
                    writer.flush()?;
                    return Ok(served);
                }
                let reply = handle_request(line.trim_end(), store);
                writer.write_all(reply.as_bytes())?;
                writer.write_all(b"\n")?;
                served += 1;
                if reader.buffer().is_empty() {
                    writer.flush()?;
                }
            }
        }

        $(#[$attr])?
        pub(crate) fn handle_request(line: &str, store: &Store) -> String {
            let mut parts = line.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("SET"), Some(k), Some(v)) => set(store, k, v),
                (Some("GET"), Some(k), None) => get(store, k),
                (Some("DEL"), Some(k), None) => del(store, k),
                (Some("STATS"), None, None) => stats(store),
                _ => "ERR unknown command".to_string(),
            }
        }

        $(#[$attr])?
        fn set(store: &Store, k: &str, v: &str) -> String {
            store.write().unwrap().insert(k.to_string(), v.to_string());
            "OK".to_string()
        }

        $(#[$attr])?
        fn get(store: &Store, k: &str) -> String {
            store.read().unwrap().get(k).cloned().unwrap_or_else(|| "NIL".to_string())
        }

        $(#[$attr])?
        fn del(store: &Store, k: &str) -> String {
            if store.write().unwrap().remove(k).is_some() { "1" } else { "0" }.to_string()
        }

        $(#[$attr])?
        fn stats(store: &Store) -> String {
            store.read().unwrap().len().to_string()
        }
    };
}

mod profiled {
    handlers!(cabprof::profile);
}

mod plain {
    handlers!();
}

/// A profiled key-value server (see the module docs).
#[derive(Parser, Debug)]
#[command(name = "service")]
struct Options {
    /// Port on 127.0.0.1 (0: any free port, printed).
    #[arg(long, value_name = "P", default_value_t = 0)]
    port: u16,
    /// Worker threads (at least 1; 0 is taken as 1).
    #[arg(long, value_name = "N", default_value_t = 4)]
    workers: usize,
    /// Built-in client: N requests over 4 connections, then `load done` and the throughput.
    #[arg(long, value_name = "N", default_value_t = 0)]
    requests: u64,
    /// Seconds between snapshot reports.
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = seconds)]
    snapshot_every: Duration,
    /// Output directory for the reports.
    #[arg(long, value_name = "DIR", default_value = "target/cabprof/service")]
    out: PathBuf,
    /// Sampling rate.
    #[arg(long, value_name = "R", default_value_t = 0.05)]
    rate: f64,
    /// Serve with the uninstrumented copy of the handlers and no session (the baseline).
    #[arg(long)]
    plain: bool,
    /// Finish and exit once the load is done instead of waiting for Ctrl-C.
    #[arg(long)]
    exit_after_load: bool,
    /// Compare sampling with plain over ROUNDS rounds (with `--requests`; see the module docs).
    #[arg(long, value_name = "ROUNDS", conflicts_with = "plain")]
    compare: Option<usize>,
}

/// A duration in seconds (fractions allowed).
fn seconds(v: &str) -> Result<Duration, String> {
    let secs: f64 = v
        .parse()
        .map_err(|_| format!("{v:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

fn options() -> Options {
    let mut o = Options::parse();
    o.workers = o.workers.max(1);
    o
}

/// Connections waiting for a worker.
struct Queue {
    jobs: Mutex<VecDeque<TcpStream>>,
    ready: Condvar,
}

/// The built-in load generator: `requests` requests over 4 connections, pipelined in batches.
fn load(port: u16, requests: u64) -> (u64, Duration) {
    let start = Instant::now();
    let per = requests / 4;
    let clients: Vec<_> = (0..4u64)
        .map(|c| {
            std::thread::spawn(move || {
                let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = std::io::BufWriter::new(stream);
                let mut line = String::new();
                let mut done = 0u64;
                while done < per {
                    let batch = (per - done).min(64);
                    for k in 0..batch {
                        let n = done + k;
                        let key = (c * 7919 + n * 31) % 5000;
                        match n % 10 {
                            0..=2 => writeln!(writer, "SET key{key} value{n}"),
                            3..=8 => writeln!(writer, "GET key{key}"),
                            _ => writeln!(writer, "DEL key{key}"),
                        }
                        .unwrap();
                    }
                    writer.flush().unwrap();
                    for _ in 0..batch {
                        line.clear();
                        reader.read_line(&mut line).unwrap();
                    }
                    done += batch;
                }
                done
            })
        })
        .collect();
    let total = clients.into_iter().map(|c| c.join().unwrap()).sum();
    (total, start.elapsed())
}

/// One run of this program as a server under its own load (`plain` or sampling at `rate`):
/// its throughput in requests/s.
fn one_run(o: &Options, plain: bool) -> f64 {
    // Write back what earlier runs left dirty now, not during this run (best effort).
    let _ = std::process::Command::new("sync").status();
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("own path"));
    cmd.args(["--requests", &o.requests.to_string(), "--exit-after-load"])
        .args(["--workers", &o.workers.to_string()])
        .args([
            "--snapshot-every",
            &o.snapshot_every.as_secs_f64().to_string(),
        ])
        .arg("--out")
        .arg(o.out.join("compare"));
    if plain {
        cmd.arg("--plain");
    } else {
        cmd.args(["--rate", &o.rate.to_string()]);
    }
    let out = cmd.output().expect("run the server");
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        eprintln!(
            "service: a --compare run failed ({})\n{text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::process::exit(1);
    }
    text.lines()
        .find_map(|l| {
            l.strip_prefix("load done: ")?
                .split(" = ")
                .nth(1)?
                .split(' ')
                .next()
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            eprintln!(
                "service: a run printed no throughput\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::process::exit(1)
        })
}

/// `--compare ROUNDS`: see the module docs.
fn compare(o: &Options, rounds: usize) {
    use cabprof_bench_support::stats::{median_interval, MIN_ROUNDS, RESAMPLES, SEED};
    if rounds < MIN_ROUNDS {
        eprintln!("service: --compare must be at least {MIN_ROUNDS} rounds (got {rounds})");
        std::process::exit(2);
    }
    // The load sends `requests / 4` over each of its 4 connections.
    if o.requests < 4 {
        eprintln!(
            "service: --compare needs --requests N with N >= 4 (got {})",
            o.requests
        );
        std::process::exit(2);
    }
    let names = ["plain A", "sampling", "plain B"];
    let (mut sampling, mut control) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let mut got = [0.0; 3];
        for k in 0..3 {
            let which = (r + k) % 3;
            got[which] = one_run(o, which != 1);
            println!(
                "round {} {}: {:.0} requests/s",
                r + 1,
                names[which],
                got[which]
            );
        }
        sampling.push(2.0 * got[1] / (got[0] + got[2]));
        control.push(got[2] / got[0]);
    }
    for (what, v) in [
        ("sampling over plain", &sampling),
        ("plain B over plain A (A/A control)", &control),
    ] {
        let ci = median_interval(v, 0.95, RESAMPLES, SEED);
        println!(
            "{what}: median {:.3}, 95 % interval [{:.3}, {:.3}] over {rounds} rounds",
            ci.median, ci.lo, ci.hi
        );
    }
}

/// The service's whole life in order, as a reader follows it: options, session and endpoint,
/// the clients, the load, the checks of what the endpoint served, the report.
fn main() {
    let o = options();
    if let Some(rounds) = o.compare {
        compare(&o, rounds);
        return;
    }
    std::fs::create_dir_all(&o.out).expect("create the output directory");
    let session = (!o.plain).then(|| {
        let s = Session::builder()
            .sampling(o.rate)
            .analyses(&[Analysis::MethodCount, Analysis::CallGraph, Analysis::CallTree])
            .output(o.out.join("final.json"))
            .from_env()
            .unwrap_or_else(|e| {
                eprintln!("service: {e}");
                std::process::exit(2)
            })
            .start()
            .expect("start profiling");
        let out = o.out.clone();
        s.on_ctrlc(move |r| {
            let t = &r.data.totals;
            println!(
                "final report: events={} analyzed={} threads={} lapped_chunks={} rate_used={} written to {}",
                t.events,
                t.analyzed,
                r.data.threads.len(),
                t.chunks_lapped,
                r.data.session.rate_used,
                out.join("final.json").display()
            );
            let _ = std::io::stdout().flush();
        })
        .expect("install the Ctrl-C handler");
        #[cfg(feature = "serve")]
        if let Some(addr) = s.serve_addr() {
            println!("live profiles on http://{addr}/");
        }
        s
    });
    let listener = TcpListener::bind(("127.0.0.1", o.port)).expect("bind 127.0.0.1");
    let port = listener.local_addr().unwrap().port();
    println!(
        "listening on 127.0.0.1:{port} with {} workers ({})",
        o.workers,
        if o.plain {
            "plain"
        } else {
            "profiled, sampling"
        }
    );
    let _ = std::io::stdout().flush();

    let store: Store = Arc::new(RwLock::new(HashMap::new()));
    let queue = Arc::new(Queue {
        jobs: Mutex::new(VecDeque::new()),
        ready: Condvar::new(),
    });
    for w in 0..o.workers {
        let (queue, store, plain) = (queue.clone(), store.clone(), o.plain);
        std::thread::Builder::new()
            .name(format!("worker-{w}"))
            .spawn(move || loop {
                let stream = {
                    let mut jobs = queue.jobs.lock().unwrap();
                    loop {
                        if let Some(s) = jobs.pop_front() {
                            break s;
                        }
                        jobs = queue.ready.wait(jobs).unwrap();
                    }
                };
                let _ = if plain {
                    plain::serve_connection(stream, &store)
                } else {
                    profiled::serve_connection(stream, &store)
                };
                // Idle now: hand this thread's buffered events to the analyzer.
                cabprof::flush_thread();
            })
            .expect("spawn worker");
    }
    {
        let queue = queue.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                queue.jobs.lock().unwrap().push_back(stream);
                queue.ready.notify_one();
            }
        });
    }
    if let Some(s) = &session {
        let (every, path) = (o.snapshot_every, o.out.join("snapshot.json"));
        let snapshots = s.snapshotter();
        std::thread::spawn(move || loop {
            std::thread::sleep(every);
            match snapshots.snapshot() {
                Some(r) => {
                    let _ = std::fs::write(&path, r.json());
                }
                None => return, // finished
            }
        });
    }
    if o.requests > 0 {
        let (n, took) = load(port, o.requests);
        println!(
            "load done: {n} requests in {:.3} s = {:.0} requests/s",
            took.as_secs_f64(),
            n as f64 / took.as_secs_f64()
        );
        let _ = std::io::stdout().flush();
    }
    if o.exit_after_load {
        if let Some(s) = session {
            let r = s.finish_and_write().expect("write the final report");
            println!(
                "final report: events={} written to {}",
                r.data.totals.events,
                o.out.join("final.json").display()
            );
        }
        return;
    }
    loop {
        std::thread::park();
    }
}
