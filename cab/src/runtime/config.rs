//! How a session runs, as plain data ([`RuntimeConfig`]), its `CABPROF_*` environment
//! variables (one small parser per variable) and the rules it is checked against.

use super::design::BufferDesign;
use super::RunMode;
use crate::config::{parse_bytes, ConfigError, Mode, RingConfig, Setting, WORD_BYTES};

/// Everything the runtime needs to start a session. Plain data: set the fields, or start from
/// [`Default`] and override from the environment with [`from_env`](Self::from_env).
/// [`Session::start`](super::Session::start) validates it.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeConfig {
    /// How events travel (default exhaustive).
    pub mode: RunMode,
    /// The buffer design (default CAB). The baselines need exhaustive mode and power-of-two
    /// sizes.
    pub design: BufferDesign,
    /// Ring size in bytes; `None`: 16 chunks. Exhaustive CAB rings start smaller and grow up
    /// to it: the largest size.
    pub buffer_bytes: Option<usize>,
    /// Exhaustive CAB: the size a thread's ring starts at (the smallest of its sizes of at
    /// least this), outside the ring budget; `None`: 16 KiB. At or above `buffer_bytes`, rings
    /// keep one size, charged to the budget whole.
    pub buffer_start_bytes: Option<usize>,
    /// Chunk size in bytes; `None`: 4 × the host's L1d
    /// ([`recommended_chunk_bytes`](crate::hw::recommended_chunk_bytes)), an eighth of that in
    /// sampling mode ([`recommended_sampling_chunk_bytes`](crate::hw::recommended_sampling_chunk_bytes))
    /// or one burst if that is larger (at most the exhaustive default).
    pub chunk_bytes: Option<usize>,
    /// Memory all rings of the session may hold together, in bytes; `None`: the larger of
    /// [`DEFAULT_RING_MEMORY`] and four rings. A thread whose new ring would exceed it waits
    /// (exhaustive, at most [`RING_MEMORY_WAIT`]) or goes without a ring, its events dropped
    /// and counted; see the [module docs](super).
    pub ring_memory: Option<usize>,
    /// Analyzer threads, `1..=64` (default 1).
    pub analyzers: usize,
    /// Pin analyzer threads to their own cores (the last ones, never core 0; default on).
    pub pin: bool,
    /// Also pin the thread that starts the session to core 0, as the paper's experiments do
    /// (default off). Threads it spawns afterwards inherit that affinity, so leave this off
    /// for multi-threaded programs.
    pub pin_application: bool,
    /// Back rings of at least 2 MiB with transparent huge pages (Linux; default on): see
    /// [`RingConfig::huge_pages`].
    pub huge_pages: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            mode: RunMode::Exhaustive,
            design: BufferDesign::Cab,
            buffer_bytes: None,
            buffer_start_bytes: None,
            chunk_bytes: None,
            ring_memory: None,
            analyzers: 1,
            pin: true,
            pin_application: false,
            huge_pages: true,
        }
    }
}

