//! With `#[profile]` compiled out (`default-features = false`) cabprof builds the attribute and
//! nothing else; with it, the heavy renderers stay behind their own features. Reads the
//! dependency tree with `cargo tree --offline` (the lock file is the repository's).

use std::collections::BTreeSet;
use std::process::Command;

/// Crates the default build must not compile: inferno (`flamegraph`), prost and flate2
/// (`pprof`), prometheus-client (`serve`), what they pull in, tempfile, and tracing's
/// `#[instrument]` proc macro.
const HEAVY: &[&str] = &[
    "inferno",
    "quick-xml",
    "prost",
    "prost-derive",
    "flate2",
    "miniz_oxide",
    "tempfile",
    "tracing-attributes",
    "clap",
    "prometheus-client",
];

/// The names of the crates `cargo tree` lists for the facade's normal build with `features`.
fn tree(features: &[&str]) -> BTreeSet<String> {
    tree_of("cabprof", features)
}

/// The names of the crates `cargo tree` lists for `package`'s normal build with `features`.
fn tree_of(package: &str, features: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}"])
        .args(features)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn heavy_in(crates: &BTreeSet<String>) -> Vec<&'static str> {
    HEAVY
        .iter()
        .copied()
        .filter(|h| crates.contains(*h))
        .collect()
}

#[test]
fn compiled_out_builds_the_attribute_and_nothing_else() {
    let off = tree(&["--no-default-features"]);
    // The attribute's own tree, as the facade depends on it (without its `enabled`).
    let mut attribute = tree_of("cabprof-instrument-macros", &["--no-default-features"]);
    assert!(attribute.contains("syn"), "{attribute:?}");
    attribute.insert("cabprof".to_owned());
    assert_eq!(off, attribute, "compiled out");
}

#[test]
fn the_default_build_pulls_no_heavy_crate() {
    let default = tree(&[]);
    assert!(default.contains("cabprof-cab"), "{default:?}");
    assert_eq!(
        heavy_in(&default),
        Vec::<&str>::new(),
        "default: {default:?}"
    );
}

#[test]
fn each_renderer_feature_brings_its_crates_only() {
    let flame = tree(&["--features", "flamegraph"]);
    assert!(flame.contains("inferno"), "{flame:?}");
    assert!(
        !flame.contains("prost") && !flame.contains("flate2"),
        "{flame:?}"
    );
    let pprof = tree(&["--features", "pprof"]);
    assert!(
        pprof.contains("prost") && pprof.contains("flate2"),
        "{pprof:?}"
    );
    assert!(!pprof.contains("inferno"), "{pprof:?}");
}
