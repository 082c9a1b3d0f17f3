//! The `cabprof` binary never destroys or half-writes a file and rejects what it cannot do
//! with a message naming the argument: `trace convert X X`, `trace generate` with addresses
//! that do not fit, `simulate` with impossible ring sizes or an upside-down hierarchy.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh path, alone in a fresh directory: `leftovers` then sees only what the command
/// given this path left (the tests run in parallel, and another test's temporary file in a
/// shared directory made one fail).
fn scratch(name: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cabprof-cli-outputs")
        .join(format!("{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn cabprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cabprof"))
        .args(args)
        .output()
        .expect("cabprof runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Names of the files in `path`'s directory that start with its name or are temporaries.
fn leftovers(path: &std::path::Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&name) || f.starts_with(".cabprof-"))
        .collect()
}

const LACKEY: &[u8] = b" L 0001000,8\n S 0001040,4\n M 0002000,8\n";

#[test]
fn converting_a_trace_onto_itself_is_refused_and_leaves_it_intact() {
    let input = scratch("self.lackey");
    std::fs::write(&input, LACKEY).unwrap();
    // The same file under another name: by identity, not by spelling.
    let dir = input.parent().unwrap();
    let other_name = dir.join(".").join(input.file_name().unwrap());
    let link = scratch("link.lackey");
    std::fs::hard_link(&input, &link).unwrap();
    for out in [&input, &other_name, &link] {
        let o = cabprof(&[
            "trace",
            "convert",
            input.to_str().unwrap(),
            out.to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "converting onto {out:?} succeeded");
        assert!(stderr(&o).contains("same file"), "{}", stderr(&o));
        assert_eq!(
            std::fs::read(&input).unwrap(),
            LACKEY,
            "the input was touched"
        );
    }
}

#[test]
fn a_conversion_replaces_its_output_whole() {
    let input = scratch("in.lackey");
    std::fs::write(&input, LACKEY).unwrap();
    let out = scratch("out.cabtrace");
    std::fs::write(&out, b"old contents").unwrap();
    let o = cabprof(&[
        "trace",
        "convert",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Header (16 bytes) and four accesses (M is a load and a store).
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 16 + 4 * 8);
    assert_eq!(
        leftovers(&out),
        [out.file_name().unwrap().to_string_lossy()]
    );
}

#[test]
fn generating_addresses_that_do_not_fit_is_an_argument_error_with_no_file() {
    let out = scratch("huge.cabtrace");
    let o = cabprof(&[
        "trace",
        "generate",
        out.to_str().unwrap(),
        "--accesses",
        "10",
        "--working-set",
        "67108864G",
        "--stride",
        "128",
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("--working-set"), "{err}");
    assert!(!err.contains("cannot write"), "blames the write: {err}");
    assert!(leftovers(&out).is_empty(), "left {:?}", leftovers(&out));
}

fn simulate_error(extra: &[&str]) -> String {
    let trace = scratch("sim.lackey");
    std::fs::write(&trace, LACKEY).unwrap();
    let mut args = vec!["simulate", trace.to_str().unwrap(), "--no-progress"];
    args.extend_from_slice(extra);
    let o = cabprof(&args);
    assert!(!o.status.success(), "simulate {extra:?} succeeded");
    stderr(&o)
}

#[test]
fn simulate_rejects_ring_sizes_it_cannot_have() {
    // 2^61 × 16 overflows: this used to say "buffer_bytes = 0".
    let err = simulate_error(&["--chunk", "2305843009213693952"]);
    assert!(err.contains("--chunk"), "{err}");
    assert!(!err.contains("buffer_bytes = 0"), "{err}");
    // More than the machine can map: this used to abort with "memory allocation failed".
    let err = simulate_error(&["--buffer", "65536G", "--chunk", "1G"]);
    assert!(err.contains("buffer_bytes"), "{err}");
}

#[test]
fn simulate_rejects_a_level_smaller_than_the_one_above() {
    let err = simulate_error(&["--l1", "32K:4:64", "--l2", "16K:4:64"]);
    assert!(
        err.contains("--l2") && err.contains("smaller than --l1"),
        "{err}"
    );
    let err = simulate_error(&["--l2", "1M:8:64", "--l3", "512K:8:64"]);
    assert!(
        err.contains("--l3") && err.contains("smaller than --l2"),
        "{err}"
    );
}

#[test]
fn simulate_says_which_part_of_a_level_is_wrong() {
    let err = simulate_error(&["--l1", "32K:4294967296:64"]);
    assert!(
        err.contains("WAYS 4294967296") && err.contains("too large"),
        "{err}"
    );
    let err = simulate_error(&["--l1", "32K:four:64"]);
    assert!(err.contains("WAYS \"four\""), "{err}");
}

#[test]
fn rendering_a_report_onto_itself_is_refused_and_leaves_it_intact() {
    // The facade's report-reading test owns this file; one copy serves both.
    let report = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/report_written_by_serde_json.json"
    ))
    .unwrap();
    let input = scratch("self.json");
    std::fs::write(&input, &report).unwrap();
    // The same file under another spelling, and through a hard link.
    let other_name = input.parent().unwrap().join(".").join("self.json");
    let link = input.with_file_name("link.json");
    std::fs::hard_link(&input, &link).unwrap();
    for out in [&input, &other_name, &link] {
        let o = cabprof(&[
            "report",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "rendering onto {out:?}: {err}");
        assert!(
            err.contains("same file")
                && err.contains(input.to_str().unwrap())
                && err.contains(out.to_str().unwrap()),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&input).unwrap(),
            report,
            "the input was touched"
        );
    }

    // `report - -o X < X`: standard input is the file itself.
    let o = Command::new(env!("CARGO_BIN_EXE_cabprof"))
        .args(["report", "-", "-o", link.to_str().unwrap()])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("standard input") && err.contains(link.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&input).unwrap(),
        report,
        "the input was touched"
    );

    // Another file is written as before, from a file and from standard input.
    let elsewhere = input.with_file_name("tables.txt");
    let o = cabprof(&[
        "report",
        input.to_str().unwrap(),
        "-o",
        elsewhere.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&elsewhere)
        .unwrap()
        .starts_with("cabprof report"));
    let o = Command::new(env!("CARGO_BIN_EXE_cabprof"))
        .args(["report", "-", "-o", elsewhere.to_str().unwrap()])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `--profile mutex|block` writes Go's wait profiles of a report with waits, and says what is
/// missing otherwise.
#[test]
fn wait_profiles_are_written_from_a_report_with_waits() {
    let data = {
        let _one = crate::serial();
        let session = cabprof::Session::builder()
            .analyses(&[cabprof::Analysis::CallTree, cabprof::Analysis::Waits])
            .start()
            .unwrap();
        let m = std::sync::Arc::new(cabprof::sync::Mutex::new(0u32));
        let held = std::sync::Arc::new(std::sync::Barrier::new(2));
        let holder = {
            let (m, held) = (m.clone(), held.clone());
            std::thread::spawn(move || {
                let _g = m.lock();
                held.wait();
                std::thread::sleep(std::time::Duration::from_millis(10));
            })
        };
        held.wait();
        *m.lock() += 1;
        holder.join().unwrap();
        session.finish().data
    };
    let input = scratch("waits.json");
    std::fs::write(&input, data.json()).unwrap();
    let input = input.to_str().unwrap();
    for profile in ["mutex", "block"] {
        let out = scratch(&format!("{profile}.pb.gz"));
        let o = cabprof(&[
            "report",
            input,
            "--format",
            "pprof",
            "--profile",
            profile,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        // A gzip stream.
        assert_eq!(std::fs::read(&out).unwrap()[..2], [0x1f, 0x8b]);
    }
    let o = cabprof(&["report", input, "--profile", "block"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--format pprof only"), "{}", stderr(&o));
    let old = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/report_written_by_serde_json.json"
    );
    let o = cabprof(&["report", old, "--format", "pprof", "--profile", "mutex"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("has no waits"), "{}", stderr(&o));
}
