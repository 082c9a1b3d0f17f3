//! Linux's description of the caches: one `index<N>` directory per cache under
//! [`SYSFS_CACHE_DIR`], each holding `level`, `type`, `size`, `ways_of_associativity` and
//! `coherency_line_size`. Every unreadable file or malformed value is an [`HwError`] naming the
//! file and its content; nothing is guessed.

use std::fs;
use std::path::Path;

use super::{CacheGeometry, CacheKind, HwError};

/// Where Linux describes cpu0's caches, one `index<N>` directory per cache.
pub const SYSFS_CACHE_DIR: &str = "/sys/devices/system/cpu/cpu0/cache";

/// Parse a sysfs cache size (`"48K"`, `"2048K"`, `"105M"`, `"512"`) by the crate's one
/// byte-size rule, [`parse_bytes`](crate::config::parse_bytes): `K`, `M`, `G` mean KiB, MiB,
/// GiB, surrounding whitespace is ignored; anything else, or an overflow, is `None`.
pub fn parse_size(text: &str) -> Option<usize> {
    crate::config::parse_bytes("cache size", text).ok()
}

/// Every cache of cpu0, in `index` order, from [`SYSFS_CACHE_DIR`].
pub fn from_sysfs() -> Result<Vec<CacheGeometry>, HwError> {
    from_sysfs_at(SYSFS_CACHE_DIR)
}

/// Every cache described under `root` (a directory laid out like [`SYSFS_CACHE_DIR`]: one
/// `index<N>` directory per cache holding `level`, `type`, `size`, `ways_of_associativity` and
/// `coherency_line_size`), in `index` order. Other entries are ignored. A way count of 0 means
/// fully associative.
pub fn from_sysfs_at(root: impl AsRef<Path>) -> Result<Vec<CacheGeometry>, HwError> {
    let root = root.as_ref();
    let io_error = |source| HwError::Io {
        path: root.to_path_buf(),
        source,
    };
    let mut dirs = Vec::new();
    for entry in fs::read_dir(root).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let name = entry.file_name();
        let index = name
            .to_str()
            .and_then(|n| n.strip_prefix("index"))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(index) = index {
            dirs.push((index, entry.path()));
        }
    }
    if dirs.is_empty() {
        return Err(HwError::NoCaches {
            path: root.to_path_buf(),
        });
    }
    dirs.sort();
    dirs.iter().map(|(_, dir)| read_index_dir(dir)).collect()
}

fn read_index_dir(dir: &Path) -> Result<CacheGeometry, HwError> {
    let level = read_value(dir, "level", "a cache level: 1, 2, 3, …", |s| {
        s.parse::<u8>().ok().filter(|&l| l > 0)
    })?;
    let kind = read_value(
        dir,
        "type",
        "Data, Instruction or Unified",
        CacheKind::from_sysfs,
    )?;
    let size_bytes = read_value(
        dir,
        "size",
        "a non-zero size such as 48K, 2048K or 105M",
        |s| parse_size(s).filter(|&b| b > 0),
    )?;
    let line_bytes = read_value(
        dir,
        "coherency_line_size",
        "a non-zero line size in bytes such as 64",
        |s| s.parse::<usize>().ok().filter(|&b| b > 0),
    )?;
    let ways = read_value(
        dir,
        "ways_of_associativity",
        "a way count such as 8 (0 for fully associative)",
        |s| s.parse::<usize>().ok(),
    )?;
    let ways = if ways == 0 {
        (size_bytes / line_bytes).max(1)
    } else {
        ways
    };
    Ok(CacheGeometry {
        level,
        kind,
        size_bytes,
        ways,
        line_bytes,
    })
}

fn read_value<T>(
    dir: &Path,
    file: &str,
    expected: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T, HwError> {
    let path = dir.join(file);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(HwError::Io { path, source }),
    };
    let content = text.trim();
    match parse(content) {
        Some(value) => Ok(value),
        None => Err(HwError::Parse {
            content: content.to_string(),
            path,
            expected,
        }),
    }
}

/// The level-1 data cache among `caches` (a unified L1 if there is no separate L1d).
pub fn find_l1d(caches: &[CacheGeometry]) -> Option<CacheGeometry> {
    let l1 = |kind| {
        caches
            .iter()
            .find(|c| c.level == 1 && c.kind == kind)
            .copied()
    };
    l1(CacheKind::Data).or_else(|| l1(CacheKind::Unified))
}
