//! Ring geometry and mode, validated before a ring is made.

use std::fmt;

/// One machine word per event.
pub const WORD_BYTES: usize = 8;
/// The smallest chunk: one x86-64 cache line. A chunk smaller than a line would put producer
/// and consumer on the same line, which CAB exists to avoid (Ha et al. 2009, §3.1.3).
pub const MIN_CHUNK_BYTES: usize = 64;
/// The fewest chunks a ring may have. The consumer stays two chunks behind the producer and the
/// blocked producer waits for two free chunks ahead, so fewer than four leaves no room to work.
pub const MIN_CHUNKS: usize = 4;

/// What the consumer does with a chunk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Every event is delivered, in order, once; a full ring blocks the producer.
    Exhaustive,
    /// The producer never blocks and hands `rate` of each chunk, in bursts of `burst_words`
    /// consecutive events, to the consumer (CAB: copied into the ring's handoff), which
    /// analyzes them and counts what it lost.
    Sampling {
        /// Fraction of each chunk analyzed, `0.0..=1.0`.
        rate: f64,
        /// Events per burst; default 8 (one 64-byte cache line).
        burst_words: usize,
    },
}

impl Mode {
    /// Sampling with the default burst of one cache line.
    pub fn sampling(rate: f64) -> Mode {
        Mode::Sampling {
            rate,
            burst_words: MIN_CHUNK_BYTES / WORD_BYTES,
        }
    }
}

/// Sizes of a ring, in bytes, and its mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingConfig {
    /// Total buffer size in bytes (one `u64` slot per 8 bytes).
    pub buffer_bytes: usize,
    /// Chunk size in bytes: the consumer's unit of work.
    pub chunk_bytes: usize,
    /// Exhaustive or sampling.
    pub mode: Mode,
    /// Ask for transparent huge pages for a ring of at least 2 MiB (Linux; default on): one
    /// page fault per 2 MiB on the producer's first lap instead of two per 4 KiB page, at the
    /// price of committing the ring's first 2 MiB at its first event. Off, such a ring is
    /// advised against huge pages, so it is in 4 KiB pages whatever the kernel's THP mode.
    pub huge_pages: bool,
}

impl Default for RingConfig {
    /// The paper's setting: a 2 MB buffer of 128 KB chunks, exhaustive.
    fn default() -> Self {
        RingConfig {
            buffer_bytes: 2 << 20,
            chunk_bytes: 128 << 10,
            mode: Mode::Exhaustive,
            huge_pages: true,
        }
    }
}

/// One `CABPROF_*` environment variable, as the settings tables declare it
/// ([`runtime::SETTINGS`](crate::runtime::SETTINGS) here, `cabprof::SETTINGS` for all of them):
/// its name, the values it accepts, the builder function that sets the same thing, and what it
/// does. The reference's table of variables is checked against these declarations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The variable, `CABPROF_...`.
    pub name: &'static str,
    /// The values it accepts (a range, a list, a size), with its default.
    pub values: &'static str,
    /// The `SessionBuilder` function that sets the same thing (`""`: none).
    pub builder: &'static str,
    /// What it sets.
    pub meaning: &'static str,
}

/// A configuration value out of range. Names the field, the value and what is allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    /// The offending field (or environment variable).
    pub field: String,
    /// The value given, as text.
    pub value: String,
    /// What would have been accepted.
    pub allowed: String,
}

