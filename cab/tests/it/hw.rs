//! Cache geometry: the sysfs reader on fake trees, the X-Ray probe against exact LRU models,
//! and both on this host.

use cabprof_cab::hw::{
    chunk_bytes_for, find_l1d, from_sysfs, from_sysfs_at, host_l1d_with_source, parse_size,
    probe_l1d, probe_l1d_with, CacheGeometry, CacheKind, HostMemory, HwError, ProbeOptions,
    SimulatedCache, SYSFS_CACHE_DIR,
};
use cabprof_cab::RingConfig;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory under the system temp dir, removed on drop.
struct FakeSysfs(PathBuf);

impl FakeSysfs {
    fn new() -> FakeSysfs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cabprof-hw-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        FakeSysfs(dir)
    }

    /// Write `index<i>` with the five files (each value followed by a newline, as sysfs does).
    fn index(&self, i: usize, level: &str, kind: &str, size: &str, ways: &str, line: &str) {
        let dir = self.0.join(format!("index{i}"));
        fs::create_dir_all(&dir).unwrap();
        for (file, value) in [
            ("level", level),
            ("type", kind),
            ("size", size),
            ("ways_of_associativity", ways),
            ("coherency_line_size", line),
        ] {
            fs::write(dir.join(file), format!("{value}\n")).unwrap();
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeSysfs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// This machine's layout (Sapphire Rapids): 48K/12 L1d, 32K/8 L1i, 2M/16 L2, 300M/20 L3.
fn sapphire_rapids() -> FakeSysfs {
    let fake = FakeSysfs::new();
    fake.index(0, "1", "Data", "48K", "12", "64");
    fake.index(1, "1", "Instruction", "32K", "8", "64");
    fake.index(2, "2", "Unified", "2048K", "16", "64");
    fake.index(3, "3", "Unified", "105M", "15", "64");
    fs::write(fake.path().join("uevent"), "").unwrap(); // not an index dir: ignored
    fake
}

#[test]
fn sizes_parse_with_binary_suffixes() {
    assert_eq!(parse_size("48K"), Some(48 << 10));
    assert_eq!(parse_size("2048K\n"), Some(2 << 20));
    assert_eq!(parse_size(" 105M "), Some(105 << 20));
    assert_eq!(parse_size("1G"), Some(1 << 30));
    assert_eq!(parse_size("512"), Some(512));
    // The crate's one byte-size rule also takes a `B` or `iB` unit (sysfs writes neither).
    assert_eq!(parse_size("48KB"), Some(48 << 10));
    assert_eq!(parse_size("48KiB"), Some(48 << 10));
    for bad in [
        "",
        "K",
        "48Q",
        "4 8K",
        "-48K",
        "48KQ",
        "0x30K",
        "99999999999999999999K",
    ] {
        assert_eq!(parse_size(bad), None, "{bad:?}");
    }
}

#[test]
fn a_well_formed_tree_is_read_in_index_order() {
    let fake = sapphire_rapids();
    let caches = from_sysfs_at(fake.path()).unwrap();
    let geometry = |level, kind, size_bytes, ways| CacheGeometry {
        level,
        kind,
        size_bytes,
        ways,
        line_bytes: 64,
    };
    assert_eq!(
        caches,
        [
            geometry(1, CacheKind::Data, 48 << 10, 12),
            geometry(1, CacheKind::Instruction, 32 << 10, 8),
            geometry(2, CacheKind::Unified, 2 << 20, 16),
            geometry(3, CacheKind::Unified, 105 << 20, 15),
        ]
    );
    assert_eq!(
        find_l1d(&caches),
        Some(CacheGeometry::l1d(48 << 10, 12, 64))
    );
    assert_eq!(caches[0].sets(), 64);
    assert_eq!(caches[0].way_bytes(), 4096);
    assert_eq!(caches[2].sets(), 2048);
}

#[test]
fn index_ten_sorts_after_index_two_and_zero_ways_mean_fully_associative() {
    let fake = FakeSysfs::new();
    fake.index(10, "3", "Unified", "8M", "16", "64");
    fake.index(2, "1", "Data", "4K", "0", "64");
    let caches = from_sysfs_at(fake.path()).unwrap();
    assert_eq!(caches[0].level, 1);
    assert_eq!(caches[0].ways, 64);
    assert_eq!(caches[0].sets(), 1);
    assert_eq!(caches[1].level, 3);
}

#[test]
fn malformed_values_are_errors_naming_file_and_content() {
    let cases = [
        ("size", "48Q", "48K"),
        ("ways_of_associativity", "twelve", "12"),
        ("coherency_line_size", "0", "64"),
        ("level", "L1", "1"),
        ("type", "Bogus", "Data"),
    ];
    for (file, bad, _good) in cases {
        let fake = sapphire_rapids();
        fs::write(fake.path().join("index2").join(file), format!("{bad}\n")).unwrap();
        match from_sysfs_at(fake.path()) {
            Err(HwError::Parse { path, content, .. }) => {
                assert_eq!(path, fake.path().join("index2").join(file));
                assert_eq!(content, bad);
                let message = HwError::Parse {
                    path,
                    content,
                    expected: "x",
                }
                .to_string();
                assert!(message.contains(file) && message.contains(bad), "{message}");
            }
            other => panic!("{file} = {bad:?}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn missing_files_and_directories_are_io_errors_naming_the_path() {
    let fake = sapphire_rapids();
    let missing = fake.path().join("index1").join("coherency_line_size");
    fs::remove_file(&missing).unwrap();
    match from_sysfs_at(fake.path()) {
        Err(e @ HwError::Io { .. }) => {
            assert!(
                e.to_string().contains(&missing.display().to_string()),
                "{e}"
            );
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }

    let nowhere = fake.path().join("does-not-exist");
    assert!(matches!(from_sysfs_at(&nowhere), Err(HwError::Io { path, .. }) if path == nowhere));

    let empty = FakeSysfs::new();
    assert!(matches!(
        from_sysfs_at(empty.path()),
        Err(HwError::NoCaches { .. })
    ));
}

#[test]
fn the_simulator_hits_within_capacity_and_thrashes_one_set_past_it() {
    let geometry = CacheGeometry::l1d(6 << 10, 3, 32);
    let mut sim = SimulatedCache::new(geometry).unwrap();
    use cabprof_cab::hw::ProbeTarget;
    let way = geometry.way_bytes();
    let three: Vec<usize> = (0..3).map(|i| i * way).collect();
    let four: Vec<usize> = (0..4).map(|i| i * way).collect();
    assert_eq!(sim.chase(&three, 4), 4.0);
    assert_eq!(sim.chase(&four, 4), 14.0);
    assert!(SimulatedCache::new(CacheGeometry::l1d(6 << 10, 5, 32)).is_err());
    assert!(SimulatedCache::new(CacheGeometry::l1d(6 << 10, 0, 32)).is_err());
}

#[test]
fn the_probe_recovers_simulated_geometries_exactly() {
    let cases = [
        (32 << 10, 8, 64),
        (48 << 10, 12, 64),
        (6 << 10, 3, 32),
        (16 << 10, 4, 32),
        (8 << 10, 2, 128),
    ];
    for (size, ways, line) in cases {
        let geometry = CacheGeometry::l1d(size, ways, line);
        let mut sim = SimulatedCache::new(geometry).unwrap();
        assert_eq!(probe_l1d(&mut sim).unwrap(), geometry, "{geometry}");
        // Latency units do not matter, only the contrast.
        let mut slow = SimulatedCache::new(geometry)
            .unwrap()
            .with_latencies(1.0, 100.0);
        assert_eq!(probe_l1d(&mut slow).unwrap(), geometry, "{geometry}");
    }
}

#[test]
fn the_probe_fails_cleanly_when_nothing_ever_misses() {
    struct Flat;
    impl cabprof_cab::hw::ProbeTarget for Flat {
        fn chase(&mut self, _: &[usize], _: usize) -> f64 {
            1.0
        }
    }
    let options = ProbeOptions {
        max_elements: 1 << 10,
        ..ProbeOptions::default()
    };
    let err = probe_l1d_with(&mut Flat, &options).unwrap_err();
    assert!(matches!(err, HwError::ProbeFailed { .. }), "{err}");
}

#[test]
fn chunks_are_four_l1ds_and_buffers_sixteen_chunks() {
    assert_eq!(
        chunk_bytes_for(&CacheGeometry::l1d(32 << 10, 8, 64)),
        128 << 10
    );
    assert_eq!(
        chunk_bytes_for(&CacheGeometry::l1d(48 << 10, 12, 64)),
        192 << 10
    );
    assert_eq!(
        chunk_bytes_for(&CacheGeometry::l1d(6 << 10, 3, 32)),
        24 << 10
    );
    let chunk = cabprof_cab::hw::recommended_chunk_bytes();
    let buffer = cabprof_cab::hw::recommended_buffer_bytes();
    assert_eq!(chunk % 64, 0);
    assert_eq!(buffer, 16 * chunk);
    RingConfig::new(buffer, chunk).validate().unwrap();
}

#[test]
fn this_host_sysfs_describes_an_l1d() {
    if !Path::new(SYSFS_CACHE_DIR).exists() {
        eprintln!("{SYSFS_CACHE_DIR} absent: nothing to check");
        return;
    }
    let caches = from_sysfs().unwrap();
    let l1d = find_l1d(&caches).expect("sysfs lists caches but no L1d");
    assert!((16..=512).contains(&l1d.line_bytes), "{l1d}");
    assert!(l1d.size_bytes >= 4 << 10 && l1d.ways > 0, "{l1d}");
    eprintln!("sysfs: {l1d}");
    let (host, source) = host_l1d_with_source();
    eprintln!("host_l1d: {host} (from {source:?})");
}

#[test]
fn this_host_probe_gives_plausible_values() {
    // A machine shared with builds is noisy: plausible ranges only, never sysfs's exact answer,
    // and up to five probes (a timing probe can be thrown off by a burst of load; a broken one
    // is implausible every time).
    if let Some(l1d) = from_sysfs().ok().and_then(|c| find_l1d(&c)) {
        eprintln!("sysfs: {l1d}");
    }
    let plausible = |p: &cabprof_cab::hw::CacheGeometry| {
        (32..=256).contains(&p.line_bytes)
            && (8 << 10..=1 << 20).contains(&p.size_bytes)
            && p.ways >= 1
    };
    let mut tries = Vec::new();
    for _ in 0..5 {
        let probed = probe_l1d(&mut HostMemory::with_effort(3, 1 << 15)).unwrap();
        eprintln!("probe: {probed}");
        let ok = plausible(&probed);
        tries.push(probed);
        if ok {
            return;
        }
    }
    panic!("five implausible probes: {tries:?}");
}
