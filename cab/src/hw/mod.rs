//! The host's L1 data cache: read from Linux sysfs, or measured with an X-Ray style probe.
//!
//! # Contract
//!
//! - [`host_l1d`] always answers: sysfs's L1d if Linux describes one, else what
//!   [`probe_host_l1d`] measures if that is plausible, else [`FALLBACK_L1D`] (32 KiB, 8-way,
//!   64 B). It is computed once per process; [`host_l1d_with_source`] says which it was.
//! - [`recommended_chunk_bytes`] is four L1d sizes (the CAB paper's choice, Ha et al. 2009
//!   §3.1.3: a chunk must outlast the producer's L1 so chunk `n` is evicted from it by the time
//!   the producer writes chunk `n + 2`; 4× leaves room for non-LRU replacement), and
//!   [`recommended_buffer_bytes`] is 16 such chunks (the paper's 2 MB buffer of 128 KB chunks
//!   on a 32 KB L1). Both pass [`RingConfig::validate`](crate::RingConfig::validate).
//! - [`from_sysfs`] / [`from_sysfs_at`] read every `index*` directory of
//!   `/sys/devices/system/cpu/cpu0/cache`; any unreadable file or malformed value is an
//!   [`HwError`] naming the file and its content. Nothing is guessed.
//! - [`probe_l1d`] runs X-Ray's cache micro-benchmarks against any [`ProbeTarget`]: real
//!   memory ([`HostMemory`]) or a deterministic LRU model ([`SimulatedCache`]), on which it
//!   recovers capacity, associativity and line size exactly, including non-power-of-two
//!   capacities such as 6 KiB 3-way or 48 KiB 12-way.
//!
//! # Modules
//!
//! - this file: the types ([`CacheGeometry`], [`CacheKind`], [`HwError`]), the host's answer
//!   ([`host_l1d`]) and the chunk sizes derived from it;
//! - `sysfs`: reading Linux's description of the caches;
//! - `xray`: the X-Ray probe ([`probe_l1d`], [`ProbeTarget`]), whose algorithm its module
//!   docs describe;
//! - `targets`: what the probe can run on, [`SimulatedCache`] and [`HostMemory`].
//!
//! ```
//! use cabprof_cab::hw::{probe_l1d, CacheGeometry, SimulatedCache};
//!
//! let geometry = CacheGeometry::l1d(6 << 10, 3, 32);
//! let mut cache = SimulatedCache::new(geometry).unwrap();
//! assert_eq!(probe_l1d(&mut cache).unwrap(), geometry);
//! ```

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;

mod sysfs;
mod targets;
mod xray;

pub use sysfs::{find_l1d, from_sysfs, from_sysfs_at, parse_size, SYSFS_CACHE_DIR};
pub use targets::{HostMemory, SimulatedCache};
pub use xray::{
    probe_host_l1d, probe_l1d, probe_l1d_with, ProbeOptions, ProbeTarget, PROBE_BASE_ALIGN,
    PROBE_WORD_BYTES,
};

/// The L1d assumed when neither sysfs nor the probe gives one: 32 KiB, 8-way, 64 B lines. That
/// is the L1d of every Intel core from Core 2 (2006) to Skylake/Cascade Lake and of AMD Zen 1–4;
/// newer Intel cores (Ice Lake onwards) have 48 KiB 12-way, so this errs small, which only
/// makes chunks smaller than they could be. 64-byte lines are universal on x86-64.
pub const FALLBACK_L1D: CacheGeometry = CacheGeometry {
    level: 1,
    kind: CacheKind::Data,
    size_bytes: 32 << 10,
    ways: 8,
    line_bytes: 64,
};

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheKind {
    /// Data only (an L1d).
    Data,
    /// Instructions only (an L1i).
    Instruction,
    /// Both.
    Unified,
}

impl CacheKind {
    /// Parse sysfs's `type` file content (`Data`, `Instruction` or `Unified`).
    pub fn from_sysfs(text: &str) -> Option<CacheKind> {
        match text.trim() {
            "Data" => Some(CacheKind::Data),
            "Instruction" => Some(CacheKind::Instruction),
            "Unified" => Some(CacheKind::Unified),
            _ => None,
        }
    }
}

/// One cache's ⟨associativity, line size, capacity⟩.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheGeometry {
    /// 1 for L1, 2 for L2, …; never 0.
    pub level: u8,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Capacity in bytes. Need not be a power of two (48 KiB, 6 KiB, 105 MiB exist).
    pub size_bytes: usize,
    /// Lines per set; `size_bytes / line_bytes` for a fully associative cache. Need not be a
    /// power of two.
    pub ways: usize,
    /// Line (block) size in bytes.
    pub line_bytes: usize,
}

impl CacheGeometry {
    /// An L1 data cache of `size_bytes`, `ways`-way, with `line_bytes` lines.
    pub const fn l1d(size_bytes: usize, ways: usize, line_bytes: usize) -> CacheGeometry {
        CacheGeometry {
            level: 1,
            kind: CacheKind::Data,
            size_bytes,
            ways,
            line_bytes,
        }
    }

    /// Number of sets, `size / (ways × line)` (0 if `ways` or `line_bytes` is 0).
    pub fn sets(&self) -> usize {
        match self.ways.checked_mul(self.line_bytes) {
            Some(0) | None => 0,
            Some(set_bytes) => self.size_bytes / set_bytes,
        }
    }

    /// Bytes per way, `size / ways`: X-Ray's cache stride `T`, the distance at which addresses
    /// fall into the same set again (0 if `ways` is 0).
    pub fn way_bytes(&self) -> usize {
        self.size_bytes.checked_div(self.ways).unwrap_or(0)
    }
}

