//! The consumer half of the CAB ring: the analyzer takes whole chunks two chunks behind the
//! producer and clears what it read (exhaustive), or reads the sample the producer left in
//! the handoff (sampling).

use super::*;

/// The analyzer side of a CAB ring. See the [module docs](super) for the contract.
pub struct Consumer {
    pub(super) shared: Arc<Shared>,
    /// The segment being read (exhaustive: it holds `pos`; the producer may be in a later one).
    pub(super) seg: Arc<Segment>,
    /// Absolute position of `seg`'s first slot.
    pub(super) seg_start: u64,
    /// Absolute position of the next unread event (events ever written before it).
    /// Chunk-aligned except after reading a flushed partial chunk. Sampling: where the range
    /// of the last handoff block read ends.
    pub(super) pos: u64,
    /// Sampling: the next handoff block to read (its sequence number).
    pub(super) next: u64,
    pub(super) sampling: bool,
    /// Fraction of each chunk analyzed (1.0 in exhaustive mode).
    pub(super) rate: f64,
    /// Sampling: the configured rate, which sized the handoff's blocks; `set_rate` stays
    /// below it.
    pub(super) max_rate: f64,
    /// Sampling: a handoff block is copied here and checked whole before any of it is
    /// delivered (the producer may be rewriting it). Empty when exhaustive.
    pub(super) scratch: Vec<u64>,
    pub(super) stats: ConsumerStats,
}

impl Consumer {
    /// Deliver the next ready chunk to `f` as a borrowed slice and clear it.
    ///
    /// Exhaustive: `f` gets the rest of the current chunk in one zero-copy slice once the
    /// producer has moved two chunks on, or the flushed part of it after a flush/close.
    /// Sampling: `f` gets each sampled burst of the next handoff block (copied, see
    /// `scratch`).
    pub fn poll_with(&mut self, mut f: impl FnMut(&[u64])) -> Poll {
        if self.sampling {
            return self.poll_sampling(&mut f);
        }
        loop {
            // Acquire: pairs with the producer's Release store at its switch, so `next` is
            // set when this is; see `Segment::switch_at`.
            let switch = self.seg.switch_at.load(Ordering::Acquire);
            if self.pos == switch {
                self.leave_segment();
                continue;
            }
            let sh = &*self.shared;
            let seg = &*self.seg;
            let idx = ((self.pos - self.seg_start) % seg.capacity as u64) as usize;
            let start = idx - idx % seg.chunk;
            let chunk_end = self.pos - (idx - start) as u64 + seg.chunk as u64; // absolute
                                                                                // Exhaustive: the gate's previous occupant (one lap earlier) was consumed and
                                                                                // cleared before anything at `pos`, so a non-CLEAR gate was written in this lap:
                                                                                // the producer has passed the whole of this chunk. Once the producer has left the
                                                                                // segment (`switch` seen), it wrote every slot before `switch` (chunk-aligned, so
                                                                                // at or past `chunk_end`) before it stored `switch_at`: the chunk is ready, and
                                                                                // the producer writes elsewhere, so reading it shares no line with it. Read while
                                                                                // the producer has left but its switch is not yet seen, the gate is a slot this
                                                                                // consumer cleared and the producer never writes again: `CLEAR`.
            let gate = (start + 2 * seg.chunk) % seg.capacity;
            let ready = switch != NO_SWITCH || seg.slot(gate).load(Ordering::Acquire) != CLEAR;
            let end = if ready {
                chunk_end
            } else {
                // Acquire `closed` before `published`: a closed producer's final position is
                // then the one we read.
                let closed = sh.ends.producer_closed();
                let published = sh.published.load(Ordering::Acquire);
                // A switch stored before the `published` or `closed` just read is visible now
                // (both Acquire, after the producer's Release of `switch_at`): had it been
                // missed above, `pos` might be taken for a slot of this segment's next lap.
                if switch == NO_SWITCH && self.seg.switch_at.load(Ordering::Acquire) != NO_SWITCH {
                    continue;
                }
                if published > self.pos {
                    published.min(chunk_end)
                } else if closed {
                    return Poll::Closed;
                } else {
                    return Poll::Empty;
                }
            };
            let len = (end - self.pos) as usize;
            self.stats.chunks += 1;
            let delivered = self.take(idx, len, f);
            self.pos = end;
            self.stats.delivered += delivered as u64;
            return Poll::Consumed(delivered);
        }
    }

