//! cabprof's time analysis against a sampling profiler on a crate nobody here wrote.
//!
//! The same workload (compress about 6 MiB of text at level 6, decompress it, three times)
//! runs through two builds of miniz_oxide 0.9.1: the crate from crates.io ([`Plain`], binary
//! `plain`, which `perf record` samples) and a copy with `#[cabprof::profile]` on its functions
//! and `impl` blocks ([`Profiled`], binary `profiled`, run under `CABPROF=1
//! CABPROF_ANALYSES=time`). `benches/self_shares/` compares the two profiles; see the
//! README.

// The copy names `alloc::...` and `crate::alloc::...`, as it did at its own crate root.
extern crate alloc;

// The copied code keeps its own style and documentation: the workspace's documentation and
// visibility lints, and clippy's style and complexity groups, are not what it was written
// against (clippy's correctness, suspicious and perf lints stay on). `unexpected_cfgs`: it
// reads `cfg!(fuzzing)`, which its own manifest declares.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unexpected_cfgs,
    clippy::style,
    clippy::complexity
)]
pub mod miniz_oxide;

use std::time::{Duration, Instant};

/// Bytes of input text.
pub const INPUT_BYTES: usize = 6 << 20;
/// Compress-then-decompress rounds per process.
pub const ROUNDS: usize = 3;
/// miniz_oxide's compression level (its default).
pub const LEVEL: u8 = 6;

/// One build of the crate under test: the two entry points the workload calls.
pub trait Codec {
    /// What the binary is called, for its output.
    const NAME: &'static str;
    /// `deflate::compress_to_vec`.
    fn compress(input: &[u8], level: u8) -> Vec<u8>;
    /// `inflate::decompress_to_vec`; a failure is a bug of the build, reported as text.
    fn decompress(input: &[u8]) -> Result<Vec<u8>, String>;
}

/// miniz_oxide 0.9.1 from crates.io.
#[derive(Debug)]
pub struct Plain;

impl Codec for Plain {
    const NAME: &'static str = "plain";
    fn compress(input: &[u8], level: u8) -> Vec<u8> {
        ::miniz_oxide::deflate::compress_to_vec(input, level)
    }
    fn decompress(input: &[u8]) -> Result<Vec<u8>, String> {
        ::miniz_oxide::inflate::decompress_to_vec(input).map_err(|e| e.to_string())
    }
}

/// The annotated copy in [`miniz_oxide`].
#[derive(Debug)]
pub struct Profiled;

impl Codec for Profiled {
    const NAME: &'static str = "profiled";
    fn compress(input: &[u8], level: u8) -> Vec<u8> {
        crate::miniz_oxide::deflate::compress_to_vec(input, level)
    }
    fn decompress(input: &[u8]) -> Result<Vec<u8>, String> {
        crate::miniz_oxide::inflate::decompress_to_vec(input).map_err(|e| e.to_string())
    }
}

/// Deterministic text-like input of `len` bytes: words from a fixed list picked by a
/// xorshift64 generator with a fixed seed, with punctuation and line breaks, so that both
/// builds (and every process) compress exactly the same bytes, and the matcher meets the
/// repeats and literal runs of prose rather than random bytes or one repeated block.
pub fn text(len: usize) -> Vec<u8> {
    const WORDS: [&str; 64] = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "had",
        "they",
        "you",
        "were",
        "their",
        "one",
        "all",
        "we",
        "can",
        "her",
        "has",
        "there",
        "been",
        "if",
        "more",
        "when",
        "will",
        "would",
        "who",
        "so",
        "no",
        "compression",
        "profiler",
        "function",
        "sampling",
        "deflate",
        "window",
        "literal",
        "distance",
        "huffman",
        "table",
        "buffer",
        "stream",
        "window",
        "symbol",
        "length",
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(len + 32);
    let mut words_in_line = 0;
    while out.len() < len {
        let r = next();
        out.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
        words_in_line += 1;
        match (r >> 32) % 16 {
            0 => out.extend_from_slice(b". "),
            1 => out.extend_from_slice(b", "),
            _ => out.push(b' '),
        }
        if words_in_line >= 12 + (r >> 48) % 6 {
            out.push(b'\n');
            words_in_line = 0;
        }
    }
    out.truncate(len);
    out
}

/// The wall time of each phase of one process, in the order run.
#[derive(Clone, Debug, Default)]
pub struct Phases {
    /// `compress_to_vec` per round.
    pub compress: Vec<Duration>,
    /// `decompress_to_vec` per round.
    pub decompress: Vec<Duration>,
}

/// The workload: [`ROUNDS`] times compress [`INPUT_BYTES`] of [`text`] at [`LEVEL`], then
/// decompress it, each phase timed around the one call and printed as it ends (the bench
/// reads these lines: `compress round 1: <ns> ns ...`). The round trip is checked outside the
/// timed phases. Panics if it does not round-trip: the comparison would be meaningless.
pub fn run<C: Codec>() -> Phases {
    let input = text(INPUT_BYTES);
    let mut phases = Phases::default();
    for round in 1..=ROUNDS {
        let start = Instant::now();
        let packed = C::compress(&input, LEVEL);
        let took = start.elapsed();
        println!(
            "compress round {round}: {} ns ({} -> {} bytes, {})",
            took.as_nanos(),
            input.len(),
            packed.len(),
            C::NAME
        );
        phases.compress.push(took);

        let start = Instant::now();
        let unpacked = C::decompress(&packed);
        let took = start.elapsed();
        let unpacked = unpacked
            .unwrap_or_else(|e| panic!("{}: decompressing round {round} failed: {e}", C::NAME));
        println!(
            "decompress round {round}: {} ns ({} -> {} bytes, {})",
            took.as_nanos(),
            packed.len(),
            unpacked.len(),
            C::NAME
        );
        phases.decompress.push(took);
        assert!(
            unpacked == input,
            "{}: round {round} did not give the input back",
            C::NAME
        );
    }
    phases
}
