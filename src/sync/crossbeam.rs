//! crossbeam-channel's channels (feature `crossbeam`), with blocked sends and receives recorded
//! (see the module docs of [`sync`](super)). Each endpoint holds crossbeam's own: the capacity,
//! the back-pressure, the order of messages and the errors are the wrapped channel's. A `send`
//! (`send_timeout`, `send_deadline`) is `try_send` first and, only if the channel is full, the
//! same blocking operation, timed; a `recv` (`recv_timeout`, `recv_deadline`) is `try_recv`
//! first and, only if the channel is empty, the same blocking operation, timed. A timed wait is
//! recorded however it ends (a message, a timeout, a disconnection). Nothing is buffered beside
//! the channel: each message sits in it with its send time beside it (a `u64`, padded to the message's alignment), and every
//! receive (iterators too) writes how long it took since its send (a wait for room included)
//! for the channel's site; an error that gives the message back gives it alone. Both ends are
//! `Clone`, as crossbeam's are: every clone keeps the channel's creation site.
//!
//! Not wrapped: `select!` and `Select` (they take crossbeam's own endpoints, so a wait in them
//! is not recorded: use `crossbeam_channel` directly there), and the timer channels `after`,
//! `at`, `tick` and `never`. Compiled out (without cabprof's `enabled` feature), this module is
//! crossbeam-channel's own items of the same names.

use super::contention::blocked;
use super::latency::{ChannelSite, Stamped};
use super::sites::Site;
use cabprof_cab::event::WaitKind;
use crossbeam_channel as cb;
use std::fmt;
use std::iter::FusedIterator;
use std::panic::Location;
use std::time::{Duration, Instant};

pub use crossbeam_channel::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};

/// The message of an error that gives it back, without its send time.
fn bare<T>(e: TrySendError<Stamped<T>>) -> TrySendError<T> {
    match e {
        TrySendError::Full(s) => TrySendError::Full(s.msg),
        TrySendError::Disconnected(s) => TrySendError::Disconnected(s.msg),
    }
}

/// The same for a timed send.
fn bare_timeout<T>(e: SendTimeoutError<Stamped<T>>) -> SendTimeoutError<T> {
    match e {
        SendTimeoutError::Timeout(s) => SendTimeoutError::Timeout(s.msg),
        SendTimeoutError::Disconnected(s) => SendTimeoutError::Disconnected(s.msg),
    }
}

/// The sending end of a channel: a send that finds a [`bounded`] channel full is recorded as a
/// blocked send (an [`unbounded`] one is never full).
pub struct Sender<T> {
    inner: cb::Sender<Stamped<T>>,
    site: Site,
}

/// The receiving end of a channel: a receive that finds it empty is recorded as a blocked
/// receive.
pub struct Receiver<T> {
    inner: cb::Receiver<Stamped<T>>,
    site: ChannelSite,
}

/// A channel of `cap` messages (`crossbeam_channel::bounded`; 0: a rendezvous); the caller's
/// line is its site.
#[track_caller]
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = cb::bounded(cap);
    wrap(tx, rx, "crossbeam::bounded", Location::caller())
}

/// A channel of unlimited capacity (`crossbeam_channel::unbounded`); the caller's line is its
/// site.
#[track_caller]
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = cb::unbounded();
    wrap(tx, rx, "crossbeam::unbounded", Location::caller())
}

fn wrap<T>(
    tx: cb::Sender<Stamped<T>>,
    rx: cb::Receiver<Stamped<T>>,
    kind: &'static str,
    location: &'static Location<'static>,
) -> (Sender<T>, Receiver<T>) {
    let site = Site { kind, location };
    (
        Sender { inner: tx, site },
        Receiver {
            inner: rx,
            site: ChannelSite::new(site),
        },
    )
}

impl<T> Sender<T> {
    /// Send `msg` if there is room now (never blocks, never recorded).
    #[inline]
    pub fn try_send(&self, msg: T) -> Result<(), TrySendError<T>> {
        self.inner.try_send(Stamped::new(msg)).map_err(bare)
    }

