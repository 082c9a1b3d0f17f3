//! Sequential mode: the words a thread has emitted since its inline analysis last ran, and the
//! two ways they reach that analysis ([`drain`] and [`flush`]).
//!
//! The hot path appends to a [`Pending`] buffer (a relaxed store of the word, then `len` with
//! `Release`) instead of locking the thread's analysis for every event; the analysis runs on a
//! full buffer, at the thread's end, and on a snapshot or `finish`. Protocol:
//!
//! - only the owning thread writes: a word at index `len`, then `len + 1`; and `len = 0`,
//!   only while it holds its slot's lock, after the words were analyzed ([`flush`]);
//! - anyone else (a snapshot, `finish`) reads `len` (`Acquire`) and the words below it only
//!   while holding the same lock ([`drain`]), so `len` cannot be reset under it, and the
//!   owner's concurrent appends go to indices at or above the `len` it read;
//! - the slot remembers how many of the words the session has already analyzed (`consumed`),
//!   so the owner's next drain starts after them.
//!
//! The atomics come from `crate::sync`, so `cab/tests/loom.rs` model-checks this very code
//! (the module is public only under `cfg(loom)`).

use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// Words copied out of a [`Pending`] buffer at a time (the buffer may be larger).
const CHUNK: usize = 256;

/// A thread's buffer of words not yet handed to its inline analysis (see the module docs).
pub struct Pending {
    words: Box<[AtomicU64]>,
    len: AtomicUsize,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("capacity", &self.words.len())
            .field("len", &self.len.load(Ordering::Relaxed))
            .finish()
    }
}

impl Pending {
    /// The runtime's buffer: 256 words (2 KB), so a thread's buffer stays in its L1 cache.
    pub const CAPACITY: usize = 256;

    /// An empty buffer of `capacity` words.
    pub fn new(capacity: usize) -> Pending {
        Pending {
            words: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            len: AtomicUsize::new(0),
        }
    }

    /// Append (owning thread only); `false` if full.
    #[inline(always)]
    pub fn push(&self, word: u64) -> bool {
        let n = self.len.load(Ordering::Relaxed);
        match self.words.get(n) {
            Some(slot) => {
                slot.store(word, Ordering::Relaxed);
                self.len.store(n + 1, Ordering::Release);
                true
            }
            None => false,
        }
    }

    /// Start over (owning thread only, holding the slot's lock): [`flush`] does this after
    /// analyzing; alone, it drops the words (the slot's analysis was taken by `finish`).
    pub fn reset(&self) {
        self.len.store(0, Ordering::Relaxed);
    }
}

/// Analyze the words `*consumed..len` (holding the slot's lock) and record them as consumed.
/// A snapshot and `finish` call this; `analyze` sees them in order, in pieces of at most
/// 256 words.
pub fn drain(pending: &Pending, consumed: &mut usize, mut analyze: impl FnMut(&[u64])) {
    let n = pending.len.load(Ordering::Acquire);
    // `len` only falls by `flush`, which zeroes `consumed` with it.
    debug_assert!(*consumed <= n, "pending len {n} below consumed {consumed}");
    let mut buf = [0u64; CHUNK];
    for words in pending.words[(*consumed).min(n)..n].chunks(CHUNK) {
        for (o, w) in buf.iter_mut().zip(words) {
            *o = w.load(Ordering::Relaxed);
        }
        analyze(&buf[..words.len()]);
    }
    *consumed = n.max(*consumed);
}

/// The owning thread's flush (holding the slot's lock): analyze what the session has not
/// ([`drain`]), then empty the buffer.
pub fn flush(pending: &Pending, consumed: &mut usize, analyze: impl FnMut(&[u64])) {
    drain(pending, consumed, analyze);
    *consumed = 0;
    pending.reset();
}
