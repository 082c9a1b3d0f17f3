//! The consumer half of the CAB ring: the analyzer takes whole chunks two chunks behind the
//! producer (exhaustive) or samples bursts out of them (sampling), and clears what it read.

use super::*;

/// The analyzer side of a CAB ring. See the [module docs](super) for the contract.
pub struct Consumer {
    pub(super) shared: Arc<Shared>,
    /// Absolute position of the next unread event (events ever written before it).
    /// Chunk-aligned except after reading a flushed partial chunk.
    pub(super) pos: u64,
    pub(super) sampling: bool,
    /// Fraction of each chunk analyzed (1.0 in exhaustive mode).
    pub(super) rate: f64,
    /// Slots per sampling burst.
    pub(super) burst: usize,
    /// Sampling bursts are copied here: the producer may overwrite a chunk while it is read,
    /// so handing out a view of the ring itself would be a data race. Empty when exhaustive.
    pub(super) scratch: Vec<u64>,
    pub(super) stats: ConsumerStats,
}

impl Consumer {
    /// Deliver the next ready chunk to `f` as a borrowed slice and clear it.
    ///
    /// Exhaustive: `f` gets the rest of the current chunk in one zero-copy slice once the
    /// producer has moved two chunks on, or the flushed part of it after a flush/close.
    /// Sampling: `f` gets each sampled burst (copied out of the ring, see `scratch`).
    pub fn poll_with(&mut self, mut f: impl FnMut(&[u64])) -> Poll {
        if self.sampling {
            return self.poll_sampling(&mut f);
        }
        let sh = &*self.shared;
        let idx = (self.pos % sh.capacity as u64) as usize;
        let start = idx - idx % sh.chunk;
        let chunk_end = self.pos - (idx - start) as u64 + sh.chunk as u64; // absolute
        let gate = (start + 2 * sh.chunk) % sh.capacity;
        // Exhaustive: the gate's previous occupant (one lap earlier) was consumed and cleared
        // before anything at `pos`, so a non-CLEAR gate was written in this lap: the producer
        // has passed the whole of this chunk.
        let end = if sh.slot(gate).load(Ordering::Acquire) != CLEAR {
            chunk_end
        } else {
            // Acquire `closed` before `published`: a closed producer's final position is then
            // the one we read.
            let closed = sh.closed.load(Ordering::Acquire);
            let published = sh.published.load(Ordering::Acquire);
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
        Poll::Consumed(delivered)
    }

    /// Sampling mode (paper Fig. 5b), made safe against a producer that laps the consumer:
    ///
    /// - The producer's position is at least `lower`: the last beacon, wrap or flush. If that
    ///   is more than a whole ring past `pos`, the slot at `pos` was overwritten: whole laps are
    ///   skipped (ring indices unchanged) and counted as lapped.
    /// - A chunk is ready when `lower` is two chunks past its start. No slot's content is
    ///   trusted to say so: a slot may hold a word of any earlier lap.
    /// - After reading, the chunk was overwritten meanwhile exactly if a beacon shows the
    ///   producer entered it again (see `sample`): counted as lapped. `CLEAR` and `MAGIC` words
    ///   are never delivered.
    /// - After close, nothing past the producer's final position is read.
    fn poll_sampling(&mut self, f: &mut impl FnMut(&[u64])) -> Poll {
        let sh = &*self.shared;
        let cap = sh.capacity as u64;
        let chunks = (sh.capacity / sh.chunk) as u64;
        let closed = sh.closed.load(Ordering::Acquire);
        let published = sh.published.load(Ordering::Acquire);
        let lower = sh.reached.load(Ordering::Acquire).max(published);
        if lower > self.pos + cap {
            let skipped = (lower - self.pos - cap).div_ceil(cap);
            self.pos += skipped * cap;
            self.stats.chunks_lapped += skipped * chunks;
        }
        let idx = (self.pos % cap) as usize;
        let start = idx - idx % sh.chunk;
        let chunk_start = self.pos - (idx - start) as u64; // absolute
        let chunk_end = chunk_start + sh.chunk as u64;
        let mut end = if lower >= chunk_start + 2 * sh.chunk as u64 {
            chunk_end
        } else if published > self.pos {
            published.min(chunk_end)
        } else if closed {
            return Poll::Closed;
        } else {
            return Poll::Empty;
        };
        if closed {
            end = end.min(published);
        }
        let len = (end - self.pos) as usize;
        self.stats.chunks += 1;
        let delivered = self.sample(idx, start, len, f);
        self.pos = end;
        self.stats.delivered += delivered as u64;
        Poll::Consumed(delivered)
    }

    /// Exhaustive: hand out slots `idx .. idx + len` and clear them.
    fn take(&mut self, idx: usize, len: usize, mut f: impl FnMut(&[u64])) -> usize {
        // The chunk is handed out in L1-sized blocks, each cleared right after `f` has read
        // it, while its lines are still in the consumer's L1 (the paper clears each event right
        // after processing it, for the same temporal locality). `f` sees the whole chunk, in
        // order, as consecutive zero-copy slices.
        for block in self.shared.slots[idx..idx + len].chunks(CLEAR_BLOCK) {
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

    /// Sampling: read `rate` of slots `idx .. idx + len` (of the chunk starting at ring index
    /// `start`) in bursts; count the chunk as lapped if the producer entered it again before
    /// the reading was over.
    ///
    /// Why the count is right even when the producer writes the very words it wrote a lap
    /// before (the ABA a compare-exchange on the old first word would fall for): the consumer
    /// never judges a slot by its content. Let the chunk start at absolute position `s`
    /// (`chunk_start` below) and be read in lap `s / capacity`.
    ///
    /// - The producer writes the chunk's next lap (from `s + capacity` on) only after its
    ///   beacon `reached = s + capacity`: every chunk start it reaches is armed
    ///   (`Producer::enter_chunk`), and the beacon is stored, Release, before the slot.
    /// - Every slot load here is Acquire. If one returns a word of that next lap (or any later
    ///   one), it synchronizes with that word's store, so the beacon happened before the load
    ///   of `reached` below, which therefore returns at least `s + capacity`: counted. A word
    ///   of an earlier lap cannot be returned: the chunk was opened on a beacon, wrap or flush
    ///   (Acquire) that the producer stored after writing this lap's words.
    /// - The first slot may hold `MAGIC`: the producer armed it on entering the chunk before
    ///   (`s + capacity - chunk`) or a later one, after moving the word there to
    ///   `firsts[start / chunk]` (Release before the `MAGIC`, so the Acquire load of `MAGIC`
    ///   makes it visible). That word is this lap's first event unless a later arming
    ///   replaced it, and that arming follows the beacon at `s + capacity`, seen below through
    ///   the Acquire load of the side word: counted again.
    /// - Conversely, a chunk the producer has not entered again when `reached` is read holds
    ///   only this lap's words in every slot read: it is not counted. The one overcount is a
    ///   producer that beacons between the last slot load and the load of `reached`.
    ///
    /// The loom model `cab_sampling_lap_is_counted_even_with_identical_first_words`
    /// (tests/loom.rs) checks this under every interleaving it explores.
    fn sample(
        &mut self,
        idx: usize,
        start: usize,
        len: usize,
        f: &mut impl FnMut(&[u64]),
    ) -> usize {
        let sh = &*self.shared;
        let chunk_start = self.pos - (idx - start) as u64; // absolute
        let want = (self.rate * len as f64).round() as usize;
        let most = len.div_ceil(self.burst);
        let bursts = want.div_ceil(self.burst).min(most);
        // With fewer bursts than fit, `stride >= burst` (bursts * burst < len), so bursts
        // never overlap; when every burst fits, read the range once, contiguously.
        let stride = if bursts == most {
            self.burst
        } else {
            len.checked_div(bursts).unwrap_or(len)
        };
        // Rotate the bursts' phase from chunk to chunk so periodic programs are not always
        // sampled at the same point of their period.
        let phase = if stride > self.burst {
            (self.stats.chunks as usize).wrapping_mul(0x9E37_79B9) % (stride - self.burst + 1)
        } else {
            0
        };
        let mut delivered = 0;
        for b in 0..bursts {
            let from = b * stride + phase;
            let n = self.burst.min(len - from);
            let mut kept = 0;
            for k in 0..n {
                // Acquire: if this load sees a word of the producer's next lap, its beacon
                // there is visible to the load of `reached` below (see above).
                let at = idx + from + k;
                let mut w = sh.slot(at).load(Ordering::Acquire);
                if w == MAGIC && at == start {
                    // Armed by the producer: the chunk's first event is in the side slot.
                    w = sh.firsts[start / sh.chunk].load(Ordering::Acquire);
                }
                if w != CLEAR && w != MAGIC {
                    self.scratch[kept] = w;
                    kept += 1;
                }
            }
            if kept > 0 {
                f(&self.scratch[..kept]);
                delivered += kept;
            }
        }
        // The producer entered this chunk again (see above). A flush past `s + capacity` needs
        // no test of its own: the producer beaconed on its way there.
        let lapped = sh.reached.load(Ordering::Acquire) >= chunk_start + sh.capacity as u64;
        if lapped {
            self.stats.chunks_lapped += 1;
        }
        delivered
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
        let cap = self.shared.capacity;
        let mut total = 0u64;
        while self.pos < target {
            let idx = (self.pos % cap as u64) as usize;
            let chunk_end = idx - idx % self.shared.chunk + self.shared.chunk;
            let chunk_end = chunk_end.min(idx.saturating_add((target - self.pos) as usize));
            let mut end = idx;
            // Acquire per slot: pairs with the producer's Release store of that slot.
            while end < chunk_end && self.shared.slot(end).load(Ordering::Acquire) != CLEAR {
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

    /// Event slots in the ring.
    pub fn capacity_slots(&self) -> usize {
        self.shared.capacity
    }

    /// The producer's counters as the producer last mirrored them (blocks, time blocked and
    /// drops are exact; `pushed` is the consumer's delivered count in exhaustive mode and the
    /// producer's last published or wrapped position in sampling mode).
    pub fn producer_stats(&self) -> ProducerStats {
        let c = &self.shared.counters;
        let pushed = if self.sampling {
            (self.shared.reached.load(Ordering::Acquire))
                .max(self.shared.published.load(Ordering::Acquire))
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

    /// Sampling mode: change the fraction of each chunk analyzed (clamped to `0.0..=1.0`).
    /// Used by adaptive sampling. No effect in exhaustive mode.
    pub fn set_rate(&mut self, rate: f64) {
        if self.sampling {
            self.rate = rate.clamp(0.0, 1.0);
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

    /// Slots per chunk.
    pub fn chunk_slots(&self) -> usize {
        self.shared.chunk
    }

    /// Counters so far.
    pub fn stats(&self) -> ConsumerStats {
        self.stats
    }

    /// Whether the producer has closed (its remaining events may still be unread).
    pub fn producer_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        // Release so a producer that sees `false` stops waiting; runs on unwind too.
        self.shared.consumer_alive.store(false, Ordering::Release);
    }
}
