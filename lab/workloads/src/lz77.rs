//! Workload 6, a compressor: LZ77 with hash chains (LZSS-style output), then decompression and
//! a round-trip check.
//!
//! The input is a generated server log (timestamps, levels, components, Zipf-distributed
//! message words, hex ids): text with the kind of redundancy real compressors see. The
//! compressor hashes every 3-byte prefix into chains over a 32 KB window, follows up to
//! [`MAX_CHAIN`] candidates for the longest match, and writes groups of eight items behind a
//! flag byte (a literal byte, or a 3-byte length/distance pair).
//!
//! Instrumentation: `longest_match` and `decompress` are `#[profile(paths)]` (chain walking and
//! the literal/match decode are branchy); `compress`, `insert`, `match_len`, and the
//! writer's `literal` and `copy` are `#[profile]`.

use crate::rng::Rng;
use crate::Size;
use std::fmt::Write as _;

/// Window (maximum distance), a power of two.
pub const WINDOW: usize = 1 << 15;
/// Shortest match worth encoding.
pub const MIN_MATCH: usize = 3;
/// Longest match (length - MIN_MATCH fits a byte).
pub const MAX_MATCH: usize = 258;
/// Candidates followed per position.
pub const MAX_CHAIN: usize = 24;
/// Hash table bits.
pub const HASH_BITS: u32 = 15;

/// Input bytes at `size`.
pub fn input_len(size: Size) -> usize {
    size.pick(32 << 10, 5 << 18, 12 << 20)
}

const LEVELS: [&str; 5] = ["INFO", "INFO", "DEBUG", "WARN", "ERROR"];
const COMPONENTS: [&str; 8] = [
    "http.server",
    "db.pool",
    "auth",
    "cache",
    "scheduler",
    "http.client",
    "storage.blob",
    "metrics",
];
const WORDS: [&str; 40] = [
    "request",
    "completed",
    "in",
    "ms",
    "user",
    "session",
    "opened",
    "closed",
    "connection",
    "timeout",
    "retrying",
    "after",
    "failed",
    "to",
    "acquire",
    "lock",
    "on",
    "table",
    "orders",
    "cache",
    "miss",
    "for",
    "key",
    "evicted",
    "entries",
    "job",
    "started",
    "finished",
    "with",
    "status",
    "ok",
    "error",
    "bytes",
    "written",
    "read",
    "from",
    "upstream",
    "latency",
    "high",
    "queue",
];

/// Distinct log text generated; longer inputs repeat it (far beyond the window, so the
/// compressor cannot tell).
const UNIQUE: usize = 2 << 20;

/// A generated server log of `input_len(size)` bytes, from a fixed seed.
pub fn input(size: Size) -> Vec<u8> {
    let n = input_len(size);
    let unique = log(n.min(UNIQUE));
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let take = unique.len().min(n - out.len());
        out.extend_from_slice(&unique[..take]);
    }
    out
}