    /// Exhaustive: every slot of the current segment is read (`pos` is its `switch_at`): go on
    /// in the next one. Dropping this `Arc` frees the segment (the producer let go of it at its
    /// switch), and with it its memory grant.
    fn leave_segment(&mut self) {
        let next = self.seg.next();
        self.seg_start = self.pos;
        self.seg = next;
    }

    /// Sampling: read the next handoff block the producer finished, or skip to the oldest
    /// still whole if the producer is a whole handoff ahead (counted as lapped); drop a block
    /// the producer began to rewrite while it was copied (counted too). See
    /// [`handoff`](super::handoff) for the protocol and its orderings.
    fn poll_sampling(&mut self, f: &mut impl FnMut(&[u64])) -> Poll {
        let sh = &*self.shared;
        let Some(h) = sh.handoff.as_ref() else {
            // Rate 0: nothing is ever copied; the stream ends when the producer closes.
            return if sh.ends.producer_closed() {
                Poll::Closed
            } else {
                Poll::Empty
            };
        };
        // Acquire `closed` before `done`: a closed producer's last block is then visible.
        let closed = sh.ends.producer_closed();
        let done = h.seq.done.load(Ordering::Acquire);
        if self.next >= done {
            if !closed {
                return Poll::Empty;
            }
            // What the blocks lost after the last one read held: up to the final position.
            let end = sh.published.load(Ordering::Acquire);
            if end > self.pos {
                self.stats.events_lapped += end - self.pos;
                self.pos = end;
            }
            return Poll::Closed;
        }
        let blocks = h.blocks as u64;
        if done - self.next > blocks {
            let skipped = done - self.next - blocks;
            self.next += skipped;
            self.stats.chunks_lapped += skipped;
        }
        let seq = self.next;
        self.next += 1;
        self.stats.chunks += 1;
        let block = h.block(seq);
        // A torn head may say anything: the counts are held to the block, and the check below
        // drops the copy.
        let head = block[0].load(Ordering::Relaxed);
        let count = (head as u32 as usize).min(h.block - handoff::HEAD);
        let first = ((head >> 32) as usize).min(count);
        let from = block[1].load(Ordering::Relaxed);
        let to = block[2].load(Ordering::Relaxed);
        for (k, slot) in block[handoff::HEAD..handoff::HEAD + count]
            .iter()
            .enumerate()
        {
            self.scratch[k] = slot.load(Ordering::Relaxed);
        }
        // Pairs with the producer's fence after `begun`: if any word above is of a block
        // begun later, that `begun` is visible here.
        fence(Ordering::Acquire);
        let torn = h.seq.begun.load(Ordering::Relaxed) > seq + blocks;
        for line in block[..handoff::HEAD + count].chunks(LINE_SLOTS) {
            handoff::evict_line(line.as_ptr());
        }
        if torn {
            self.stats.chunks_lapped += 1;
            return Poll::Consumed(0);
        }
        // The blocks lost since the last one read held the positions up to this one's range.
        self.stats.events_lapped += from.saturating_sub(self.pos);
        self.pos = self.pos.max(to);
        let mut delivered = 0;
        let (head, rest) = self.scratch[..count].split_at(first);
        // A whole block holds only events: the producer copies words it wrote in this lap,
        // never an armed chunk start (see `Producer::copy_out`).
        for slice in std::iter::once(head).chain(rest.chunks(h.burst)) {
            debug_assert!(slice.iter().all(|&w| w != CLEAR && w != MAGIC));
            if !slice.is_empty() {
                f(slice);
                delivered += slice.len();
            }
        }
        self.stats.delivered += delivered as u64;
        Poll::Consumed(delivered)
    }