/// The environment variables [`RuntimeConfig::from_env`] reads: name, values, the facade's
/// builder function and meaning. `cabprof::SETTINGS` lists them with the facade's own.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "CABPROF_MODE",
        values: "exhaustive | sampling | sequential (default exhaustive)",
        builder: "mode",
        meaning: "how events reach the analyses",
    },
    Setting {
        name: "CABPROF_RATE",
        values: "0.0..=1.0 (default 0.1)",
        builder: "sampling",
        meaning: "the sampling rate; implies sampling",
    },
    Setting {
        name: "CABPROF_BURST",
        values: "events, 1..=chunk (default 8)",
        builder: "mode",
        meaning: "the sampling burst; implies sampling",
    },
    Setting {
        name: "CABPROF_ADAPTIVE",
        values: "0 | 1 | true | false (default 0)",
        builder: "mode",
        meaning: "lower the rate while the analyzer lags; implies sampling",
    },
    Setting {
        name: "CABPROF_BUFFER",
        values: "bytes, K/M/G (default 16 chunks)",
        builder: "buffer_bytes",
        meaning: "the largest ring size",
    },
    Setting {
        name: "CABPROF_BUFFER_START",
        values: "bytes, K/M/G (default 16K)",
        builder: "buffer_start_bytes",
        meaning: "the size exhaustive CAB rings start at, outside the budget",
    },
    Setting {
        name: "CABPROF_CHUNK",
        values: "bytes, K/M/G (default 4 × L1d)",
        builder: "chunk_bytes",
        meaning: "the chunk size",
    },
    Setting {
        name: "CABPROF_RING_MEMORY",
        values: "bytes, K/M/G (default 256M or four rings)",
        builder: "ring_memory",
        meaning: "the memory all rings may hold together",
    },
    Setting {
        name: "CABPROF_ANALYZERS",
        values: "1..=64 (default 1)",
        builder: "analyzers",
        meaning: "analyzer threads",
    },
    Setting {
        name: "CABPROF_PIN",
        values: "0 | 1 | true | false (default 1)",
        builder: "pin",
        meaning: "pin analyzer threads to cores",
    },
    Setting {
        name: "CABPROF_HUGE_PAGES",
        values: "0 | 1 | true | false (default 1)",
        builder: "huge_pages",
        meaning: "back rings of 2 MiB or more with huge pages (Linux)",
    },
    Setting {
        name: "CABPROF_BUFFER_DESIGN",
        values: "cab | fastforward | nway (default cab)",
        builder: "buffer_design",
        meaning: "the ring's design (the baselines: exhaustive only)",
    },
];

/// The sampling settings before `CABPROF_MODE` decides whether they apply.
struct SamplingVars {
    rate: f64,
    burst_words: usize,
    adaptive: bool,
    /// Whether any sampling variable was set (which implies sampling mode).
    given: bool,
}

impl SamplingVars {
    fn mode(&self) -> RunMode {
        RunMode::Sampling {
            rate: self.rate,
            burst_words: self.burst_words,
            adaptive: self.adaptive,
        }
    }
}

fn parse_bool(var: &str, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(ConfigError::new(var, text, "0, 1, true or false")),
    }
}

fn parse_rate(text: &str) -> Result<f64, ConfigError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| ConfigError::new("CABPROF_RATE", text, "a number in 0.0..=1.0"))
}

fn parse_burst(text: &str) -> Result<usize, ConfigError> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| ConfigError::new("CABPROF_BURST", text, "a whole number of events >= 1"))
}

fn parse_mode(text: &str, sampling: RunMode) -> Result<RunMode, ConfigError> {
    Ok(match text.trim().to_ascii_lowercase().as_str() {
        "exhaustive" => RunMode::Exhaustive,
        "sampling" => sampling,
        "sequential" => RunMode::Sequential,
        "instrument-only" => RunMode::InstrumentOnly,
        "enqueue-only" => RunMode::EnqueueOnly,
        _ => {
            return Err(ConfigError::new(
                "CABPROF_MODE",
                text,
                "exhaustive, sampling or sequential (or instrument-only, enqueue-only)",
            ))
        }
    })
}

fn parse_analyzers(text: &str) -> Result<usize, ConfigError> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=64).contains(n))
        .ok_or_else(|| ConfigError::new("CABPROF_ANALYZERS", text, "1..=64"))
}