fn log(n: usize) -> Vec<u8> {
    let mut rng = Rng::new(0x1277_C0DE);
    let mut s = String::with_capacity(n + 256);
    let mut t = 8 * 3600u64;
    while s.len() < n {
        t += rng.below(3);
        let _ = write!(
            s,
            "2024-03-{:02} {:02}:{:02}:{:02}.{:03} [{}] {}: ",
            1 + t / 86_400 % 28,
            t / 3600 % 24,
            t / 60 % 60,
            t % 60,
            rng.below(1000),
            rng.pick(&LEVELS),
            rng.pick(&COMPONENTS)
        );
        for i in 0..rng.range(3, 12) {
            if i > 0 {
                s.push(' ');
            }
            // Skewed towards the first words.
            let w =
                rng.below(WORDS.len() as u64) * rng.below(WORDS.len() as u64) / WORDS.len() as u64;
            s.push_str(WORDS[w as usize]);
        }
        if rng.chance(1, 2) {
            let _ = write!(s, " id={:08x}", rng.next_u64() as u32);
        }
        if rng.chance(1, 3) {
            let _ = write!(s, " took={}ms", rng.below(5000));
        }
        s.push('\n');
    }
    s.truncate(n);
    s.into_bytes()
}

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use super::{HASH_BITS, MAX_CHAIN, MAX_MATCH, MIN_MATCH, WINDOW};
        use crate::rng::mix;
        use crate::Size;

        const NONE: u32 = u32::MAX;

        /// Hash chains: `head[h]` is the latest position whose 3-byte prefix hashes to `h`,
        /// `prev[p % WINDOW]` the one before `p` with the same hash.
        struct Chains {
            head: Vec<u32>,
            prev: Vec<u32>,
        }

        #[inline]
        fn hash3(data: &[u8], pos: usize) -> usize {
            let v = (data[pos] as u32) | (data[pos + 1] as u32) << 8 | (data[pos + 2] as u32) << 16;
            (v.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
        }

        /// Length of the common prefix of `data[a..]` and `data[b..]`, at most `max`.
        $(#[$call])?
        fn match_len(data: &[u8], a: usize, b: usize, max: usize) -> usize {
            let mut n = 0;
            while n < max && data[a + n] == data[b + n] {
                n += 1;
            }
            n
        }

        impl Chains {
            $(#[$call])?
            fn insert(&mut self, data: &[u8], pos: usize) {
                if pos + MIN_MATCH <= data.len() {
                    let h = hash3(data, pos);
                    self.prev[pos % WINDOW] = self.head[h];
                    self.head[h] = pos as u32;
                }
            }

            /// The longest earlier match for `data[pos..]`: `(length, distance)`.
            $(#[$paths])?
            fn longest_match(&self, data: &[u8], pos: usize) -> (usize, usize) {
                let max = MAX_MATCH.min(data.len() - pos);
                if max < MIN_MATCH {
                    return (0, 0);
                }
                let mut cand = self.head[hash3(data, pos)];
                let (mut best, mut dist) = (0, 0);
                let mut chain = 0;
                while cand != NONE && chain < MAX_CHAIN {
                    let c = cand as usize;
                    if pos - c > WINDOW - 1 {
                        break;
                    }
                    // Only a candidate that beats the best at its last byte can be longer.
                    if data[c + best] == data[pos + best] {
                        let n = match_len(data, c, pos, max);
                        if n > best {
                            best = n;
                            dist = pos - c;
                            if n == max {
                                break;
                            }
                        }
                    }
                    let next = self.prev[c % WINDOW];
                    if next == NONE || next as usize >= c {
                        break;
                    }
                    cand = next;
                    chain += 1;
                }
                (best, dist)
            }
        }

        /// Output: a flag byte per group of eight items (bit set = match).
        struct Writer {
            out: Vec<u8>,
            flag_at: usize,
            items: u32,
        }

        impl Writer {
            fn start_item(&mut self, is_match: bool) {
                if self.items % 8 == 0 {
                    self.flag_at = self.out.len();
                    self.out.push(0);
                }
                if is_match {
                    self.out[self.flag_at] |= 1 << (self.items % 8);
                }
                self.items += 1;
            }

            $(#[$call])?
            fn literal(&mut self, b: u8) {
                self.start_item(false);
                self.out.push(b);
            }

            $(#[$call])?
            fn copy(&mut self, len: usize, dist: usize) {
                self.start_item(true);
                self.out.push((len - MIN_MATCH) as u8);
                self.out.extend_from_slice(&((dist - 1) as u16).to_le_bytes());
            }
        }

        $(#[$call])?
        fn compress(data: &[u8]) -> Vec<u8> {
            let mut chains = Chains { head: vec![NONE; 1 << HASH_BITS], prev: vec![NONE; WINDOW] };
            let mut w = Writer { out: Vec::with_capacity(data.len() / 2), flag_at: 0, items: 0 };
            let mut pos = 0;
            while pos < data.len() {
                let (len, dist) = chains.longest_match(data, pos);
                if len >= MIN_MATCH {
                    w.copy(len, dist);
                    for p in pos..pos + len {
                        chains.insert(data, p);
                    }
                    pos += len;
                } else {
                    w.literal(data[pos]);
                    chains.insert(data, pos);
                    pos += 1;
                }
            }
            w.out
        }

        $(#[$paths])?
        fn decompress(comp: &[u8], len: usize) -> Vec<u8> {
            let mut out: Vec<u8> = Vec::with_capacity(len);
            let mut i = 0;
            while i < comp.len() {
                let flags = comp[i];
                i += 1;
                for bit in 0..8 {
                    if i >= comp.len() {
                        break;
                    }
                    if flags & (1 << bit) == 0 {
                        out.push(comp[i]);
                        i += 1;
                    } else {
                        let n = comp[i] as usize + MIN_MATCH;
                        let dist = u16::from_le_bytes([comp[i + 1], comp[i + 2]]) as usize + 1;
                        i += 3;
                        let from = out.len() - dist;
                        if dist >= n {
                            out.extend_from_within(from..from + n);
                        } else {
                            for k in 0..n {
                                let b = out[from + k];
                                out.push(b);
                            }
                        }
                    }
                }
            }
            out
        }

        /// Compress the input for `size`, decompress it and check the round trip; the
        /// checksum of the compressed stream.
        pub fn run(size: Size) -> u64 {
            let data = super::input(std::hint::black_box(size));
            let comp = compress(&data);
            let back = decompress(&comp, data.len());
            assert!(back == data, "LZ77 round trip failed");
            let mut h = mix(data.len() as u64, comp.len() as u64);
            let mut acc = 0xCBF2_9CE4_8422_2325u64;
            for &b in &comp {
                acc = (acc ^ b as u64).wrapping_mul(0x100_0000_01B3);
            }
            h = mix(h, acc);
            h
        }
    };
}

twins!(code);
