//! `tokio::sync::mpsc`'s channels (feature `tokio`), with blocked sends and receives recorded
//! (see the module docs of [`sync`](super)). Each endpoint holds tokio's own, and every
//! operation is tokio's own future, polled as it is: the capacity, the back-pressure, the
//! order of messages, the fairness among waiting senders, the errors and the cooperative
//! budget are the wrapped channel's. (A `try_send` before the `send` would skip the budget
//! tokio charges each `send` and `recv`, so that a task whose channel never fills would never
//! yield to the others on its thread.)
//!
//! A `send(..).await` whose poll returns `Pending` while the channel is full (no room: not a
//! yield because the task's budget ran out) is a blocked send, timed from that poll until the
//! send completes; a `recv().await` (or `recv_many`) whose poll returns `Pending` while the
//! channel is empty is a blocked receive. The wait is written when the operation's future ends
//! (it completes, or is dropped unfinished: a timeout, a `select!` branch not taken), so on the
//! thread that polls it last and in the calling context of that poll: inside an
//! `#[cabprof::profile] async fn` that awaits it, that function's context, whichever thread
//! runs the task. [`Receiver::poll_recv`] records the same way from the `Pending` to the
//! `Ready`. The blocking `blocking_send` and `blocking_recv` are timed when the channel is full
//! (empty) as they begin. An unbounded channel's `send` never blocks and is never recorded.
//!
//! Each message sits in the channel with its send time beside it (a `u64`, padded to the message's alignment), and every receive
//! writes how long it took since its send (a wait for room included) for the channel's site;
//! an error that gives the message back gives it alone.
//!
//! Not wrapped: `reserve` and its permits, `send_timeout`, and the weak senders (use
//! `tokio::sync::mpsc` for them). Compiled out (without cabprof's `enabled` feature), this
//! module is `tokio::sync::mpsc`'s own items of the same names.

use super::contention::{blocked, emit_wait, now_ns};
use super::latency::{ChannelSite, Stamped};
use super::sites::{self, Site};
use cabprof_cab::event::WaitKind;
use cabprof_cab::runtime::recording;
use std::fmt;
use std::future::{poll_fn, Future};
use std::panic::Location;
use std::pin::pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc as tk;

pub use tokio::sync::mpsc::error;
use tokio::sync::mpsc::error::{SendError, TryRecvError, TrySendError};

/// The message of an error that gives it back, without its send time.
fn bare<T>(e: TrySendError<Stamped<T>>) -> TrySendError<T> {
    match e {
        TrySendError::Full(s) => TrySendError::Full(s.msg),
        TrySendError::Closed(s) => TrySendError::Closed(s.msg),
    }
}

/// The same for a send.
fn bare_send<T>(SendError(s): SendError<Stamped<T>>) -> SendError<T> {
    SendError(s.msg)
}

/// The messages one `recv_many` takes, with their send times, before they go to the caller's
/// buffer bare: kept in the receiver, so that a call allocates nothing once it has grown (the
/// caller's buffer grows as much).
struct Batch<T>(Vec<Stamped<T>>);

/// The most messages' room a [`Batch`] keeps between calls: a larger one is freed after use.
const BATCH_KEPT: usize = 256;

// SAFETY: a `Batch` is reached only through `&mut` of its receiver (`recv_many`), never through
// a shared one, so sharing the receiver between threads shares no `T`: the receiver is `Sync`
// whenever `T: Send`, as tokio's own.
unsafe impl<T: Send> Sync for Batch<T> {}

/// The sending half of a bounded [`channel`]: a `send` that finds the channel full is recorded
/// as a blocked send.
pub struct Sender<T> {
    inner: tk::Sender<Stamped<T>>,
    site: Site,
}

/// The receiving half of a bounded [`channel`]: a `recv` that finds it empty is recorded as a
/// blocked receive.
pub struct Receiver<T> {
    inner: tk::Receiver<Stamped<T>>,
    site: ChannelSite,
    /// When a [`poll_recv`](Receiver::poll_recv) found the channel empty (0: it did not).
    since: u64,
    batch: Batch<T>,
}

/// The sending half of an [`unbounded_channel`]: `send` never blocks, so nothing is recorded.
pub struct UnboundedSender<T> {
    inner: tk::UnboundedSender<Stamped<T>>,
}

/// The receiving half of an [`unbounded_channel`]: a `recv` that finds it empty is recorded as
/// a blocked receive.
pub struct UnboundedReceiver<T> {
    inner: tk::UnboundedReceiver<Stamped<T>>,
    site: ChannelSite,
    /// When a [`poll_recv`](UnboundedReceiver::poll_recv) found the channel empty (0: it did
    /// not).
    since: u64,
    batch: Batch<T>,
}

