//! [`Mutex`]: parking_lot's, with its contended waits and holds recorded (see the module docs
//! of [`sync`](super)).

use super::contention::Contention;
use cabprof_cab::runtime::recording;
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::time::{Duration, Instant};

/// A mutual-exclusion lock with `parking_lot::Mutex`'s API whose contention is recorded; see
/// the module docs. Compiled out it is `parking_lot::Mutex` itself.
// `repr(C)`: the contention counters right before the lock (see `Contention`).
#[repr(C)]
pub struct Mutex<T: ?Sized> {
    contention: Contention,
    inner: parking_lot::Mutex<T>,
}

/// The guard of a [`Mutex`]: the lock is released when it is dropped.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    contention: &'a Contention,
    inner: ManuallyDrop<parking_lot::MutexGuard<'a, T>>,
}

impl<T> Mutex<T> {
    /// A new, unlocked mutex holding `value`; the caller's line is its creation site.
    #[track_caller]
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            contention: Contention::new("Mutex", Location::caller()),
            inner: parking_lot::Mutex::new(value),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    #[inline]
    fn guard<'a>(&'a self, inner: parking_lot::MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        MutexGuard {
            contention: &self.contention,
            inner: ManuallyDrop::new(inner),
        }
    }

    /// Acquire the lock, blocking until it is free. With no session recording this is
    /// parking_lot's `lock` after one load and branch; while one records, `try_lock` first,
    /// and a failed try is a wait, timed.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        // Not `try_lock` when idle: parking_lot's `try_lock` loads the state before its
        // compare-and-swap, dearer per uncontended lock than `lock`'s lone compare-and-swap
        // (lab/checks/benches/idle_cost.rs).
        if !recording() {
            return self.guard(self.inner.lock());
        }
        let inner = match self.inner.try_lock() {
            Some(g) => g,
            None => self.contention.wait(|| self.inner.lock()),
        };
        self.guard(inner)
    }

    /// Acquire the lock if it is free now (never waits, never recorded).
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.inner.try_lock().map(|g| self.guard(g))
    }

    /// Acquire the lock, waiting at most `timeout`; the wait is recorded whether or not it
    /// ends with the lock.
    #[inline]
    pub fn try_lock_for(&self, timeout: Duration) -> Option<MutexGuard<'_, T>> {
        let inner = match self.inner.try_lock() {
            Some(g) => Some(g),
            None => self.contention.wait(|| self.inner.try_lock_for(timeout)),
        };
        inner.map(|g| self.guard(g))
    }

    /// Acquire the lock, waiting at most until `deadline`; recorded as
    /// [`try_lock_for`](Self::try_lock_for).
    #[inline]
    pub fn try_lock_until(&self, deadline: Instant) -> Option<MutexGuard<'_, T>> {
        let inner = match self.inner.try_lock() {
            Some(g) => Some(g),
            None => self.contention.wait(|| self.inner.try_lock_until(deadline)),
        };
        inner.map(|g| self.guard(g))
    }

    /// Whether the lock is held now.
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }

    /// The value, through a unique borrow: no locking needed.
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    /// A raw pointer to the value (parking_lot's `data_ptr`).
    #[inline]
    pub fn data_ptr(&self) -> *mut T {
        self.inner.data_ptr()
    }
}

impl<T: Default> Default for Mutex<T> {
    #[track_caller]
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    #[track_caller]
    fn from(value: T) -> Mutex<T> {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let inner = &mut self.inner;
        // SAFETY: `inner` is dropped exactly once, here, and never touched again: the guard
        // is being dropped.
        let mut unlock = move || unsafe { ManuallyDrop::drop(inner) };
        if self.contention.waited() {
            self.contention.release(unlock);
        } else {
            unlock();
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