    /// Exhaustive: hand out slots `idx .. idx + len` and clear them.
    fn take(&mut self, idx: usize, len: usize, mut f: impl FnMut(&[u64])) -> usize {
        // The chunk is handed out in L1-sized blocks, each cleared right after `f` has read
        // it, while its lines are still in the consumer's L1 (the paper clears each event right
        // after processing it, for the same temporal locality). `f` sees the whole chunk, in
        // order, as consecutive zero-copy slices.
        for block in self.seg.slots[idx..idx + len].chunks(CLEAR_BLOCK) {
            #[cfg(not(loom))]
            {
                // SAFETY: `AtomicU64` has the size and alignment of `u64`. These slots were
                // published by the producer (gate or `published` loaded with Acquire by the
                // caller, after its Release stores), and it will not write them again until
                // they read CLEAR, which happens only in the clearing loop below, after `f`
                // returns and the view is gone. Concurrent atomic *loads* by a blocked producer
                // are reads, not a race.
                let view = unsafe {
                    std::slice::from_raw_parts(block.as_ptr().cast::<u64>(), block.len())
                };
                f(view);
            }
            #[cfg(loom)]
            {
                let copy: Vec<u64> = block.iter().map(|s| s.load(Ordering::Relaxed)).collect();
                f(&copy);
            }
            for s in block {
                // Release: our reads above happen-before the producer's next write of this slot.
                s.store(CLEAR, Ordering::Release);
            }
        }
        len
    }

    /// Exhaustive mode only: deliver every event the producer has written so far, without
    /// waiting for chunk gates or a flush — for shutdown and snapshots, when the producer lives
    /// in another thread that cannot be asked to flush. Returns the number delivered.
    ///
    /// Sound because in exhaustive mode a slot is `CLEAR` until the producer writes it and the
    /// producer writes slots strictly in order: the run of non-`CLEAR` slots from the consumer's
    /// position is exactly the unread events, and the producer never writes a non-`CLEAR` slot,
    /// so the view handed out cannot change under `f`. Sampling mode has no such invariant
    /// (slots are never cleared) and returns 0.
    pub fn drain_live(&mut self, f: impl FnMut(&[u64])) -> u64 {
        self.drain_live_to(u64::MAX, f)
    }

    /// [`drain_live`](Self::drain_live), stopping at absolute position `target` (see
    /// [`position`](Self::position)) even if a live producer keeps writing: a snapshot reads
    /// what was there when it was asked for, not everything the producer adds while it reads.
    pub fn drain_live_to(&mut self, target: u64, mut f: impl FnMut(&[u64])) -> u64 {
        if self.sampling {
            return 0;
        }
        let mut total = 0u64;
        while self.pos < target {
            // As in `poll_with`. A switch not yet seen here leaves the consumer on slots it
            // cleared itself (`CLEAR`): it stops, and the next call goes on.
            if self.pos == self.seg.switch_at.load(Ordering::Acquire) {
                self.leave_segment();
                continue;
            }
            let seg = &*self.seg;
            let idx = ((self.pos - self.seg_start) % seg.capacity as u64) as usize;
            let chunk_end = idx - idx % seg.chunk + seg.chunk;
            let chunk_end = chunk_end.min(idx.saturating_add((target - self.pos) as usize));
            let mut end = idx;
            // Acquire per slot: pairs with the producer's Release store of that slot.
            while end < chunk_end && seg.slot(end).load(Ordering::Acquire) != CLEAR {
                end += 1;
            }
            if end == idx {
                return total;
            }
            let n = self.take(idx, end - idx, &mut f);
            self.pos += n as u64;
            self.stats.delivered += n as u64;
            total += n as u64;
        }
        total
    }

    /// Absolute position of the next unread event: events the producer wrote before it have
    /// been delivered (or, sampling, skipped as overwritten).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Sampling: handoff blocks read or skipped so far (0 in exhaustive mode).
    pub fn blocks_read(&self) -> u64 {
        self.next
    }

    /// Sampling: handoff blocks the producer has finished so far; every one is read or
    /// counted as lapped by the time [`blocks_read`](Self::blocks_read) reaches this (0 in
    /// exhaustive mode and at rate 0).
    pub fn blocks_done(&self) -> u64 {
        self.shared
            .handoff
            .as_ref()
            .map_or(0, |h| h.seq.done.load(Ordering::Acquire))
    }