impl fmt::Display for CacheGeometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            CacheKind::Data => "d",
            CacheKind::Instruction => "i",
            CacheKind::Unified => "",
        };
        write!(
            f,
            "L{}{kind} {} B ({} KiB), {}-way, {} B lines, {} sets",
            self.level,
            self.size_bytes,
            self.size_bytes as f64 / 1024.0,
            self.ways,
            self.line_bytes,
            self.sets()
        )
    }
}

/// Why cache geometry could not be read or measured.
#[derive(Debug)]
pub enum HwError {
    /// A sysfs file or directory could not be read.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// A sysfs file held something other than what Linux writes there.
    Parse {
        /// The file.
        path: PathBuf,
        /// Its content, trimmed.
        content: String,
        /// What was expected instead.
        expected: &'static str,
    },
    /// The sysfs cache directory has no `index*` subdirectories.
    NoCaches {
        /// The directory searched.
        path: PathBuf,
    },
    /// A geometry no set-associative cache can have.
    InvalidGeometry {
        /// The geometry.
        geometry: CacheGeometry,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The probe's measurements never showed the latency jump it looks for.
    ProbeFailed {
        /// The step of X-Ray's algorithm that failed.
        step: &'static str,
        /// What was measured.
        detail: String,
    },
}

impl fmt::Display for HwError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HwError::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            HwError::Parse {
                path,
                content,
                expected,
            } => write!(
                f,
                "bad value in {}: {content:?} (expected {expected})",
                path.display()
            ),
            HwError::NoCaches { path } => {
                write!(f, "no index* cache directories in {}", path.display())
            }
            HwError::InvalidGeometry { geometry, reason } => {
                write!(f, "invalid cache geometry {geometry:?}: {reason}")
            }
            HwError::ProbeFailed { step, detail } => {
                write!(f, "cache probe failed while {step}: {detail}")
            }
        }
    }
}

impl std::error::Error for HwError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HwError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Where [`host_l1d`]'s answer came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L1dSource {
    /// Linux's sysfs description of cpu0.
    Sysfs,
    /// [`probe_host_l1d`].
    Probe,
    /// [`FALLBACK_L1D`].
    Fallback,
}

/// The host's L1 data cache; see [`host_l1d_with_source`].
pub fn host_l1d() -> CacheGeometry {
    host_l1d_with_source().0
}

/// The host's L1 data cache and where it came from: sysfs, else the probe (if its answer is
/// plausible: a line of 16..=512 B and a capacity of 4 KiB..=4 MiB made of whole sets), else
/// [`FALLBACK_L1D`]. Computed on first call (the probe takes well under a second) and cached.
pub fn host_l1d_with_source() -> (CacheGeometry, L1dSource) {
    static HOST: OnceLock<(CacheGeometry, L1dSource)> = OnceLock::new();
    *HOST.get_or_init(|| {
        if let Some(l1d) = from_sysfs().ok().and_then(|caches| find_l1d(&caches)) {
            return (l1d, L1dSource::Sysfs);
        }
        match probe_host_l1d() {
            Ok(g) if is_plausible_l1d(&g) => (g, L1dSource::Probe),
            _ => (FALLBACK_L1D, L1dSource::Fallback),
        }
    })
}

fn is_plausible_l1d(g: &CacheGeometry) -> bool {
    (16..=512).contains(&g.line_bytes)
        && (4 << 10..=4 << 20).contains(&g.size_bytes)
        && g.ways > 0
        && g.sets() > 0
        && g.size_bytes == g.sets() * g.ways * g.line_bytes
}

/// The CAB chunk for an L1d: 4 × its size (Ha et al. 2009 §3.1.3), rounded down to a
/// multiple of 64 bytes (one x86-64 line) and at least 64.
pub fn chunk_bytes_for(l1d: &CacheGeometry) -> usize {
    (l1d.size_bytes.saturating_mul(4) / 64 * 64).max(64)
}

/// [`chunk_bytes_for`] the [`host_l1d`]: 192 KiB on a 48 KiB L1d, 128 KiB on 32 KiB.
/// Not always a power of two; N-way buffering and FastForward need one
/// (`.next_power_of_two()`).
pub fn recommended_chunk_bytes() -> usize {
    chunk_bytes_for(&host_l1d())
}

/// 16 [`recommended_chunk_bytes`] chunks: the CAB paper's 2 MB of 128 KB chunks, scaled.
pub fn recommended_buffer_bytes() -> usize {
    16 * recommended_chunk_bytes()
}

/// The default chunk in sampling mode: an eighth of [`recommended_chunk_bytes`] (24 KiB on a
/// 48 KiB L1d, 16 KiB on 32 KiB), so a sampling ring (16 of them) is an eighth of an
/// exhaustive one.
///
/// A sampling ring only has to hold what its producers write while the analyzer sleeps
/// between reads of a tenth of each chunk; its producers never wait. What it costs is cache:
/// every thread's ring cycles through the cache of the core it runs on, and a service with
/// a few busy threads per core had its working set pushed out of the L2 by their 3 MiB rings.
pub fn recommended_sampling_chunk_bytes() -> usize {
    (recommended_chunk_bytes() / 8).max(4096)
}

/// This machine's physical memory in bytes, if the OS says (`sysconf`): no ring larger than
/// it can be used, whatever the allocator's overcommit policy lets a mapping promise.
pub fn physical_memory() -> Option<usize> {
    // SAFETY: `sysconf` only reads system configuration; any name is allowed.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let pages = usize::try_from(pages).ok()?;
    let page = usize::try_from(page).ok()?;
    pages.checked_mul(page)
}
