//! Locks and channels that say where the time waits: [`Mutex`] and [`RwLock`] with
//! parking_lot's API; [`mpsc`], `std::sync::mpsc`'s channels; `crossbeam`, crossbeam-channel's
//! (feature `crossbeam`); and `tokio_mpsc`, `tokio::sync::mpsc`'s (feature `tokio`). Each
//! records its waits into the running session for the [`Waits`](crate::Analysis::Waits)
//! analysis.
//!
//! ```no_run
//! use cabprof::sync::Mutex;
//!
//! let session = cabprof::Session::builder()
//!     .analyses(&[cabprof::Analysis::CallTree, cabprof::Analysis::Waits])
//!     .start()
//!     .unwrap();
//! let counter = Mutex::new(0u64); // its creation site is this line
//! *counter.lock() += 1;
//! println!("{}", session.finish().text(10));
//! ```
//!
//! What is recorded, while a session records (nothing otherwise):
//! - **A lock wait** (Go's *block* profile): an acquisition whose first try failed, from the
//!   attempt to the grant, charged to the waiter's calling context and the lock's creation
//!   site (the line that called `new`, by `#[track_caller]`).
//! - **A contended hold** (Go's *mutex* profile): at a release while threads wait, the time
//!   since the first of them began to wait (or since the previous such release), once per
//!   waiter, charged to the releasing holder's calling context and the creation site.
//! - **A blocked send or receive** ([`mpsc`], `crossbeam`, `tokio_mpsc`): a `send` on a full
//!   bounded channel, or a `recv` on an empty channel, from the attempt to its end, charged to
//!   the waiter's context and the channel's creation site. Capacity and back-pressure are the
//!   wrapped channel's: the wrapper tries the operation, and only if it would block does it
//!   block on the same operation, timed. Tokio's are asynchronous: the send's or receive's own
//!   future is polled, and a `Pending` poll on a full (empty) channel begins the wait, written
//!   when the future ends, in the context of the task's poll (an `#[profile] async fn` that
//!   awaits it).
//! - **A message's latency** ([`mpsc`], `crossbeam`, `tokio_mpsc`): how long it took through
//!   the channel, from the call that sent it to the receive that took it out (`recv`,
//!   `try_recv`, the timed receives, `recv_many`, `poll_recv` and the iterators alike), per
//!   creation site, not per context: it is no thread's wait. A send that waited for room counts
//!   that wait in its message's latency too (the message was on its way; the wait is also a
//!   blocked send): the wrapped channels do not say when a blocked send's message got in. Each message travels with its send time beside it (a
//!   `u64` more per slot, padded to the message's alignment; no other state), so capacity, order and back-pressure are the
//!   wrapped channel's, and an error that gives the message back gives it alone. Only messages
//!   sent while a session records with the waits analysis carry a send time; the others (sent
//!   before it started, or in an earlier session) are not counted. The report lists, per channel site, the messages, the
//!   mean, p50 and p99 (as bounds of the decade buckets) and the longest; `/metrics` has it as
//!   `cabprof_channel_latency_seconds`.
//!
//! Costs: with no session recording, an acquisition is parking_lot's after one load and one
//! branch (is a session recording?); while one records, it is `try_lock` first, and when that
//! succeeds (uncontended) nothing else happens. A release adds one load and one branch (are
//! threads waiting?). Only a contended acquisition reads the clock. A channel send adds one
//! load and one branch (are messages stamped?), and a receive one branch on the stamp; while a
//! session records with the waits analysis, a send reads the cheap counter (`rdtsc` on
//! x86-64, unfenced) and a receive reads it again and writes two words into the ring. Without
//! cabprof's `enabled` feature the names here are parking_lot's, the standard library's,
//! crossbeam-channel's and tokio's own types (re-exports), so code that uses them builds either
//! way.
//!
//! What they do not see: locks and channels not wrapped (a `std::sync::Mutex`, a lock inside a
//! dependency, crossbeam's `select!`, tokio's `reserve`), spin loops and `try_lock` retries the program writes itself, time spent
//! runnable but not scheduled after the grant, and waits on `Condvar` (parking_lot's
//! `Condvar` takes parking_lot's guards: use `parking_lot::Mutex` with it). A hold's delay
//! counts the waiters present at the release; a thread that begins to wait in the instant
//! before a release is in the block profile but may be missed by that hold.

#[cfg(feature = "enabled")]
mod contention;
#[cfg(all(feature = "enabled", feature = "crossbeam"))]
pub mod crossbeam;
#[cfg(feature = "enabled")]
pub(crate) mod latency;
#[cfg(feature = "enabled")]
mod lock;
#[cfg(feature = "enabled")]
pub mod mpsc;
#[cfg(feature = "enabled")]
mod rwlock;
#[cfg(feature = "enabled")]
pub(crate) mod sites;
#[cfg(all(feature = "enabled", feature = "tokio"))]
pub mod tokio_mpsc;

#[cfg(feature = "enabled")]
pub use lock::{Mutex, MutexGuard};
#[cfg(feature = "enabled")]
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(not(feature = "enabled"))]
pub use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
/// Compiled out: the standard library's channels themselves.
#[cfg(not(feature = "enabled"))]
pub mod mpsc {
    pub use std::sync::mpsc::{
        channel, sync_channel, IntoIter, Iter, Receiver, RecvError, RecvTimeoutError, SendError,
        Sender, SyncSender, TryIter, TryRecvError, TrySendError,
    };
}
/// Compiled out: crossbeam-channel's own items.
#[cfg(all(not(feature = "enabled"), feature = "crossbeam"))]
pub mod crossbeam {
    pub use crossbeam_channel::{
        bounded, unbounded, IntoIter, Iter, Receiver, RecvError, RecvTimeoutError, SendError,
        SendTimeoutError, Sender, TryIter, TryRecvError, TrySendError,
    };
}
/// Compiled out: `tokio::sync::mpsc`'s own items.
#[cfg(all(not(feature = "enabled"), feature = "tokio"))]
pub mod tokio_mpsc {
    pub use tokio::sync::mpsc::{
        channel, error, unbounded_channel, Receiver, Sender, UnboundedReceiver, UnboundedSender,
    };
}