    /// Sampling: how many events the producer may have written past
    /// [`producer_stats`](Self::producer_stats)`.pushed` once every finished block is read:
    /// the chunk it is in (more if the last block was lost: the session's report also bounds
    /// a live ring by a lap), or, with no handoff (rate 0), a lap past its last wrap. 0 in
    /// exhaustive mode.
    pub fn unread_bound(&self) -> u64 {
        match (self.sampling, self.shared.handoff.is_some()) {
            (false, _) => 0,
            (true, true) => self.seg.chunk as u64,
            (true, false) => self.seg.capacity as u64,
        }
    }

    /// The most events the ring can hold unread: its size, or, for a ring that grows, the
    /// sum of its sizes (a producer can run a segment of each ahead of the consumer).
    pub fn capacity_slots(&self) -> usize {
        self.shared.most_unread
    }

    /// Event slots of the segment being read (a fixed ring's whole size).
    pub fn segment_slots(&self) -> usize {
        self.seg.capacity
    }

    /// Event slots of the largest segment the producer has written (a fixed ring's size).
    pub fn largest_slots(&self) -> usize {
        self.shared.counters.largest.load(Ordering::Relaxed) as usize
    }

    /// How often the producer moved to a larger segment, and to a smaller one (0 for a ring
    /// of fixed size).
    pub fn resizes(&self) -> (u64, u64) {
        let c = &self.shared.counters;
        (
            c.grown.load(Ordering::Relaxed),
            c.shrunk.load(Ordering::Relaxed),
        )
    }

    /// How often the ring's memory grant refused it a larger segment, and how long its
    /// producer then blocked at the size it kept: its wait for ring memory (0 for a ring of
    /// fixed size).
    pub fn memory_waits(&self) -> (u64, std::time::Duration) {
        let c = &self.shared.counters;
        (
            c.refused.load(Ordering::Relaxed),
            std::time::Duration::from_nanos(c.memory_wait_ns.load(Ordering::Relaxed)),
        )
    }

    /// The producer's counters as the producer last mirrored them (blocks, time blocked and
    /// drops are exact; `pushed` is the consumer's delivered count in exhaustive mode and, in
    /// sampling mode, the farthest of the producer's last published or wrapped position and
    /// the end of the last handoff block read).
    pub fn producer_stats(&self) -> ProducerStats {
        let c = &self.shared.counters;
        let pushed = if self.sampling {
            (self.shared.reached.load(Ordering::Acquire))
                .max(self.shared.published.load(Ordering::Acquire))
                .max(self.pos)
        } else {
            self.stats.delivered
        };
        ProducerStats {
            pushed,
            blocks: c.blocks.load(Ordering::Relaxed),
            blocked: std::time::Duration::from_nanos(c.blocked_ns.load(Ordering::Relaxed)),
            dropped: c.dropped.load(Ordering::Relaxed),
        }
    }

    /// Sampling mode: change the fraction of each chunk analyzed, clamped to `0.0` up to the
    /// rate the ring was made with (its handoff blocks hold that much of a chunk). The
    /// producer takes it up at its next chunk start. Used by adaptive sampling. No effect in
    /// exhaustive mode.
    pub fn set_rate(&mut self, rate: f64) {
        if self.sampling {
            self.rate = rate.clamp(0.0, self.max_rate);
            if let Some(h) = self.shared.handoff.as_ref() {
                h.rate.store(self.rate.to_bits(), Ordering::Relaxed);
            }
        }
    }

    /// The sampling rate in force (1.0 in exhaustive mode).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whether this consumer samples.
    pub fn is_sampling(&self) -> bool {
        self.sampling
    }

    /// Slots per chunk of the segment being read.
    pub fn chunk_slots(&self) -> usize {
        self.seg.chunk
    }

    /// Counters so far.
    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    /// Whether the producer has closed (its remaining events may still be unread).
    pub fn producer_closed(&self) -> bool {
        self.shared.ends.producer_closed()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.shared.ends.consumer_dropped();
    }
}
