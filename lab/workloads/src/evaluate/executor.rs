//! Where runs happen: long-lived executor threads, one pinned to core 0 and one free, so that
//! every run of a workload starts on the same core; and the host facts the summary prints.

use super::probes::Probe;
use cabprof::RunMode;
use cabprof_cab::runtime;
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

/// A long-lived thread that runs closures one at a time.
pub(crate) struct Executor {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Executor {
    pub(crate) fn new(name: &str, pin: bool) -> Executor {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                if pin {
                    pin_current_thread_to_core0();
                }
                for job in rx {
                    job();
                }
            })
            .expect("spawn an executor thread");
        Executor {
            tx: Some(tx),
            handle: Some(handle),
        }
    }

    pub(crate) fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (rtx, rrx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = rtx.send(r);
        });
        self.tx
            .as_ref()
            .expect("executor running")
            .send(job)
            .expect("executor alive");
        match rrx.recv().expect("executor answered") {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Pin the calling thread to core 0 for good, through the runtime's `pin_application` (an
/// instrument-only session: no analyzer, no ring).
fn pin_current_thread_to_core0() {
    let config = runtime::RuntimeConfig {
        mode: RunMode::InstrumentOnly,
        pin_application: true,
        ..Default::default()
    };
    let s = runtime::Session::start(config, Probe::default).expect("start the pinning session");
    drop(s.finish());
}

/// The CPUs the calling thread may run on (`Cpus_allowed_list` of /proc), or `?`.
pub fn cpus_allowed() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .map(|l| l["Cpus_allowed_list:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// The first three fields of /proc/loadavg.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
