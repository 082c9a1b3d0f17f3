//! The producer half of the CAB ring: the application thread's fast path (paper Fig. 3a) and
//! its cold slow path (the wrap at `MAGIC`, waiting on a full ring, sampling's chunk starts).

use super::*;

/// The application side of a CAB ring. See the [module docs](super) for the contract.
///
/// `SAMPLING` is a type parameter, not a field, so that each mode's fast path is exactly the
/// paper's: exhaustive tests for `CLEAR`, sampling tests for `MAGIC`, and neither tests a mode.
pub struct Producer<const SAMPLING: bool = false> {
    /// Next slot to write; always within `seg.slots` (`base ..= base + capacity`).
    pub(super) cursor: *const AtomicU64,
    /// `seg.slots.as_ptr()`, kept here so the wrap needs no pointer chase.
    pub(super) base: *const AtomicU64,
    /// Wraps done in the current segment; the absolute position is
    /// `seg_start + wraps * capacity + (cursor - base)`.
    pub(super) wraps: u64,
    /// Absolute position of the current segment's first slot (0 until a switch).
    pub(super) seg_start: u64,
    /// Sampling: the absolute position up to which the written words have been sampled into
    /// the handoff (the last chunk start entered or flush).
    pub(super) copied: u64,
    /// Sampling: handoff blocks written so far (the seqlock's sequence number).
    pub(super) seq: u64,
    pub(super) closed: bool,
    pub(super) stats: ProducerStats,
    /// The segment being written.
    pub(super) seg: Arc<Segment>,
    /// A growing ring's sizes and memory grant (`None`: the ring keeps its size).
    pub(super) grower: Option<Grower>,
    pub(super) shared: Arc<Shared>,
}

// SAFETY: `cursor` and `base` point into `seg.slots`, which the `Arc` keeps alive and never
// moves (a switch replaces `seg`, `base` and `cursor` together); the slots are atomics, safe to touch from any thread. Only one thread owns the
// producer at a time (it is not `Sync`), which is exactly the single-producer rule.
unsafe impl<const SAMPLING: bool> Send for Producer<SAMPLING> {}

impl<const SAMPLING: bool> Producer<SAMPLING> {
    /// Append one event: the common case is one load, one compare against `CLEAR`, one store
    /// and one pointer increment (paper Fig. 3a, lines 1 and 7). Everything else — the wrap at
    /// `MAGIC`, a full ring, a dead consumer — is out of line in `push_slow`.
    ///
    /// In sampling mode the test is against `MAGIC` only and a full ring is overwritten
    /// (paper Fig. 5a).
    #[inline(always)]
    pub fn push(&mut self, event: Event) {
        // SAFETY: `cursor` is always in `base ..= base + capacity` (the invariant on the field):
        // it starts at `base`, is incremented only after writing an event slot (index <
        // capacity, because the MAGIC slot at `capacity` never reads as CLEAR and is never
        // written) and is reset to `base` on MAGIC. The Arc keeps the slots alive.
        let slot = unsafe { &*self.cursor };
        let seen = slot.load(Ordering::Acquire);
        let free = if SAMPLING {
            seen != MAGIC
        } else {
            seen == CLEAR
        };
        if free {
            slot.store(event.word(), Ordering::Release);
            // SAFETY: the slot just written was an event slot (index < capacity), so the next
            // index is <= capacity: still inside the allocation.
            self.cursor = unsafe { self.cursor.add(1) };
        } else {
            self.push_slow(event.word());
        }
    }