impl RuntimeConfig {
    /// Override settings from `CABPROF_*` variables in the process environment (see
    /// [`SETTINGS`]). A bad value is an error naming the variable and what it allows.
    pub fn from_env(&mut self) -> Result<(), ConfigError> {
        self.from_vars(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env) with any lookup (tests use a map).
    pub fn from_vars(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let sampling = self.sampling_vars(&get)?;
        if let Some(v) = get("CABPROF_MODE") {
            self.mode = parse_mode(&v, sampling.mode())?;
        } else if sampling.given {
            self.mode = sampling.mode();
        }
        if let Some(v) = get("CABPROF_BUFFER") {
            self.buffer_bytes = Some(parse_bytes("CABPROF_BUFFER", &v)?);
        }
        if let Some(v) = get("CABPROF_BUFFER_START") {
            self.buffer_start_bytes = Some(parse_bytes("CABPROF_BUFFER_START", &v)?);
        }
        if let Some(v) = get("CABPROF_CHUNK") {
            self.chunk_bytes = Some(parse_bytes("CABPROF_CHUNK", &v)?);
        }
        if let Some(v) = get("CABPROF_RING_MEMORY") {
            self.ring_memory = Some(parse_bytes("CABPROF_RING_MEMORY", &v)?);
        }
        if let Some(v) = get("CABPROF_ANALYZERS") {
            self.analyzers = parse_analyzers(&v)?;
        }
        if let Some(v) = get("CABPROF_BUFFER_DESIGN") {
            self.design = BufferDesign::parse("CABPROF_BUFFER_DESIGN", &v)?;
        }
        if let Some(v) = get("CABPROF_PIN") {
            self.pin = parse_bool("CABPROF_PIN", &v)?;
        }
        if let Some(v) = get("CABPROF_HUGE_PAGES") {
            self.huge_pages = parse_bool("CABPROF_HUGE_PAGES", &v)?;
        }
        Ok(())
    }

    /// `CABPROF_RATE`, `CABPROF_BURST` and `CABPROF_ADAPTIVE` over the current sampling
    /// settings (or the defaults: 10 %, one cache line, not adaptive).
    fn sampling_vars(
        &self,
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<SamplingVars, ConfigError> {
        let mut s = match self.mode {
            RunMode::Sampling {
                rate,
                burst_words,
                adaptive,
            } => SamplingVars {
                rate,
                burst_words,
                adaptive,
                given: false,
            },
            _ => SamplingVars {
                rate: 0.1,
                burst_words: 8,
                adaptive: false,
                given: false,
            },
        };
        if let Some(v) = get("CABPROF_RATE") {
            s.rate = parse_rate(&v)?;
            s.given = true;
        }
        if let Some(v) = get("CABPROF_BURST") {
            s.burst_words = parse_burst(&v)?;
            s.given = true;
        }
        if let Some(v) = get("CABPROF_ADAPTIVE") {
            s.adaptive = parse_bool("CABPROF_ADAPTIVE", &v)?;
            s.given = true;
        }
        Ok(s)
    }

    /// The ring configuration this session will use, validated against the buffer design's
    /// rules.
    pub fn ring_config(&self) -> Result<RingConfig, ConfigError> {
        let chunk = self.chunk_bytes.unwrap_or_else(|| match self.mode {
            // Large enough for one burst, up to the exhaustive default: a burst that fits
            // that chunk is never refused because sampling rings are smaller.
            RunMode::Sampling { burst_words, .. } => crate::hw::recommended_sampling_chunk_bytes()
                .max(
                    burst_words
                        .saturating_mul(WORD_BYTES)
                        .min(crate::hw::recommended_chunk_bytes()),
                ),
            _ => crate::hw::recommended_chunk_bytes(),
        });
        let buffer = match self.buffer_bytes {
            Some(buffer) => buffer,
            None => chunk.checked_mul(DEFAULT_CHUNKS).ok_or_else(|| {
                ConfigError::new(
                    "chunk_bytes (CABPROF_CHUNK)",
                    chunk,
                    format!(
                        "at most {} when the ring size is not given ({DEFAULT_CHUNKS} chunks \
                         must fit in a usize)",
                        usize::MAX / DEFAULT_CHUNKS
                    ),
                )
            })?,
        };
        let mode = match self.mode {
            RunMode::Sampling {
                rate, burst_words, ..
            } => Mode::Sampling { rate, burst_words },
            _ => Mode::Exhaustive,
        };
        let cfg = RingConfig::new(buffer, chunk)
            .with_mode(mode)
            .with_huge_pages(self.huge_pages);
        self.design.validate(&cfg).map_err(naming_variable)?;
        Ok(cfg)
    }

    /// The memory budget of all rings together: [`ring_memory`](Self::ring_memory), or the
    /// larger of [`DEFAULT_RING_MEMORY`] and four rings of `ring` (with a sampling ring's
    /// handoff: [`RingConfig::ring_memory_bytes`]).
    pub fn ring_memory_for(&self, ring: &RingConfig) -> usize {
        self.ring_memory
            .unwrap_or_else(|| DEFAULT_RING_MEMORY.max(ring.ring_memory_bytes().saturating_mul(4)))
    }

    /// Check every setting; the first broken rule is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=64).contains(&self.analyzers) {
            return Err(ConfigError::new("analyzers", self.analyzers, "1..=64"));
        }
        let ring = self.ring_config()?;
        let budget = self.ring_memory_for(&ring);
        if budget < ring.ring_memory_bytes() {
            return Err(ConfigError::new(
                "ring_memory (CABPROF_RING_MEMORY)",
                budget,
                format!(
                    "at least one ring, {} bytes: buffer_bytes = {}{} (or a smaller \
                     CABPROF_BUFFER)",
                    ring.ring_memory_bytes(),
                    ring.buffer_bytes,
                    with_handoff(&ring)
                ),
            ));
        }
        if let Some(physical) = crate::hw::physical_memory() {
            if ring.ring_memory_bytes() > physical {
                return Err(ConfigError::new(
                    "buffer_bytes (CABPROF_BUFFER)",
                    ring.buffer_bytes,
                    format!(
                        "a ring{} of at most this machine's physical memory, {physical} bytes",
                        with_handoff(&ring)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What a sampling ring adds to its buffer, for an error about its memory ("" without one).
fn with_handoff(ring: &RingConfig) -> String {
    match ring.handoff_bytes() {
        0 => String::new(),
        h => format!(" with its sampling handoff ({h} bytes)"),
    }
}

/// A ring setting's error names the variable that sets it too: `CABPROF_BUFFER=0` is
/// reported as `buffer_bytes (CABPROF_BUFFER)`, so the user finds what to change either way.
fn naming_variable(mut e: ConfigError) -> ConfigError {
    let var = match e.field.as_str() {
        "buffer_bytes" => "CABPROF_BUFFER",
        "chunk_bytes" => "CABPROF_CHUNK",
        "sampling rate" => "CABPROF_RATE",
        "burst_words" => "CABPROF_BURST",
        "buffer design" => "CABPROF_BUFFER_DESIGN",
        _ => return e,
    };
    e.field = format!("{} ({var})", e.field);
    e
}

/// Exhaustive CAB: the size a thread's ring starts at by default, outside the ring budget
/// (16 KiB: a thousand threads alive at once hold 16 MiB), before it grows while the thread
/// outpaces the analyzer, up to the ring size, each larger size charged to the budget.
pub(super) const RING_START: usize = 16 << 10;

/// Chunks per ring when only the chunk size is given: the CAB paper's 2 MB of 128 KB chunks.
const DEFAULT_CHUNKS: usize = 16;

/// The default budget of all rings together: 256 MiB, 128 of the paper's 2 MB rings (or 85
/// rings of 3 MiB, the default on a 48 KiB L1d), so a program with a hundred threads alive at
/// once never waits, while thread churn behind a slow analyzer stays far below the gigabytes
/// it would otherwise queue.
pub const DEFAULT_RING_MEMORY: usize = 256 << 20;

/// How long a thread waits, in exhaustive mode, for ring memory before it goes without a ring
/// (its events dropped and counted). Waiting longer could deadlock a program whose live
/// threads hold the whole budget while they wait for the new thread (a barrier).
pub const RING_MEMORY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
