//! `std::sync::mpsc`'s channels, with blocked sends and receives recorded (see the module docs
//! of [`sync`](super)). Each endpoint holds the standard library's own: the capacity, the
//! back-pressure, the order of messages and the errors are the wrapped channel's. A `send` on
//! a [`SyncSender`] is `try_send` first and, only if the channel is full, the same blocking
//! `send`, timed; a `recv` is `try_recv` first and, only if the channel is empty, the same
//! blocking `recv`, timed. Nothing is buffered beside the channel: each message sits in it
//! with its send time beside it (a `u64`, padded to the message's alignment), and every receive (iterators too) writes how long
//! it took since its send (a wait for room included) for the channel's site; an error that
//! gives the message back gives it alone. Compiled out, this module is `std::sync::mpsc`.

use super::contention::blocked;
use super::latency::{ChannelSite, Stamped};
use super::sites::Site;
use cabprof_cab::event::WaitKind;
use std::fmt;
use std::panic::Location;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

pub use std::sync::mpsc::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};

/// The message of an error that gives it back, without its send time.
fn bare<T>(e: TrySendError<Stamped<T>>) -> TrySendError<T> {
    match e {
        TrySendError::Full(s) => TrySendError::Full(s.msg),
        TrySendError::Disconnected(s) => TrySendError::Disconnected(s.msg),
    }
}

/// The sending half of an unbounded [`channel`]: `send` never blocks, so nothing is recorded.
pub struct Sender<T> {
    inner: std_mpsc::Sender<Stamped<T>>,
}

/// The sending half of a bounded [`sync_channel`]: a `send` that finds the channel full is
/// recorded as a blocked send.
pub struct SyncSender<T> {
    inner: std_mpsc::SyncSender<Stamped<T>>,
    site: Site,
}

/// The receiving half of a channel: a `recv` that finds it empty is recorded as a blocked
/// receive.
pub struct Receiver<T> {
    inner: std_mpsc::Receiver<Stamped<T>>,
    site: ChannelSite,
}

/// An unbounded channel (`std::sync::mpsc::channel`); the caller's line is its site.
#[track_caller]
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = std_mpsc::channel();
    let site = Site {
        kind: "channel",
        location: Location::caller(),
    };
    (
        Sender { inner: tx },
        Receiver {
            inner: rx,
            site: ChannelSite::new(site),
        },
    )
}

/// A channel of `bound` messages (`std::sync::mpsc::sync_channel`; 0: a rendezvous); the
/// caller's line is its site.
#[track_caller]
pub fn sync_channel<T>(bound: usize) -> (SyncSender<T>, Receiver<T>) {
    let (tx, rx) = std_mpsc::sync_channel(bound);
    let site = Site {
        kind: "sync_channel",
        location: Location::caller(),
    };
    (
        SyncSender { inner: tx, site },
        Receiver {
            inner: rx,
            site: ChannelSite::new(site),
        },
    )
}

impl<T> Sender<T> {
    /// Send `t` (never blocks); `Err` with it if the receiver is gone.
    #[inline]
    pub fn send(&self, t: T) -> Result<(), SendError<T>> {
        self.inner
            .send(Stamped::new(t))
            .map_err(|SendError(s)| SendError(s.msg))
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            inner: self.inner.clone(),
        }
    }
}

impl<T> SyncSender<T> {
    /// Send `t`, blocking while the channel is full (recorded); `Err` with it if the
    /// receiver is gone.
    #[inline]
    pub fn send(&self, t: T) -> Result<(), SendError<T>> {
        match self.inner.try_send(Stamped::new(t)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(s)) => Err(SendError(s.msg)),
            Err(TrySendError::Full(s)) => blocked(WaitKind::Send, self.site, || {
                self.inner.send(s).map_err(|SendError(s)| SendError(s.msg))
            }),
        }
    }

    /// Send `t` if there is room now (never blocks, never recorded).
    #[inline]
    pub fn try_send(&self, t: T) -> Result<(), TrySendError<T>> {
        self.inner.try_send(Stamped::new(t)).map_err(bare)
    }
}

impl<T> Clone for SyncSender<T> {
    fn clone(&self) -> Self {
        SyncSender {
            inner: self.inner.clone(),
            site: self.site,
        }
    }
}

impl<T> Receiver<T> {
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

    /// The next message if there is one now (never blocks; its latency is recorded).
    #[inline]
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.inner.try_recv().map(|s| s.open(&self.site))
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

    /// The messages as they come, blocking for each ([`recv`](Self::recv)), until every
    /// sender is gone.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// The messages there are now, without blocking.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }
}

/// The messages a [`Receiver`] has now, each from a [`try_recv`](Receiver::try_recv).
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// The messages of a [`Receiver`], each from a blocking [`recv`](Receiver::recv).
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// The messages of a [`Receiver`] it owns, each from a blocking [`recv`](Receiver::recv).
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

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

impl<T> fmt::Debug for SyncSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncSender { .. }")
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}
