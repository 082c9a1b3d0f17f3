//! Workload 7, multi-threaded: a worker pool.
//!
//! The calling thread submits jobs to a `Mutex<VecDeque<Job>>` + `Condvar` queue served by
//! [`WORKERS`] named threads (`pool-worker-N`); each job generates a buffer from its seed,
//! heap-sorts it, classifies it into a histogram and digests it; results come back over an
//! `mpsc` channel and are combined order-independently, so the checksum does not depend on
//! scheduling. With a session running, every worker (and the submitting thread) writes into
//! its own ring.
//!
//! Instrumentation: `worker`, `take`, `process`, `fill`, `heap_sort`, `sift_down`, `digest`
//! and `submit` are `#[profile]`; the classifier `histogram` is `#[profile(paths)]`.

use crate::rng::Rng;
use crate::Size;

/// Worker threads.
pub const WORKERS: usize = 3;

/// One unit of work.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    /// Position in the job list.
    pub id: u32,
    /// Seed of the job's input data.
    pub seed: u64,
    /// Length of the job's input, in elements.
    pub len: usize,
}

/// The jobs for `size`, from a fixed seed.
pub fn jobs(size: Size) -> Vec<Job> {
    let n = size.pick(12, 250, 2_000);
    let mut rng = Rng::new(0x9001_F00D);
    (0..n)
        .map(|id| Job {
            id,
            seed: rng.next_u64(),
            len: rng.range(256, 4096) as usize,
        })
        .collect()
}

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use super::{Job, WORKERS};
        use crate::rng::{mix, Rng};
        use crate::Size;
        use std::collections::VecDeque;
        use std::sync::mpsc::{channel, Sender};
        use std::sync::{Condvar, Mutex};

        struct Queue {
            /// Pending jobs, and whether the submitter is done.
            state: Mutex<(VecDeque<Job>, bool)>,
            ready: Condvar,
        }

        /// The next job, waiting for one; `None` once the queue is closed and empty.
        $(#[$call])?
        fn take(q: &Queue) -> Option<Job> {
            let mut st = q.state.lock().expect("queue lock");
            loop {
                if let Some(j) = st.0.pop_front() {
                    return Some(j);
                }
                if st.1 {
                    return None;
                }
                st = q.ready.wait(st).expect("queue lock");
            }
        }

        $(#[$call])?
        fn submit(q: &Queue, jobs: &[Job]) {
            for batch in jobs.chunks(16) {
                q.state.lock().expect("queue lock").0.extend(batch.iter().copied());
                q.ready.notify_all();
            }
            q.state.lock().expect("queue lock").1 = true;
            q.ready.notify_all();
        }

        $(#[$call])?
        fn fill(job: &Job) -> Vec<u32> {
            let mut rng = Rng::new(job.seed);
            (0..job.len).map(|_| rng.next_u64() as u32).collect()
        }

        $(#[$call])?
        fn sift_down(v: &mut [u32], mut root: usize, end: usize) {
            loop {
                let mut child = 2 * root + 1;
                if child >= end {
                    return;
                }
                if child + 1 < end && v[child] < v[child + 1] {
                    child += 1;
                }
                if v[root] >= v[child] {
                    return;
                }
                v.swap(root, child);
                root = child;
            }
        }

        $(#[$call])?
        fn heap_sort(v: &mut [u32]) {
            let n = v.len();
            for i in (0..n / 2).rev() {
                sift_down(v, i, n);
            }
            for end in (1..n).rev() {
                v.swap(0, end);
                sift_down(v, 0, end);
            }
        }

        /// Classify every value: by magnitude band, then by parity and low bits.
        $(#[$paths])?
        fn histogram(v: &[u32]) -> [u32; 16] {
            let mut h = [0u32; 16];
            for &x in v {
                let band = if x < 1 << 24 {
                    0
                } else if x < 1 << 28 {
                    1
                } else if x < 1 << 31 {
                    2
                } else {
                    3
                };
                let class = if x % 2 == 0 {
                    if x & 6 == 0 { 0 } else { 1 }
                } else if x & 0x100 != 0 {
                    2
                } else {
                    3
                };
                h[band * 4 + class] += 1;
            }
            h
        }

        $(#[$call])?
        fn digest(v: &[u32], hist: &[u32; 16]) -> u64 {
            let mut acc = 0xCBF2_9CE4_8422_2325u64;
            for &x in v.iter().step_by(3) {
                acc = (acc ^ x as u64).wrapping_mul(0x100_0000_01B3);
            }
            for &c in hist {
                acc = mix(acc, c as u64);
            }
            acc
        }

        $(#[$call])?
        fn process(job: &Job) -> u64 {
            let mut buf = fill(job);
            heap_sort(&mut buf);
            debug_assert!(buf.windows(2).all(|w| w[0] <= w[1]));
            let hist = histogram(&buf);
            digest(&buf, &hist)
        }

        $(#[$call])?
        fn worker(q: &Queue, results: Sender<(u32, u64)>) {
            while let Some(job) = take(q) {
                let d = process(&job);
                results.send((job.id, d)).expect("collector alive");
            }
        }

        /// Run the jobs for `size` on the pool; the order-independent checksum of the results.
        pub fn run(size: Size) -> u64 {
            let jobs = super::jobs(std::hint::black_box(size));
            let q = Queue { state: Mutex::new((VecDeque::new(), false)), ready: Condvar::new() };
            let (tx, rx) = channel();
            let mut sum = 0u64;
            let mut seen = 0usize;
            std::thread::scope(|s| {
                for w in 0..WORKERS {
                    let tx = tx.clone();
                    let q = &q;
                    std::thread::Builder::new()
                        .name(format!("pool-worker-{w}"))
                        .spawn_scoped(s, move || worker(q, tx))
                        .expect("spawn worker");
                }
                drop(tx);
                submit(&q, &jobs);
                for (id, d) in rx {
                    sum = sum.wrapping_add(mix(id as u64, d));
                    seen += 1;
                }
            });
            assert_eq!(seen, jobs.len(), "lost jobs");
            mix(sum, seen as u64)
        }
    };
}

twins!(code);