impl ConfigError {
    /// Build an error for `field = value`, where `allowed` says what is accepted.
    pub fn new(
        field: impl Into<String>,
        value: impl fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        ConfigError {
            field: field.into(),
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {} = {}: allowed {}",
            self.field, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

impl RingConfig {
    /// A config of `buffer_bytes` split into `chunk_bytes` chunks, exhaustive.
    pub fn new(buffer_bytes: usize, chunk_bytes: usize) -> Self {
        RingConfig {
            buffer_bytes,
            chunk_bytes,
            mode: Mode::Exhaustive,
            huge_pages: true,
        }
    }

    /// The same sizes in `mode`.
    pub fn with_mode(self, mode: Mode) -> Self {
        RingConfig { mode, ..self }
    }

    /// The same ring with huge pages asked for or not (see [`huge_pages`](Self::huge_pages)).
    pub fn with_huge_pages(self, huge_pages: bool) -> Self {
        RingConfig { huge_pages, ..self }
    }

    /// Slots in the ring (`buffer_bytes / 8`).
    pub fn slots(&self) -> usize {
        self.buffer_bytes / WORD_BYTES
    }

    /// Slots per chunk (`chunk_bytes / 8`).
    pub fn chunk_slots(&self) -> usize {
        self.chunk_bytes / WORD_BYTES
    }

    /// Sampling: the bytes a CAB ring's handoff adds to its buffer (one block per chunk, each
    /// what the rate takes of a chunk rounded up to cache lines, and up to a line of
    /// alignment); 0 in exhaustive mode and at rate 0. Valid for a validated configuration.
    pub fn handoff_bytes(&self) -> usize {
        match self.mode {
            Mode::Exhaustive => 0,
            Mode::Sampling { rate, burst_words } => {
                let block =
                    crate::ring::handoff::block_slots(self.chunk_slots(), rate, burst_words.max(1));
                if block == 0 {
                    return 0;
                }
                let chunks = self.slots() / self.chunk_slots().max(1);
                crate::ring::handoff::area_words(block, chunks)
                    .map_or(usize::MAX, |w| w.saturating_mul(WORD_BYTES))
            }
        }
    }

    /// What a CAB ring of this configuration holds: its buffer and, sampling, its handoff
    /// ([`handoff_bytes`](Self::handoff_bytes)). What a session charges to its ring budget.
    pub fn ring_memory_bytes(&self) -> usize {
        self.buffer_bytes.saturating_add(self.handoff_bytes())
    }

    /// Check every rule of the CAB ring; the first broken one is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let c = self.chunk_bytes;
        let b = self.buffer_bytes;
        if c < MIN_CHUNK_BYTES || !c.is_multiple_of(WORD_BYTES) {
            return Err(ConfigError::new(
                "chunk_bytes",
                c,
                format!(
                    "a multiple of {WORD_BYTES} of at least {MIN_CHUNK_BYTES} (one cache line)"
                ),
            ));
        }
        if !b.is_multiple_of(c) {
            return Err(ConfigError::new(
                "buffer_bytes",
                b,
                format!("a multiple of chunk_bytes ({c})"),
            ));
        }
        if b / c < MIN_CHUNKS {
            return Err(ConfigError::new(
                "buffer_bytes",
                b,
                match c.checked_mul(MIN_CHUNKS) {
                    Some(least) => {
                        format!(
                            "at least {MIN_CHUNKS} chunks of chunk_bytes ({c}), i.e. >= {least}"
                        )
                    }
                    None => format!(
                        "at least {MIN_CHUNKS} chunks of chunk_bytes ({c}), more than a usize \
                         can hold: chunk_bytes must be at most {}",
                        usize::MAX / MIN_CHUNKS
                    ),
                },
            ));
        }
        if b / WORD_BYTES >= (1 << 40) {
            return Err(ConfigError::new("buffer_bytes", b, "less than 8 TiB"));
        }
        if let Mode::Sampling { rate, burst_words } = self.mode {
            if !(0.0..=1.0).contains(&rate) {
                return Err(ConfigError::new("sampling rate", rate, "0.0..=1.0"));
            }
            if burst_words == 0 || burst_words > self.chunk_slots() {
                return Err(ConfigError::new(
                    "burst_words",
                    burst_words,
                    format!("1..={} (one chunk)", self.chunk_slots()),
                ));
            }
        }
        Ok(())
    }

    /// Like [`validate`](Self::validate), and also require power-of-two sizes (N-way buffering
    /// and FastForward find the end of a buffer by masking).
    pub fn validate_power_of_two(&self) -> Result<(), ConfigError> {
        self.validate()?;
        if !self.buffer_bytes.is_power_of_two() {
            return Err(ConfigError::new(
                "buffer_bytes",
                self.buffer_bytes,
                "a power of two for this buffer design",
            ));
        }
        if !self.chunk_bytes.is_power_of_two() {
            return Err(ConfigError::new(
                "chunk_bytes",
                self.chunk_bytes,
                "a power of two for this buffer design",
            ));
        }
        Ok(())
    }
}

/// A byte count for people, the one rule every report and table follows: the largest binary
/// unit that divides it exactly (`48 KiB`, `2 MiB`), else one decimal in the largest unit it
/// reaches (`7.3 MiB`), else bytes (`512 B`). [`parse_bytes`] reads every exact form back.
pub fn show_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    if let Some((unit, name)) = UNITS
        .iter()
        .find(|&&(unit, _)| bytes >= unit && bytes.is_multiple_of(unit))
    {
        return format!("{} {name}", bytes / unit);
    }
    match UNITS.iter().find(|&&(unit, _)| bytes >= unit) {
        Some(&(unit, name)) => format!("{:.1} {name}", bytes as f64 / unit as f64),
        None => format!("{bytes} B"),
    }
}

/// Parse a byte count, the one rule every size setting follows (the `CABPROF_BUFFER` and
/// `CABPROF_CHUNK` variables, the sysfs cache sizes of [`hw`](crate::hw), the command line):
/// decimal digits, optionally followed by `K`, `M` or `G` (binary multiples: 2^10, 2^20,
/// 2^30, either case), optionally followed by `B` or `iB`; surrounding whitespace and spaces
/// between the number and its unit are ignored. `64`, `32K`, `48KB`, `2MiB`, `1 G` parse;
/// `0x30K`, `-4`, `4 8K`, `12Q` and sizes beyond `usize` are errors naming `field`.
pub fn parse_bytes(field: &str, text: &str) -> Result<usize, ConfigError> {
    let bad = |allowed: &str| ConfigError::new(field, text, allowed);
    const ALLOWED: &str =
        "a byte count such as 2097152, 2048K or 2M (K/M/G with optional B or iB; binary multiples)";
    let upper = text.trim().to_ascii_uppercase();
    let unit_free = upper
        .strip_suffix("IB")
        .filter(|s| s.ends_with(['K', 'M', 'G']))
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match unit_free.as_bytes().last() {
        Some(b'K') => (&unit_free[..unit_free.len() - 1], 10),
        Some(b'M') => (&unit_free[..unit_free.len() - 1], 20),
        Some(b'G') => (&unit_free[..unit_free.len() - 1], 30),
        _ => (unit_free, 0),
    };
    let digits = digits.trim_end();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(ALLOWED));
    }
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| bad(&format!("{ALLOWED}, at most {} bytes", usize::MAX)))
}

#[cfg(test)]
mod byte_tests {
    use super::{parse_bytes, show_bytes};

    #[test]
    fn shown_sizes_read_back() {
        assert_eq!(show_bytes(0), "0 B");
        assert_eq!(show_bytes(512), "512 B");
        assert_eq!(show_bytes(1536), "1.5 KiB");
        assert_eq!(show_bytes(48 << 10), "48 KiB");
        assert_eq!(show_bytes(2 << 20), "2 MiB");
        assert_eq!(show_bytes((7 << 20) + 300_000), "7.3 MiB");
        assert_eq!(show_bytes(3 << 40), "3 TiB");
        // Exact sizes below a TiB (the parser stops at G) read back as the same count.
        for n in [1u64, 1023, 1024, 4096, 1 << 20, 5 << 30, 1023 << 30] {
            let shown = show_bytes(n);
            assert_eq!(parse_bytes("n", &shown).ok(), Some(n as usize), "{shown}");
        }
    }
}