    /// The exceptional cases of `push`: wrap on `MAGIC`, publish at an armed chunk start
    /// (sampling), wait on a full ring (paper Fig. 3b), drop and count if the consumer is gone.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, word: u64) {
        let mut spins = 0u32;
        // The clock when the producer first found the ring full, if `Stall` words are on: the
        // wait is told to the analyses in a `Stall` word, after `word` unless `word` opens a
        // frame (the frame's clock is read after the push, so the wait is outside it; a
        // return's or an end stamp's clock was read before, so the wait is outside the frame
        // it closes). Either way it lands in exactly the frames open while the producer waited.
        let mut full_since = None;
        let mut words = [word, 0];
        let (mut next, mut count) = (0, 1);
        loop {
            // SAFETY: as in `push`, the cursor is inside the slots.
            let slot = unsafe { &*self.cursor };
            let seen = slot.load(Ordering::Acquire);
            if seen == MAGIC && (!SAMPLING || self.index() == self.seg.capacity) {
                // A growing ring changes size here, at the end of its segment: the one place
                // a switch costs the fast path nothing. The switch (a new segment, its pages
                // faulted in) is time inside cabprof, told in a `Stall` word as a wait is.
                let started = (!SAMPLING && self.grower.is_some() && crate::event::stall_words())
                    .then(crate::clock::now);
                if SAMPLING || !self.switch() {
                    self.cursor = self.base;
                    self.wraps += 1;
                } else if next == 0 && full_since.is_none() {
                    full_since = started;
                }
                crate::lap::note();
                // Release: a consumer that reads this position also sees every slot before it.
                self.shared
                    .reached
                    .store(self.position(), Ordering::Release);
                continue;
            }
            if SAMPLING && seen == MAGIC {
                self.enter_chunk();
            }
            if seen == CLEAR || SAMPLING {
                if let Some(since) = full_since.take() {
                    let waited = crate::clock::now().saturating_sub(since);
                    crate::lap::note_stall(waited);
                    let stall = Event::stall(waited).word();
                    words = if crate::event::opens_frame(word) {
                        [stall, word]
                    } else {
                        [word, stall]
                    };
                    count = 2;
                }
                slot.store(words[next], Ordering::Release);
                // SAFETY: not the end-of-ring MAGIC slot (handled above; a sampling chunk
                // start may hold MAGIC too), so this is an event slot; +1 stays in bounds.
                self.cursor = unsafe { self.cursor.add(1) };
                next += 1;
                if next == count {
                    return;
                }
                continue;
            }
            // Full (exhaustive): the slot still holds an unread event.
            if !self.shared.ends.consumer_alive() {
                self.count_drop();
                return;
            }
            if next == 0 && full_since.is_none() && crate::event::stall_words() {
                full_since = Some(crate::clock::now());
            }
            if spins < SPINS_BEFORE_BACKOFF {
                spins += 1;
                spin_hint();
                continue;
            }
            if !self.block() {
                self.count_drop();
                return;
            }
        }
    }

    /// Wait until the slot two chunks ahead of the cursor is `CLEAR` (paper Fig. 3b), so that
    /// the producer resumes with two free chunks. Returns `false` if the consumer died.
    ///
    /// Before waiting, the partial chunk is published: with exactly four chunks and the cursor
    /// on a chunk boundary the consumer could otherwise never open the chunk the producer
    /// waits on (its gate is the very slot the producer is blocked at).
    fn block(&mut self) -> bool {
        self.stats.blocks += 1;
        let started = Instant::now();
        self.publish();
        let here = self.index();
        let poll = (here + 2 * self.seg.chunk) % self.seg.capacity;
        let mut round = 0;
        let alive = loop {
            // The slot is in the segment being written, whichever segment the consumer is
            // in: it turns `CLEAR` only when the consumer has read it there.
            if self.seg.slot(poll).load(Ordering::Acquire) == CLEAR {
                break true;
            }
            if !self.shared.ends.consumer_alive() {
                break false;
            }
            back_off(round);
            round = round.saturating_add(1);
        };
        let waited = started.elapsed();
        self.stats.blocked += waited;
        let c = &self.shared.counters;
        c.blocks.store(self.stats.blocks, Ordering::Relaxed);
        c.blocked_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        if self.grower.as_ref().is_some_and(|g| g.refused) {
            c.memory_wait_ns
                .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        }
        alive
    }

    /// Sampling, at an armed chunk start (the cursor is on it): hand the sample of the chunk
    /// just finished over and arm the next chunk's start. Only the producer writes a sampling
    /// ring, so every chunk start it reaches is armed (the first by `make`, each next one
    /// here): it comes here once a chunk, lap after lap. Per chunk: the copy (the rate's share
    /// of a chunk) and four stores, none per event.
    fn enter_chunk(&mut self) {
        self.copy_out();
        let seg = &*self.seg;
        let next = (self.index() + seg.chunk) % seg.capacity;
        // Relaxed: only this thread reads or writes the slots of a sampling ring.
        seg.slot(next).store(MAGIC, Ordering::Relaxed);
    }

    /// Sampling: copy the sampled bursts of the words written since the last copy (at most a
    /// chunk: every chunk start and every flush copies) into the next handoff block, as the
    /// seqlock in [`handoff`](super::handoff) says. Nothing when no consumer is left to read
    /// it, or the ring has no handoff (rate 0).
    fn copy_out(&mut self) {
        let to = self.position();
        let from = std::mem::replace(&mut self.copied, to);
        let sh = &*self.shared;
        let seg = &*self.seg;
        let Some(h) = sh.handoff.as_ref() else {
            return;
        };
        if to <= from || !sh.ends.consumer_alive() {
            return;
        }
        let len = (to - from) as usize;
        // The range lies in one chunk of one lap: it starts at a chunk start or a flush and
        // ends at the next chunk start or flush, so its ring indices do not wrap.
        let start = (from % seg.capacity as u64) as usize;
        debug_assert!(len <= seg.chunk && start + len <= seg.capacity);
        let rate = f64::from_bits(h.rate.load(Ordering::Relaxed));
        let plan = handoff::plan(len, rate, h.burst, h.seed.wrapping_add(self.seq));
        // Written even when it takes no word: its head tells the consumer how far the
        // producer got (`Consumer::producer_stats`) and what the blocks it lost held.
        // `block_slots` sized the block for the most a plan at the ring's rate takes.
        let count = plan.words();
        debug_assert!(handoff::HEAD + count <= h.block);
        let seq = self.seq;
        self.seq += 1;
        h.seq.begun.store(seq + 1, Ordering::Relaxed);
        // No word of this block may be seen before `begun` says it is being rewritten.
        handoff::store_fence();
        let dst = h.block(seq);
        handoff::stream_store(&dst[0], count as u64 | (plan.first() as u64) << 32);
        handoff::stream_store(&dst[1], from);
        handoff::stream_store(&dst[2], to);
        let words = &dst[handoff::HEAD..];
        let mut k = 0;
        for (off, n) in plan.slices() {
            for i in start + off..start + off + n {
                // Relaxed: this thread wrote the slot.
                handoff::stream_store(&words[k], seg.slot(i).load(Ordering::Relaxed));
                k += 1;
            }
        }
        // The block's streaming stores before `done`.
        handoff::store_fence();
        h.seq.done.store(seq + 1, Ordering::Release);
    }

    #[cold]
    fn count_drop(&mut self) {
        self.stats.dropped += 1;
        self.shared
            .counters
            .dropped
            .store(self.stats.dropped, Ordering::Relaxed);
    }

    /// Ring index of the cursor (`0..=capacity`).
    #[inline]
    fn index(&self) -> usize {
        // SAFETY: both pointers are into the same allocation, cursor >= base.
        unsafe { self.cursor.offset_from(self.base) as usize }
    }

    /// Events written so far (absolute position).
    #[inline]
    fn position(&self) -> u64 {
        self.seg_start + self.wraps * self.seg.capacity as u64 + self.index() as u64
    }

    /// A growing ring, at the end of its segment (the cursor on the `MAGIC` slot): move to a
    /// segment of another size if the lap just finished asks for one and its memory is
    /// granted. Returns whether it switched (the cursor is then at the new segment's start).
    ///
    /// Larger when the ring is full here (the consumer has not read its first chunk) or the
    /// producer blocked during the lap; smaller after a quiet lap. The switch position `P` is a
    /// chunk boundary of both segments, so the consumer's chunks never straddle it.
    #[cold]
    #[inline(never)]
    fn switch(&mut self) -> bool {
        let Some(g) = self.grower.as_mut() else {
            return false;
        };
        let blocked = self.stats.blocks != g.blocks_at_wrap;
        g.blocks_at_wrap = self.stats.blocks;
        #[cfg(not(loom))]
        let (quiet, fast) = {
            let now = Instant::now();
            let lap = now.duration_since(std::mem::replace(&mut g.wrapped_at, now));
            (lap >= QUIET_LAP, lap < FAST_LAP)
        };
        #[cfg(loom)]
        let (quiet, fast) = (false, false);
        let to = if let Some(script) = g.script.as_mut() {
            match script.next() {
                Some(level) => level.min(g.sizes.len() - 1),
                None => return false,
            }
        } else {
            // Relaxed: a hint only. A stale value delays or hastens a resize by a lap; which
            // slots the producer may write is still decided by the fast path's own load.
            let full = self.seg.slot(0).load(Ordering::Relaxed) != CLEAR;
            if full || blocked || fast {
                g.level + 1
            } else if quiet {
                g.level.saturating_sub(1)
            } else {
                g.level
            }
        };
        g.refused = false;
        if to == g.level || to >= g.sizes.len() {
            return false;
        }
        let (capacity, chunk) = g.sizes[to];
        // The grant, the new segment and the old one's release allocate and free: the
        // runtime's own work, which an allocation-tracking allocator must not turn into events
        // (they would come back here, into this producer, in the middle of its switch).
        let _work = crate::runtime::runtime_work();
        // The smallest size needs no grant: every growing ring may always have it.
        let grant = if to == 0 {
            None
        } else {
            match (g.grant)(capacity * WORD_BYTES) {
                Some(grant) => Some(grant),
                None => {
                    g.refused = true;
                    self.shared.counters.refused.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
        };
        let Ok(next) = Segment::new(capacity, chunk, g.huge_pages, false, grant) else {
            // The allocator refused what the budget granted: a wait for memory all the same.
            g.refused = to > g.level;
            self.shared
                .counters
                .refused
                .fetch_add(u64::from(g.refused), Ordering::Relaxed);
            return false;
        };
        // Its pages faulted in now, inside the switch, rather than one by one on the fast path
        // of its first lap. Not yet visible to the consumer: `switch_at` is stored below.
        next.fault_in();
        let c = &self.shared.counters;
        if to > g.level {
            c.grown.fetch_add(1, Ordering::Relaxed);
            c.largest.fetch_max(capacity as u64, Ordering::Relaxed);
        } else {
            c.shrunk.fetch_add(1, Ordering::Relaxed);
        }
        g.level = to;
        let at = self.position();
        let old = &self.seg;
        // This producer wrote every slot of the segment it leaves.
        old.slots.written(old.capacity, old.capacity);
        *old.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(next.clone());
        // Release, after `next` and before any slot of `next` is written: a consumer that
        // loads `switch_at` with Acquire and finds it set finds `next` set, and a consumer
        // that sees any later store of this thread (a slot of `next`, `published`, `closed`)
        // and then loads `switch_at` finds it set.
        old.switch_at.store(at, Ordering::Release);
        self.base = next.slots.as_ptr();
        self.cursor = self.base;
        self.wraps = 0;
        self.seg_start = at;
        self.seg = next;
        true
    }

    fn publish(&mut self) {
        let pos = self.position();
        self.stats.pushed = pos;
        // Release: every slot store before `pos` happens-before a consumer that reads `pos`.
        self.shared.published.store(pos, Ordering::Release);
    }

    /// Hand every event pushed so far to the consumer, including a partly written chunk
    /// (sampling: its sample, copied into the handoff).
    pub fn flush(&mut self) {
        if SAMPLING {
            self.copy_out();
        }
        self.publish();
    }

    /// Flush and mark the end of the stream. Idempotent; also done on drop.
    pub fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.flush();
            // After the final `published`: a consumer that sees `closed` sees it.
            self.shared.ends.close();
        }
    }

    /// Counters so far (`pushed` is exact after a flush or close).
    pub fn stats(&self) -> ProducerStats {
        ProducerStats {
            pushed: self.position(),
            ..self.stats
        }
    }

    /// Whether the consumer half still exists.
    pub fn consumer_alive(&self) -> bool {
        self.shared.ends.consumer_alive()
    }
}

impl<const SAMPLING: bool> Drop for Producer<SAMPLING> {
    fn drop(&mut self) {
        self.close();
        // What this ring's memory can hold besides zeros, so that keeping it for the next
        // ring zeroes that alone: the slots this producer reached (all of them once it has
        // wrapped), plus, sampling, the chunk start it armed ahead (at most a chunk past the
        // cursor; left in place, it would lie inside a chunk of a next owner with longer
        // chunks, which would take it for a chunk start); and the `MAGIC` slot.
        let seg = &self.seg;
        let reached = if self.wraps > 0 {
            seg.capacity
        } else {
            self.index() + 1 + if SAMPLING { seg.chunk } else { 0 }
        };
        seg.slots.written(reached.min(seg.capacity), seg.capacity);
    }
}