    /// Send `msg`, blocking while the channel is full (recorded); `Err` with it if every
    /// receiver is gone.
    #[inline]
    pub fn send(&self, msg: T) -> Result<(), SendError<T>> {
        match self.inner.try_send(Stamped::new(msg)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(m)) => Err(SendError(m.msg)),
            Err(TrySendError::Full(m)) => blocked(WaitKind::Send, self.site, || {
                self.inner.send(m).map_err(|SendError(m)| SendError(m.msg))
            }),
        }
    }

    /// Send `msg`, waiting at most `timeout` for room (the wait is recorded however it ends).
    #[inline]
    pub fn send_timeout(&self, msg: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        match self.inner.try_send(Stamped::new(msg)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(m)) => Err(SendTimeoutError::Disconnected(m.msg)),
            Err(TrySendError::Full(m)) => blocked(WaitKind::Send, self.site, || {
                self.inner.send_timeout(m, timeout).map_err(bare_timeout)
            }),
        }
    }

    /// Send `msg`, waiting until `deadline` at most for room (the wait is recorded however it
    /// ends).
    #[inline]
    pub fn send_deadline(&self, msg: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        match self.inner.try_send(Stamped::new(msg)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(m)) => Err(SendTimeoutError::Disconnected(m.msg)),
            Err(TrySendError::Full(m)) => blocked(WaitKind::Send, self.site, || {
                self.inner.send_deadline(m, deadline).map_err(bare_timeout)
            }),
        }
    }

    /// No message is in the channel.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The channel is full (an unbounded one never is).
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    /// The messages in the channel.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// The channel's capacity (`None`: unbounded).
    pub fn capacity(&self) -> Option<usize> {
        self.inner.capacity()
    }

    /// Both send into the same channel.
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        self.inner.same_channel(&other.inner)
    }
}

impl<T> Receiver<T> {
    /// The next message if there is one now (never blocks; its latency is recorded).
    #[inline]
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.inner.try_recv().map(|s| s.open(&self.site))
    }

    /// The next message, blocking while the channel is empty (recorded); `Err` once it is
    /// empty and every sender is gone.
    #[inline]
    pub fn recv(&self) -> Result<T, RecvError> {
        let s = match self.inner.try_recv() {
            Ok(s) => s,
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) => {
                blocked(WaitKind::Receive, self.site.site, || self.inner.recv())?
            }
        };
        Ok(s.open(&self.site))
    }

    /// The next message, waiting at most `timeout` (the wait is recorded however it ends).
    #[inline]
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let s = match self.inner.try_recv() {
            Ok(s) => s,
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => blocked(WaitKind::Receive, self.site.site, || {
                self.inner.recv_timeout(timeout)
            })?,
        };
        Ok(s.open(&self.site))
    }

    /// The next message, waiting until `deadline` at most (the wait is recorded however it
    /// ends).
    #[inline]
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        let s = match self.inner.try_recv() {
            Ok(s) => s,
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => blocked(WaitKind::Receive, self.site.site, || {
                self.inner.recv_deadline(deadline)
            })?,
        };
        Ok(s.open(&self.site))
    }

    /// No message is in the channel.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The channel is full (an unbounded one never is).
    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    /// The messages in the channel.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// The channel's capacity (`None`: unbounded).
    pub fn capacity(&self) -> Option<usize> {
        self.inner.capacity()
    }

    /// The messages as they come, blocking for each ([`recv`](Self::recv)), until the channel
    /// is empty and every sender is gone.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// The messages there are now, without blocking.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Both receive from the same channel.
    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
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

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver {
            inner: self.inner.clone(),
            site: self.site.clone(),
        }
    }
}

/// The messages of a [`Receiver`], each from a blocking [`recv`](Receiver::recv).
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// The messages a [`Receiver`] has now, each from a [`try_recv`](Receiver::try_recv).
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// The messages of a [`Receiver`] it owns, each from a blocking [`recv`](Receiver::recv).
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

// A disconnected channel stays disconnected: after the first `None`, every `recv` fails.
impl<T> FusedIterator for Iter<'_, T> {}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> FusedIterator for IntoIter<T> {}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
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

// As crossbeam-channel's: no `T: Debug` needed to print an iterator.
impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Iter { .. }")
    }
}

impl<T> fmt::Debug for TryIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("TryIter { .. }")
    }
}

impl<T> fmt::Debug for IntoIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("IntoIter { .. }")
    }
}
