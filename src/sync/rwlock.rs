//! [`RwLock`]: parking_lot's, with its contended waits and holds recorded (see the module
//! docs of [`sync`](super)).

use super::contention::Contention;
use cabprof_cab::runtime::recording;
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::panic::Location;

/// A reader-writer lock with `parking_lot::RwLock`'s API whose contention is recorded; see
/// the module docs. Readers and writers share one record: a reader waiting for a writer and
/// a writer waiting for readers are both waits at this lock's site. Compiled out it is
/// `parking_lot::RwLock` itself.
// `repr(C)`: the contention counters right before the lock (see `Contention`).
#[repr(C)]
pub struct RwLock<T: ?Sized> {
    contention: Contention,
    inner: parking_lot::RwLock<T>,
}

/// Shared access to an [`RwLock`]'s value, released when dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    contention: &'a Contention,
    inner: ManuallyDrop<parking_lot::RwLockReadGuard<'a, T>>,
}

/// Exclusive access to an [`RwLock`]'s value, released when dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    contention: &'a Contention,
    inner: ManuallyDrop<parking_lot::RwLockWriteGuard<'a, T>>,
}

impl<T> RwLock<T> {
    /// A new, unlocked lock holding `value`; the caller's line is its creation site.
    #[track_caller]
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            contention: Contention::new("RwLock", Location::caller()),
            inner: parking_lot::RwLock::new(value),
        }
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access, blocking while a writer holds or waits; while a session records,
    /// `try_read` first, and a failed try is a wait, timed.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        // As `Mutex::lock`: parking_lot's own `read` when no session records.
        let inner = if !recording() {
            self.inner.read()
        } else {
            match self.inner.try_read() {
                Some(g) => g,
                None => self.contention.wait(|| self.inner.read()),
            }
        };
        RwLockReadGuard {
            contention: &self.contention,
            inner: ManuallyDrop::new(inner),
        }
    }

    /// Exclusive access, blocking until no one else holds the lock; while a session
    /// records, `try_write` first, and a failed try is a wait, timed.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        // As `Mutex::lock`: parking_lot's own `write` when no session records.
        let inner = if !recording() {
            self.inner.write()
        } else {
            match self.inner.try_write() {
                Some(g) => g,
                None => self.contention.wait(|| self.inner.write()),
            }
        };
        RwLockWriteGuard {
            contention: &self.contention,
            inner: ManuallyDrop::new(inner),
        }
    }

    /// Shared access if it is free now (never waits, never recorded).
    #[inline]
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        self.inner.try_read().map(|g| RwLockReadGuard {
            contention: &self.contention,
            inner: ManuallyDrop::new(g),
        })
    }

    /// Exclusive access if it is free now (never waits, never recorded).
    #[inline]
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        self.inner.try_write().map(|g| RwLockWriteGuard {
            contention: &self.contention,
            inner: ManuallyDrop::new(g),
        })
    }

    /// Whether a reader or writer holds the lock now.
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }

    /// Whether a writer holds the lock now.
    #[inline]
    pub fn is_locked_exclusive(&self) -> bool {
        self.inner.is_locked_exclusive()
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

impl<T: Default> Default for RwLock<T> {
    #[track_caller]
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    #[track_caller]
    fn from(value: T) -> RwLock<T> {
        RwLock::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// Deref, Drop (one branch unless threads wait), Debug and Display for a guard type.
macro_rules! guard {
    ($guard:ident) => {
        impl<T: ?Sized> Deref for $guard<'_, T> {
            type Target = T;
            #[inline]
            fn deref(&self) -> &T {
                &self.inner
            }
        }

        impl<T: ?Sized> Drop for $guard<'_, T> {
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

        impl<T: ?Sized + fmt::Debug> fmt::Debug for $guard<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&**self, f)
            }
        }

        impl<T: ?Sized + fmt::Display> fmt::Display for $guard<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&**self, f)
            }
        }
    };
}

guard!(RwLockReadGuard);
guard!(RwLockWriteGuard);

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}