/// A channel of `buffer` messages (`tokio::sync::mpsc::channel`, which panics if `buffer` is
/// 0); the caller's line is its site.
#[track_caller]
pub fn channel<T>(buffer: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = tk::channel(buffer);
    let site = Site {
        kind: "tokio::mpsc::channel",
        location: Location::caller(),
    };
    (
        Sender { inner: tx, site },
        Receiver {
            inner: rx,
            site: ChannelSite::new(site),
            since: 0,
            batch: Batch(Vec::new()),
        },
    )
}

/// A channel of unlimited capacity (`tokio::sync::mpsc::unbounded_channel`); the caller's line
/// is its site.
#[track_caller]
pub fn unbounded_channel<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    let (tx, rx) = tk::unbounded_channel();
    let site = Site {
        kind: "tokio::mpsc::unbounded_channel",
        location: Location::caller(),
    };
    (
        UnboundedSender { inner: tx },
        UnboundedReceiver {
            inner: rx,
            site: ChannelSite::new(site),
            since: 0,
            batch: Batch(Vec::new()),
        },
    )
}

/// One asynchronous operation's wait: begun at a `Pending` poll that found the channel full
/// (empty), written when the operation's future ends, in the context polling it then.
struct AsyncWait {
    kind: WaitKind,
    site: Site,
    /// When the wait began (`now_ns`; 0: no wait).
    since: u64,
}

impl AsyncWait {
    fn new(kind: WaitKind, site: Site) -> AsyncWait {
        AsyncWait {
            kind,
            site,
            since: 0,
        }
    }

    /// After a poll: a `Pending` one begins the wait if `blocked` (the channel is full or
    /// empty: not a yield for the budget) and a session records.
    #[inline(always)]
    fn after<R>(&mut self, p: &Poll<R>, blocked: impl FnOnce() -> bool) {
        if p.is_pending() && self.since == 0 {
            self.begin(blocked);
        }
    }

    #[cold]
    #[inline(never)]
    fn begin(&mut self, blocked: impl FnOnce() -> bool) {
        if recording() && blocked() {
            self.since = now_ns();
        }
    }

    /// Write the wait, if one began.
    #[inline(always)]
    fn end(&mut self) {
        if self.since != 0 {
            write(self.kind, self.site, std::mem::take(&mut self.since));
        }
    }
}

impl Drop for AsyncWait {
    fn drop(&mut self) {
        self.end();
    }
}

/// The wait of `kind` at `site` that began at `since`, charged to this thread's context. Not
/// drawn on the timeline: it spans the awaiting future's polls, which may run on other
/// threads, between other tasks' slices.
#[cold]
#[inline(never)]
fn write(kind: WaitKind, site: Site, since: u64) {
    // The session that saw it begin may have ended: a wait goes to a session that records.
    if !recording() {
        return;
    }
    let ns = now_ns().saturating_sub(since);
    emit_wait(kind, sites::number(site), ns, None);
}

/// [`poll_recv`](Receiver::poll_recv)'s recording around one poll, with the wait's start kept
/// in the receiver (`since`).
#[inline(always)]
fn poll_recorded<R>(
    since: &mut u64,
    site: Site,
    p: Poll<R>,
    empty: impl FnOnce() -> bool,
) -> Poll<R> {
    match &p {
        Poll::Pending if *since == 0 => {
            let mut w = AsyncWait::new(WaitKind::Receive, site);
            w.after(&p, empty);
            *since = std::mem::take(&mut w.since);
        }
        Poll::Ready(_) if *since != 0 => write(WaitKind::Receive, site, std::mem::take(since)),
        _ => {}
    }
    p
}

impl<T> Sender<T> {
    /// Send `value`, waiting for room while the channel is full (recorded); `Err` with it if
    /// the receiver is gone. Tokio's `send`, polled as it is.
    pub async fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut wait = AsyncWait::new(WaitKind::Send, self.site);
        let mut send = pin!(self.inner.send(Stamped::new(value)));
        poll_fn(|cx| {
            let p = send.as_mut().poll(cx);
            wait.after(&p, || self.inner.capacity() == 0);
            p
        })
        .await
        .map_err(bare_send)
    }

    /// Send `value` if there is room now (never waits, never recorded).
    #[inline]
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.inner.try_send(Stamped::new(value)).map_err(bare)
    }

    /// Send `value` from outside the runtime, blocking the thread while the channel is full
    /// (recorded if it was full as the call began); tokio's `blocking_send`, which panics if
    /// called from asynchronous code.
    pub fn blocking_send(&self, value: T) -> Result<(), SendError<T>> {
        let value = Stamped::new(value);
        if self.inner.capacity() == 0 {
            blocked(WaitKind::Send, self.site, || {
                self.inner.blocking_send(value)
            })
        } else {
            self.inner.blocking_send(value)
        }
        .map_err(bare_send)
    }

    /// Completes when the receiver is gone (never recorded).
    pub async fn closed(&self) {
        self.inner.closed().await
    }

    /// The receiver is gone or closed.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The room left in the channel now.
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    /// The channel's bound.
    pub fn max_capacity(&self) -> usize {
        self.inner.max_capacity()
    }

    /// Both send into the same channel.
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        self.inner.same_channel(&other.inner)
    }
}

