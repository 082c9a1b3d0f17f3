//! Profiling a long-running service: a line-protocol key-value server on 127.0.0.1 with a
//! worker pool, profiled in sampling mode (the workers never block on the profiler), writing a
//! snapshot report every few seconds and a complete final report on Ctrl-C.
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
//! `--exit-after-load` (finish and exit once the load is done instead of waiting for Ctrl-C).

use cabprof::{Analysis, Session};
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
        pub fn serve_connection(stream: std::net::TcpStream, store: &Store) -> std::io::Result<u64> {
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
        pub fn handle_request(line: &str, store: &Store) -> String {
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

struct Options {
    port: u16,
    workers: usize,
    requests: u64,
    snapshot_every: Duration,
    out: PathBuf,
    rate: f64,
    plain: bool,
    exit_after_load: bool,
}

fn options() -> Options {
    let mut o = Options {
        port: 0,
        workers: 4,
        requests: 0,
        snapshot_every: Duration::from_secs(2),
        out: PathBuf::from("target/cabprof/service"),
        rate: 0.05,
        plain: false,
        exit_after_load: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let value = |i: &mut usize, name: &str| -> String {
        *i += 1;
        args.get(*i).cloned().unwrap_or_else(|| {
            eprintln!("service: {name} needs a value");
            std::process::exit(2)
        })
    };
    fn num<T: std::str::FromStr>(name: &str, v: &str) -> T {
        v.parse().unwrap_or_else(|_| {
            eprintln!("service: bad value {v:?} for {name}");
            std::process::exit(2)
        })
    }
    while i < args.len() {
        match args[i].as_str() {
            "--port" => o.port = num("--port", &value(&mut i, "--port")),
            "--workers" => {
                o.workers = num::<usize>("--workers", &value(&mut i, "--workers")).max(1)
            }
            "--requests" => o.requests = num("--requests", &value(&mut i, "--requests")),
            "--snapshot-every" => {
                o.snapshot_every = Duration::from_secs_f64(num(
                    "--snapshot-every",
                    &value(&mut i, "--snapshot-every"),
                ))
            }
            "--out" => o.out = PathBuf::from(value(&mut i, "--out")),
            "--rate" => o.rate = num("--rate", &value(&mut i, "--rate")),
            "--plain" => o.plain = true,
            "--exit-after-load" => o.exit_after_load = true,
            other => {
                eprintln!("service: unknown option {other} (see the example's doc comment)");
                std::process::exit(2)
            }
        }
        i += 1;
    }
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

fn main() {
    let o = options();
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
                cabprof::cab::runtime::flush_current_thread();
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