/// The receiving methods both receivers share, the same over tokio's bounded and unbounded
/// receivers.
macro_rules! receiving {
    ($receiver:ident) => {
        impl<T> $receiver<T> {
            /// The next message, waiting while the channel is empty (recorded); `None` once it is
            /// empty and closed. Tokio's `recv`, polled as it is.
            pub async fn recv(&mut self) -> Option<T> {
                // A wait a `poll_recv` began and did not finish is given up.
                self.since = 0;
                let mut wait = AsyncWait::new(WaitKind::Receive, self.site.site);
                let inner = &mut self.inner;
                let got = poll_fn(|cx| {
                    let p = inner.poll_recv(cx);
                    wait.after(&p, || inner.is_empty());
                    p
                })
                .await;
                got.map(|s| s.open(&self.site))
            }

            /// Up to `limit` messages appended to `buffer`, waiting while the channel is empty
            /// (recorded); 0 once it is empty and closed (or if `limit` is 0).
            pub async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
                self.since = 0;
                let mut wait = AsyncWait::new(WaitKind::Receive, self.site.site);
                let inner = &mut self.inner;
                // Tokio's own batch, into the receiver's (empty between calls), then to
                // `buffer` bare.
                let batch = &mut self.batch.0;
                if !batch.is_empty() {
                    // Left by a call whose `buffer` could not grow (it panicked): theirs first.
                    let n = batch.len();
                    buffer.extend(batch.drain(..).map(|s| s.open(&self.site)));
                    return n;
                }
                let n = poll_fn(|cx| {
                    let p = inner.poll_recv_many(cx, batch, limit);
                    wait.after(&p, || inner.is_empty());
                    p
                })
                .await;
                buffer.reserve(batch.len());
                buffer.extend(batch.drain(..).map(|s| s.open(&self.site)));
                if batch.capacity() > BATCH_KEPT {
                    // A burst's room is not kept for the receiver's life.
                    *batch = Vec::new();
                }
                n
            }

            /// The next message if there is one now (never waits; its latency is recorded).
            #[inline]
            pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
                self.since = 0;
                self.inner.try_recv().map(|s| s.open(&self.site))
            }

            /// The next message from outside the runtime, blocking the thread while the channel is
            /// empty (recorded if it was empty as the call began); tokio's `blocking_recv`, which
            /// panics if called from asynchronous code.
            pub fn blocking_recv(&mut self) -> Option<T> {
                self.since = 0;
                let got = if self.inner.is_empty() {
                    let inner = &mut self.inner;
                    blocked(WaitKind::Receive, self.site.site, || inner.blocking_recv())
                } else {
                    self.inner.blocking_recv()
                };
                got.map(|s| s.open(&self.site))
            }

            /// One poll for the next message: from a `Pending` that found the channel empty to the
            /// `Ready` is a blocked receive, written at the `Ready`.
            pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
                let p = self.inner.poll_recv(cx);
                let inner = &self.inner;
                let p = poll_recorded(&mut self.since, self.site.site, p, || inner.is_empty());
                p.map(|got| got.map(|s| s.open(&self.site)))
            }

            /// Close the channel: no more sends; the messages in it can still be received.
            pub fn close(&mut self) {
                self.inner.close()
            }

            /// The channel is closed (by [`close`](Self::close) or every sender gone).
            pub fn is_closed(&self) -> bool {
                self.inner.is_closed()
            }

            /// No message is in the channel.
            pub fn is_empty(&self) -> bool {
                self.inner.is_empty()
            }

            /// The messages in the channel.
            pub fn len(&self) -> usize {
                self.inner.len()
            }
        }
    };
}

receiving!(Receiver);
receiving!(UnboundedReceiver);

impl<T> Receiver<T> {
    /// The room left in the channel now.
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    /// The channel's bound.
    pub fn max_capacity(&self) -> usize {
        self.inner.max_capacity()
    }
}

impl<T> UnboundedSender<T> {
    /// Send `value` (never waits); `Err` with it if the receiver is gone.
    #[inline]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.inner.send(Stamped::new(value)).map_err(bare_send)
    }

    /// Completes when the receiver is gone (never recorded).
    pub async fn closed(&self) {
        self.inner.closed().await
    }

    /// The receiver is gone or closed.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Both send into the same channel.
    pub fn same_channel(&self, other: &UnboundedSender<T>) -> bool {
        self.inner.same_channel(&other.inner)
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            inner: self.inner.clone(),
            site: self.site,
        }
    }
}

impl<T> Clone for UnboundedSender<T> {
    fn clone(&self) -> Self {
        UnboundedSender {
            inner: self.inner.clone(),
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

impl<T> fmt::Debug for UnboundedSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UnboundedSender { .. }")
    }
}

impl<T> fmt::Debug for UnboundedReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UnboundedReceiver { .. }")
    }
}
