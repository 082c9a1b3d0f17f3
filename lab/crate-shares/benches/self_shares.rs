//! cabprof's time analysis against a sampling profiler on a real crate (miniz_oxide 0.9.1).
//!
//! `perf record -e cpu-clock` samples the `plain` binary (the crate from crates.io) with DWARF
//! call chains; each sample goes to the innermost function of the copied crate that cabprof
//! instruments, found by walking the sample's call chain, each frame expanded into its inline
//! chain (llvm-symbolizer), so code inlined into a caller, a small method cabprof leaves alone,
//! a closure, or a library routine called from the crate counts where cabprof counts it: under
//! the innermost instrumented function on the stack. perf then samples `profiled` (the
//! annotated copy, same workload) counting calls only (`CABPROF_ANALYSES=method-count`: no
//! clock read), attributed the same way, an instrumented function's body (a closure that
//! cabprof's recorded copy runs) counting as the function and samples in cabprof's own code
//! left out: what the program cabprof times does with its time. Then `profiled` runs in five
//! processes under `CABPROF=1 CABPROF_ANALYSES=time`, each after a run of `plain` without perf
//! for the wall times. Printed: (a) self-time shares of the functions above 5 % (in perf or
//! in any process), over the whole run and per phase, against each of perf's two profiles;
//! (b) cabprof's compensated inclusive time of `compress_to_vec` and `decompress_to_vec`
//! against the plain build's wall time of those phases; (c) verdicts: shares within 5 points
//! of each profile in every process, top-level inclusive within 10 % in every process; (d)
//! perf's shares on the profiled build against the plain build's: what instrumenting the
//! functions does to the program itself, which no measurement inside it can take back.
//!
//! `CARGO_PROFILE_BENCH_DEBUG=limited cargo bench -p cabprof-crate-shares --bench self_shares`:
//! both binaries need debug info with function names (line tables alone name inlined
//! functions without their path). Needs `perf`, `nm` and `llvm-symbolizer` (or the program in
//! `LLVM_SYMBOLIZER`); without one of them, or without debug info, it says so and exits 0,
//! or 1 when `CI` is set.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Processes of `profiled` (and of `plain` without perf, one before each).
const PROCESSES: usize = 5;
/// A function is in the share tables when it holds at least this much (percent) of self time
/// in perf's profile or in any process's report.
const SHARE_FLOOR: f64 = 5.0;
/// Shares agree within this many points.
const SHARE_POINTS: f64 = 5.0;
/// Top-level inclusive time agrees with the plain wall time within this fraction.
const INCLUSIVE_TOLERANCE: f64 = 0.10;
/// The two top-level functions, each one phase of the workload, as keys (see [`key`]).
const PHASES: [(&str, &str); 2] = [
    ("compression", "deflate::compress_to_vec"),
    ("decompression", "inflate::decompress_to_vec"),
];
/// The half of the crate each phase runs: a sample whose stack was unwound short of the
/// top-level function goes to the phase of its innermost instrumented function's module. In
/// the profiled build that is every sample: perf copies 8 KiB of each sample's stack, and a
/// recorded copy's frame can be larger (the compressor's state is 64 KiB on the stack, in a
/// frame of its own there). No function of one half runs in the other phase; one at the
/// crate's root (`shared::update_adler32`) is then in no phase, and counted apart.
const PHASE_MODULES: [&str; 2] = ["deflate::", "inflate::"];

fn main() {
    let plain = PathBuf::from(env!("CARGO_BIN_EXE_plain"));
    let profiled = PathBuf::from(env!("CARGO_BIN_EXE_profiled"));
    match run(&plain, &profiled) {
        Ok(()) => {}
        Err(Failure::Unavailable(why)) => {
            if std::env::var_os("CI").is_some() {
                eprintln!(
                    "self_shares: cannot run: {why} (CI is set: failing rather than skipping)"
                );
                std::process::exit(1);
            }
            println!("self_shares: skipped: {why}");
        }
        Err(Failure::Error(e)) => {
            eprintln!("self_shares: {e}");
            std::process::exit(1);
        }
    }
}

enum Failure {
    /// A tool or the debug info the comparison needs is missing: skipped outside CI.
    Unavailable(String),
    /// Anything else: always a failure.
    Error(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Self {
        Failure::Error(e)
    }
}

type Res<T> = Result<T, Failure>;

fn run(plain: &Path, profiled: &Path) -> Res<()> {
    let symbolizer = std::env::var("LLVM_SYMBOLIZER").unwrap_or_else(|_| "llvm-symbolizer".into());
    for (tool, arg) in [
        ("perf", "--version"),
        ("nm", "--version"),
        (symbolizer.as_str(), "--version"),
    ] {
        if Command::new(tool).arg(arg).output().is_err() {
            return Err(Failure::Unavailable(format!(
                "`{tool}` is not installed or not on PATH"
            )));
        }
    }
    let dir = std::env::temp_dir().join(format!("cabprof-crate-shares-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;

    let result = measure(plain, profiled, &symbolizer, &dir);
    // Kept after an error: the reports are there to look at.
    if !matches!(result, Err(Failure::Error(_))) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn measure(plain: &Path, profiled: &Path, symbolizer: &str, dir: &Path) -> Res<()> {
    println!("self_shares: miniz_oxide 0.9.1, 6 MiB of generated text compressed (level 6) and decompressed, 3 rounds per process");
    // perf's runs on their own first; then plain and profiled processes alternate, so that a
    // change in the host's load meets both builds. perf also samples the profiled build
    // counting calls only (no clock read): what the program that cabprof measures does with
    // its time, apart from what the instrumentation does to it.
    let stacks = perf_profile(plain, &[], symbolizer, dir)?;
    let counting_report = dir.join("counting.json");
    let counting_env = [
        ("CABPROF", "1"),
        ("CABPROF_ANALYSES", "method-count"),
        ("CABPROF_OUTPUT", path_str(&counting_report)?),
    ];
    let counting_stacks = perf_profile(profiled, &counting_env, symbolizer, dir)?;
    let counting_events = recorded_events(&counting_report)?;

    let mut plain_runs = Vec::new();
    let mut reports = Vec::new();
    for i in 1..=PROCESSES {
        plain_runs.push(wall_times(&run_plain(plain)?, plain)?);
        let path = dir.join(format!("profiled-{i}.json"));
        run_profiled(profiled, &path)?;
        reports.push(Report::read(&path)?);
    }
    let instrumented = reports
        .iter()
        .flat_map(|r| r.methods.iter().cloned())
        .collect();
    let sampled = attribute(&stacks, &instrumented, plain)?;
    let counting = attribute(&counting_stacks, &instrumented, profiled)?;
    print!(
        "{}",
        compare(&sampled, &counting, counting_events, &reports, &plain_runs)
    );
    Ok(())
}

/// The events the counting run's report says it recorded: none, or any dropped, and that run
/// profiled something else than the program the five processes time.
fn recorded_events(report: &Path) -> Res<u64> {
    let text = std::fs::read_to_string(report).map_err(|e| {
        format!(
            "reading the counting run's report {}: {e}",
            report.display()
        )
    })?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", report.display()))?;
    let totals = &json["totals"];
    match (totals["events"].as_u64(), totals["dropped"].as_u64()) {
        (Some(events), Some(0)) if events > 0 => Ok(events),
        _ => Err(Failure::Error(format!(
            "{}: the counting run recorded no events or dropped some: {totals}",
            report.display()
        ))),
    }
}

fn path_str(p: &Path) -> Res<&str> {
    p.to_str()
        .ok_or_else(|| Failure::Error(format!("{} is not UTF-8", p.display())))
}

// ---------------------------------------------------------------------------------------
// Names

/// The name of a function of the crate relative to the crate's root, the same for both
/// builds (`inflate::core::decompress` from `miniz_oxide::inflate::core::decompress` and from
/// `cabprof_crate_shares::miniz_oxide::inflate::core::decompress`), or `None` outside it.
/// Hashes, generic arguments and `<T as Trait>` are dropped: cabprof names one function once,
/// whatever its instantiation, and a trait method by its type.
fn key(name: &str) -> Option<String> {
    let name = demangle_legacy(name);
    let name = strip_hash(&name);
    let name = untrait(name);
    let name = drop_generics(&name);
    let at = name.rfind("miniz_oxide::")?;
    let rest = name[at + "miniz_oxide::".len()..].trim_end_matches("::");
    (!rest.is_empty()).then(|| rest.to_string())
}

/// llvm-symbolizer decodes the legacy mangling's `_ZN...E` but not its escapes.
fn demangle_legacy(name: &str) -> String {
    let name = name
        .strip_prefix('_')
        .filter(|n| n.starts_with('$'))
        .unwrap_or(name);
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if c == '$' {
            if let Some(end) = rest[1..].find('$') {
                let code = &rest[1..1 + end];
                let decoded = match code {
                    "LT" => Some('<'),
                    "GT" => Some('>'),
                    "RF" => Some('&'),
                    "BP" => Some('*'),
                    "C" => Some(','),
                    "SP" => Some('@'),
                    "LP" => Some('('),
                    "RP" => Some(')'),
                    _ => code
                        .strip_prefix('u')
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .and_then(char::from_u32),
                };
                if let Some(d) = decoded {
                    out.push(d);
                    rest = &rest[end + 2..];
                    continue;
                }
            }
        }
        if rest.starts_with("..") {
            out.push_str("::");
            rest = &rest[2..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

/// `<T as Trait>::f` → `T::f` (the form cabprof's method table uses, with the module put in
/// front by [`Report::read`]).
fn untrait(name: &str) -> String {
    let Some(inner) = name.strip_prefix('<') else {
        return name.to_string();
    };
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            '>' => {
                let head = &inner[..i];
                let ty = head.split(" as ").next().unwrap_or(head);
                return format!("{ty}{}", &inner[i + 1..]);
            }
            _ => {}
        }
    }
    name.to_string()
}

/// Generic arguments (`<...>`, `::<...>`) out of a path.
fn drop_generics(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.replace("::::", "::")
}

/// The function a closure's name is in (`f` of `f::{{closure}}`, or of the `f::_{{closure}}`
/// the legacy mangling's escapes decode to).
fn closure_owner(name: &str) -> Option<String> {
    let name = demangle_legacy(name);
    let at = ["{{closure}}", "{closure#"]
        .iter()
        .filter_map(|c| name.find(c))
        .min()?;
    Some(
        name[..at]
            .trim_end_matches('_')
            .trim_end_matches("::")
            .to_string(),
    )
}

/// A function of cabprof itself (its entry and exit code, the ring, the analyzers).
fn is_cabprof(name: &str) -> bool {
    let name = untrait(&demangle_legacy(name));
    ["cabprof::", "cabprof_cab::", "cabprof_analyses::"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// A closure's frame is no instrumented function: cabprof counts its time in whichever
/// instrumented function is running it.
fn is_closure(name: &str) -> bool {
    closure_owner(name).is_some()
}

// ---------------------------------------------------------------------------------------
// perf

/// Self samples per function key, whole run and per phase.
struct Sampled {
    total: u64,
    /// Samples with no instrumented function of the crate on their stack (input generation,
    /// the round-trip check, start-up, cabprof's analyzers), left out of the shares.
    outside: u64,
    /// Samples taken in cabprof's own code (the profiled build), left out of the shares.
    in_cabprof: u64,
    /// Samples in an instrumented function with no top-level function found on the
    /// (truncated) stack, put in a phase by [`PHASE_MODULES`].
    by_module: u64,
    /// Such samples in a function of neither half (the crate's root): in the whole run only.
    no_phase: u64,
    whole: BTreeMap<String, u64>,
    phases: [BTreeMap<String, u64>; 2],
    /// Instrumented functions on no sampled stack: rarely run, or a name that did not map.
    unseen: BTreeSet<String>,
}

/// One frame of a sample's call chain in the binary.
struct Frame {
    /// The address in the ELF file's address space (what the symbolizer takes).
    addr: u64,
    /// Not the sampled instruction but a return address: the call is the byte before.
    is_return: bool,
}

/// One sample: the crate's function keys on its stack (see [`key`]), innermost first.
struct Stack {
    keys: Vec<String>,
    /// Taken in cabprof's own code: the first function of the crate or of cabprof met from
    /// the sampled instruction outwards is cabprof's.
    in_cabprof: bool,
}

/// Record `bin` (run with `env`) and return each sample's [`Stack`].
fn perf_profile(bin: &Path, env: &[(&str, &str)], symbolizer: &str, dir: &Path) -> Res<Vec<Stack>> {
    if !has_section(bin, ".debug_info")? {
        return Err(Failure::Unavailable(format!(
            "{} has no debug info: build it with CARGO_PROFILE_BENCH_DEBUG=limited",
            bin.display()
        )));
    }
    let data = dir.join("perf.data");
    let out = Command::new("perf")
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-F",
            "9999",
            "--call-graph",
            "dwarf",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(bin)
        .env_clear_cabprof()
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("running perf record: {e}"))?;
    if !out.status.success() {
        return Err(Failure::Unavailable(format!(
            "`perf record -e cpu-clock` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let script = Command::new("perf")
        .args([
            "script",
            "-F",
            "ip,sym,symoff,dso",
            "--no-demangle",
            "--no-inline",
            "-i",
        ])
        .arg(&data)
        .output()
        .map_err(|e| format!("running perf script: {e}"))?;
    if !script.status.success() {
        return Err(Failure::Error(format!(
            "perf script failed ({}): {}",
            script.status,
            String::from_utf8_lossy(&script.stderr).trim()
        )));
    }
    // Hundreds of MB at this rate with stack copies: gone as soon as it has been read.
    let _ = std::fs::remove_file(&data);
    let text = String::from_utf8_lossy(&script.stdout);
    let symbols = symbol_table(bin)?;
    let exe = std::fs::canonicalize(bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    let samples = parse_script(&text, &exe, &symbols);

    // Every distinct address once, through one symbolizer process.
    let mut addrs: BTreeSet<u64> = BTreeSet::new();
    for chain in &samples {
        for f in chain {
            addrs.insert(f.addr - u64::from(f.is_return));
        }
    }
    let (inline, debug) = symbolize(symbolizer, bin, &addrs)?;
    // Without debug info the symbolizer still names each address by its symbol (the outer
    // function of an inline chain, here mostly `main`), and with line tables alone it names
    // inlined functions without their path: either would put inlined code under the wrong
    // function, so both stop the comparison.
    let hint = "build it with CARGO_PROFILE_BENCH_DEBUG=limited";
    if debug.no_lines * 2 > addrs.len() {
        return Err(Failure::Unavailable(format!(
            "{} has no debug info ({} of {} sampled addresses without a source line): {hint}",
            bin.display(),
            debug.no_lines,
            addrs.len()
        )));
    }
    if debug.short_names * 2 > debug.inlined {
        return Err(Failure::Unavailable(format!(
            "{}'s debug info names inlined functions without their paths ({} of {}; line \
             tables only?): {hint}",
            bin.display(),
            debug.short_names,
            debug.inlined
        )));
    }

    // Innermost first: the call chain's frames, each expanded into its inline chain, kept
    // where they are the crate's own functions.
    let stacks = samples
        .iter()
        .map(|chain| {
            let names = || {
                chain
                    .iter()
                    .flat_map(|f| inline[&(f.addr - u64::from(f.is_return))].iter())
            };
            let all: Vec<&String> = names().collect();
            let keys: Vec<String> = all
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    if !is_closure(n) {
                        return key(n);
                    }
                    // In the profiled build an instrumented function's body is a closure
                    // that cabprof's recorded copy calls (inlined or not, through the
                    // standard library's `FnOnce`): that closure is the function.
                    all[i + 1..]
                        .iter()
                        .find(|outer| key(outer).is_some() || is_cabprof(outer))
                        .is_some_and(|outer| is_cabprof(outer))
                        .then(|| closure_owner(n).and_then(|f| key(&f)))
                        .flatten()
                })
                .collect();
            Stack {
                keys,
                in_cabprof: names()
                    .find(|n| key(n).is_some() || is_cabprof(n))
                    .is_some_and(|n| key(n).is_none()),
            }
        })
        .collect();
    Ok(stacks)
}

/// Each sample to the innermost of its functions that cabprof instruments (`instrumented`:
/// the method tables of the reports), and to the phase of the outermost one (or, unwound
/// short of it, of the innermost one's module: [`PHASE_MODULES`]).
fn attribute(stacks: &[Stack], instrumented: &BTreeSet<String>, bin: &Path) -> Res<Sampled> {
    let mut s = Sampled {
        total: stacks.len() as u64,
        outside: 0,
        in_cabprof: 0,
        by_module: 0,
        no_phase: 0,
        whole: BTreeMap::new(),
        phases: [BTreeMap::new(), BTreeMap::new()],
        unseen: instrumented.clone(),
    };
    for stack in stacks {
        for k in &stack.keys {
            s.unseen.remove(k);
        }
        let mut keys = stack.keys.iter().filter(|k| instrumented.contains(*k));
        let Some(own) = keys.next() else {
            s.outside += 1;
            continue;
        };
        if stack.in_cabprof {
            s.in_cabprof += 1;
            continue;
        }
        *s.whole.entry(own.clone()).or_default() += 1;
        let outermost = keys.next_back().unwrap_or(own);
        let phase = match PHASES.iter().position(|p| p.1 == outermost) {
            Some(p) => Some(p),
            None => {
                let p = PHASE_MODULES.iter().position(|m| own.starts_with(m));
                match p {
                    Some(_) => s.by_module += 1,
                    None => s.no_phase += 1,
                }
                p
            }
        };
        if let Some(p) = phase {
            *s.phases[p].entry(own.clone()).or_default() += 1;
        }
    }
    if s.whole.is_empty() {
        return Err(Failure::Unavailable(format!(
            "no sample of {} resolved to an instrumented miniz_oxide function (its debug info \
             may lack function names: build it with CARGO_PROFILE_BENCH_DEBUG=limited)",
            bin.display()
        )));
    }
    Ok(s)
}

/// `nm`'s defined symbols: name → address, `None` for a name defined twice (perf's
/// `symbol+offset` for it is then ambiguous).
fn symbol_table(bin: &Path) -> Res<HashMap<String, Option<u64>>> {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(bin)
        .output()
        .map_err(|e| format!("running nm: {e}"))?;
    if !out.status.success() {
        return Err(Failure::Error(format!(
            "nm {} failed: {}",
            bin.display(),
            out.status
        )));
    }
    let mut map: HashMap<String, Option<u64>> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut parts = line.split_whitespace();
        let (Some(addr), Some(_), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        map.entry(name.to_string())
            .and_modify(|a| {
                if *a != Some(addr) {
                    *a = None
                }
            })
            .or_insert(Some(addr));
    }
    Ok(map)
}

/// Each sample's user-space frames in `exe`, innermost first. perf prints a call chain's addresses as
/// offsets into the mapped file, not as the ELF's virtual addresses, which differ by the
/// segment's alignment; `symbol+offset` with `nm`'s address of the symbol gives the latter.
fn parse_script(text: &str, exe: &Path, symbols: &HashMap<String, Option<u64>>) -> Vec<Vec<Frame>> {
    let mut samples = Vec::new();
    let mut chain: Vec<Frame> = Vec::new();
    let mut depth = 0usize;
    let mut started = false;
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.trim();
        if line.is_empty() {
            if started {
                samples.push(std::mem::take(&mut chain));
                started = false;
                depth = 0;
            }
            continue;
        }
        started = true;
        // `<ip> <symbol>+0x<offset> (<dso>)`
        let Some((head, dso)) = line.rsplit_once(" (") else {
            continue;
        };
        let dso = dso.trim_end_matches(')');
        // Kernel frames (`[kernel.kallsyms]`) come first in a sample taken in the kernel; the
        // first user-space frame after them is the interrupted instruction, not a return
        // address.
        if dso.starts_with('[') {
            continue;
        }
        let this = depth;
        depth += 1;
        if Path::new(dso) != exe && std::fs::canonicalize(dso).ok().as_deref() != Some(exe) {
            continue;
        }
        let Some((_ip, sym)) = head.split_once(char::is_whitespace) else {
            continue;
        };
        let Some((name, off)) = sym.trim().rsplit_once("+0x") else {
            continue;
        };
        let (Some(Some(base)), Ok(off)) = (symbols.get(name), u64::from_str_radix(off, 16)) else {
            continue;
        };
        chain.push(Frame {
            addr: base + off,
            is_return: this > 0,
        });
    }
    samples
}

/// Each address's inline chain, innermost first (empty when the symbolizer knows nothing),
/// and what the answers say of the debug info.
fn symbolize(
    tool: &str,
    bin: &Path,
    addrs: &BTreeSet<u64>,
) -> Res<(HashMap<u64, Vec<String>>, DebugInfo)> {
    use std::io::Write;
    let mut child = Command::new(tool)
        .arg(format!("--obj={}", bin.display()))
        .args(["--inlining", "--demangle", "--output-style=LLVM"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("running {tool}: {e}"))?;
    let mut input = String::new();
    for a in addrs {
        let _ = writeln!(input, "0x{a:x}");
    }
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Written from a thread: the tool's output would otherwise fill its pipe while this one
    // is still writing.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("running {tool}: {e}"))?;
    writer
        .join()
        .expect("writer thread")
        .map_err(|e| format!("writing to {tool}: {e}"))?;
    if !out.status.success() {
        return Err(Failure::Error(format!("{tool} failed: {}", out.status)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let blocks: Vec<&str> = text
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .collect();
    if blocks.len() != addrs.len() {
        return Err(Failure::Error(format!(
            "{tool} answered {} addresses for {} asked",
            blocks.len(),
            addrs.len()
        )));
    }
    let mut debug = DebugInfo::default();
    let chains = addrs
        .iter()
        .zip(blocks)
        .map(|(&a, block)| {
            // Pairs of lines: the function, then `file:line:column` (`??:0:0` when unknown).
            let lines: Vec<&str> = block.lines().collect();
            let pairs: Vec<(&str, &str)> = lines
                .chunks(2)
                .map(|p| (p[0].trim(), p.get(1).map_or("??", |l| l.trim())))
                .collect();
            if pairs
                .iter()
                .all(|(_, file)| file.starts_with("??") || file.ends_with(":0:0"))
            {
                debug.no_lines += 1;
            }
            for (name, _) in pairs.iter().take(pairs.len().saturating_sub(1)) {
                debug.inlined += 1;
                if !name.contains("::") {
                    debug.short_names += 1;
                }
            }
            let chain = pairs
                .iter()
                .map(|(name, _)| name.to_string())
                .filter(|f| f != "??")
                .collect();
            (a, chain)
        })
        .collect();
    Ok((chains, debug))
}

/// Whether the ELF file `bin` has a section named `name` (read from its section headers: no
/// tool's output format to depend on).
fn has_section(bin: &Path, name: &str) -> Res<bool> {
    let bytes = std::fs::read(bin).map_err(|e| format!("reading {}: {e}", bin.display()))?;
    let not_elf = || {
        Failure::Error(format!(
            "{} is not a 64-bit little-endian ELF file",
            bin.display()
        ))
    };
    let u16_at = |o: usize| -> Option<usize> {
        Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?) as usize)
    };
    let u32_at = |o: usize| -> Option<usize> {
        Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?) as usize)
    };
    let u64_at = |o: usize| -> Option<usize> {
        usize::try_from(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?)).ok()
    };
    if bytes.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return Err(not_elf());
    }
    let headers = (|| {
        let (shoff, shentsize, shnum, shstrndx) =
            (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
        // A section header: name offset at 0, file offset at 0x18.
        let strtab = u64_at(shoff + shstrndx * shentsize + 0x18)?;
        let mut names = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let start = strtab + u32_at(shoff + i * shentsize)?;
            let len = bytes.get(start..)?.iter().position(|&b| b == 0)?;
            names.push(&bytes[start..start + len]);
        }
        Some(names)
    })()
    .ok_or_else(not_elf)?;
    Ok(headers.contains(&name.as_bytes()))
}

/// What the symbolizer's answers say of the binary's debug info.
#[derive(Default)]
struct DebugInfo {
    /// Addresses without any source line.
    no_lines: usize,
    /// Inlined frames (every frame of a chain but its outermost).
    inlined: usize,
    /// Inlined frames named without a `::` path.
    short_names: usize,
}

// ---------------------------------------------------------------------------------------
// The two binaries

trait ClearCabprof {
    /// The runs must not inherit the caller's `CABPROF_*` settings (a sampling period, a
    /// mode, an output path): each sets what it needs.
    fn env_clear_cabprof(&mut self) -> &mut Self;
}

impl ClearCabprof for Command {
    fn env_clear_cabprof(&mut self) -> &mut Self {
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CABPROF") {
                self.env_remove(k);
            }
        }
        self
    }
}

fn run_plain(plain: &Path) -> Res<Output> {
    let out = Command::new(plain)
        .env_clear_cabprof()
        .output()
        .map_err(|e| format!("running {}: {e}", plain.display()))?;
    if !out.status.success() {
        return Err(Failure::Error(format!(
            "{} failed ({}): {}",
            plain.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(out)
}

fn run_profiled(profiled: &Path, report: &Path) -> Res<()> {
    let out = Command::new(profiled)
        .env_clear_cabprof()
        .env("CABPROF", "1")
        .env("CABPROF_ANALYSES", "time")
        .env("CABPROF_OUTPUT", report)
        .output()
        .map_err(|e| format!("running {}: {e}", profiled.display()))?;
    if !out.status.success() {
        return Err(Failure::Error(format!(
            "{} failed ({}): {}",
            profiled.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// Wall time (ns) of each phase summed over the rounds, from the workload's printed lines
/// (`compress round 1: <ns> ns ...`).
fn wall_times(out: &Output, bin: &Path) -> Res<[f64; 2]> {
    let mut sums = [0.0; 2];
    let mut seen = [0; 2];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        for (p, word) in ["compress round", "decompress round"].iter().enumerate() {
            if let Some(rest) = line.strip_prefix(word) {
                let ns = rest
                    .split(": ")
                    .nth(1)
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse::<f64>().ok())
                    .ok_or_else(|| format!("{}: cannot read `{line}`", bin.display()))?;
                sums[p] += ns;
                seen[p] += 1;
            }
        }
    }
    if seen[0] == 0 || seen[0] != seen[1] {
        return Err(Failure::Error(format!(
            "{}: expected as many compress as decompress rounds, found {} and {}",
            bin.display(),
            seen[0],
            seen[1]
        )));
    }
    Ok(sums)
}

// ---------------------------------------------------------------------------------------
// cabprof's reports

/// What the comparison reads from one report: per function key its self time, whole run and
/// per phase, and the top-level functions' inclusive times.
struct Report {
    /// The keys of every function in the method table: the instrumented ones that ran.
    methods: BTreeSet<String>,
    exclusive: BTreeMap<String, f64>,
    phases: [BTreeMap<String, f64>; 2],
    /// Compensated and raw inclusive ns of each phase's top-level function.
    inclusive: [(f64, f64); 2],
    /// How far the report says each of those may be off, in ns: its sample's interval plus
    /// its calibration's error (the `±` the text shows).
    stated: [f64; 2],
    /// The report's own account of what it took out per timed call, for the record.
    timed_ns: f64,
}

impl Report {
    fn read(path: &Path) -> Res<Report> {
        let bad =
            |what: &str| Failure::Error(format!("{}: malformed report: {what}", path.display()));
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the report {}: {e}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        let mut keys: HashMap<u64, String> = HashMap::new();
        for m in json["methods"]
            .as_array()
            .ok_or_else(|| bad("no `methods` array"))?
        {
            let id = m["id"]
                .as_u64()
                .ok_or_else(|| bad("a method without a numeric `id`"))?;
            let name = m["name"]
                .as_str()
                .ok_or_else(|| bad("a method without a `name`"))?;
            let module = m["module"].as_str().unwrap_or("");
            // A trait method is named `<Type as Trait>::f` without its module.
            let full = if name.starts_with('<') {
                format!("{module}::{}", untrait(name))
            } else {
                name.to_string()
            };
            if let Some(k) = key(&full) {
                keys.insert(id, k);
            }
        }
        let time = json.get("time").filter(|t| !t.is_null()).ok_or_else(|| {
            bad("no `time` section (was the time analysis on: CABPROF_ANALYSES=time?)")
        })?;
        let num = |v: &Value, field: &str| -> Res<f64> {
            v[field]
                .as_f64()
                .ok_or_else(|| bad(&format!("`{field}` missing or not a number")))
        };
        let mut exclusive = BTreeMap::new();
        let mut inclusive = [(f64::NAN, f64::NAN); 2];
        let mut stated = [0.0; 2];
        for f in time["functions"]
            .as_array()
            .ok_or_else(|| bad("no `time.functions`"))?
        {
            let id = f["method"]
                .as_u64()
                .ok_or_else(|| bad("a function without `method`"))?;
            let k = keys
                .get(&id)
                .ok_or_else(|| bad(&format!("method {id} is not in the method table")))?;
            *exclusive.entry(k.clone()).or_insert(0.0) += num(f, "exclusive_ns")?;
            if let Some(p) = PHASES.iter().position(|p| p.1 == k) {
                inclusive[p] = (num(f, "inclusive_ns")?, num(f, "raw_inclusive_ns")?);
                stated[p] = f["inclusive_ci_ns"].as_f64().unwrap_or(0.0)
                    + f["calibration_error_ns"].as_f64().unwrap_or(0.0);
            }
        }
        if let Some(p) = inclusive.iter().position(|i| i.0.is_nan()) {
            return Err(bad(&format!("no time entry for `{}`", PHASES[p].1)));
        }
        // Per phase: each calling context belongs to the top-level function at its root;
        // contexts are listed after their parents.
        let mut phases = [BTreeMap::new(), BTreeMap::new()];
        let mut root_of: HashMap<u64, Option<usize>> = HashMap::new();
        for c in time["contexts"]
            .as_array()
            .ok_or_else(|| bad("no `time.contexts`"))?
        {
            let id = c["id"]
                .as_u64()
                .ok_or_else(|| bad("a context without `id`"))?;
            let parent = c["parent"]
                .as_u64()
                .ok_or_else(|| bad("a context without `parent`"))?;
            let method = c["method"]
                .as_u64()
                .ok_or_else(|| bad("a context without `method`"))?;
            let k = keys.get(&method).ok_or_else(|| {
                bad(&format!(
                    "context method {method} is not in the method table"
                ))
            })?;
            let phase = if parent == 0 {
                PHASES.iter().position(|p| p.1 == k)
            } else {
                *root_of.get(&parent).ok_or_else(|| {
                    bad(&format!("context {id} listed before its parent {parent}"))
                })?
            };
            root_of.insert(id, phase);
            if let Some(p) = phase {
                *phases[p].entry(k.clone()).or_insert(0.0) += num(c, "exclusive_ns")?;
            }
        }
        let timed_ns = time["compensation"]["timed_ns"]
            .as_f64()
            .unwrap_or(f64::NAN);
        Ok(Report {
            methods: keys.into_values().collect(),
            exclusive,
            phases,
            inclusive,
            stated,
            timed_ns,
        })
    }
}

// ---------------------------------------------------------------------------------------
// The comparison

fn shares(m: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let total: f64 = m.values().sum();
    m.iter()
        .map(|(k, &v)| (k.clone(), 100.0 * v / total))
        .collect()
}

fn counts(m: &BTreeMap<String, u64>) -> BTreeMap<String, f64> {
    m.iter().map(|(k, &v)| (k.clone(), v as f64)).collect()
}

/// One share table: its text and the worst difference `(points, function, process)`.
fn share_table(
    title: &str,
    perf: &BTreeMap<String, f64>,
    cab: &[BTreeMap<String, f64>],
    labels: &[&str],
) -> (String, Option<(f64, String, usize)>) {
    let mut rows: Vec<&String> = perf
        .keys()
        .chain(cab.iter().flat_map(|m| m.keys()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| {
            perf.get(*k).copied().unwrap_or(0.0) >= SHARE_FLOOR
                || cab
                    .iter()
                    .any(|m| m.get(*k).copied().unwrap_or(0.0) >= SHARE_FLOOR)
        })
        .collect();
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    rows.sort_by(|a, b| get(perf, b).total_cmp(&get(perf, a)));
    let width = rows.iter().map(|k| k.len()).max().unwrap_or(8).max(8);
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let _ = write!(s, "  {:<width$}  {:>6}", "function", labels[0]);
    for i in 1..=cab.len() {
        let head = labels
            .get(i)
            .map_or_else(|| format!("p{i}"), |l| l.to_string());
        let _ = write!(s, "  {:>16}", format!("{head} (diff)"));
    }
    let _ = writeln!(s, "  {:>8}", "max|diff|");
    let mut worst: Option<(f64, String, usize)> = None;
    for k in rows {
        let p = get(perf, k);
        let _ = write!(s, "  {k:<width$}  {p:>6.1}");
        let mut max = 0.0f64;
        for (i, m) in cab.iter().enumerate() {
            let c = get(m, k);
            let d = c - p;
            let _ = write!(s, "  {:>16}", format!("{c:.1} ({d:+.1})"));
            max = max.max(d.abs());
            if worst.as_ref().is_none_or(|w| d.abs() > w.0.abs()) {
                worst = Some((d, k.clone(), i + 1));
            }
        }
        let _ = writeln!(s, "  {max:>8.1}");
    }
    (s, worst)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn compare(
    sampled: &Sampled,
    counting: &Sampled,
    counting_events: u64,
    reports: &[Report],
    plain_runs: &[[f64; 2]],
) -> String {
    let mut s = String::new();
    for (build, p) in [
        ("plain build".to_string(), sampled),
        (
            format!(
                "profiled build counting calls, no clock read: {counting_events} events recorded"
            ),
            counting,
        ),
    ] {
        let attributed: u64 = p.whole.values().sum();
        let _ =
            writeln!(
            s,
            "perf ({build}; cpu-clock at 9999 Hz, DWARF call chains, inline frames): {} samples, \
             {attributed} in instrumented functions of the crate, {} in cabprof's own code \
             (left out), {} outside the crate's functions (input generation, round-trip check, \
             start-up, cabprof's analyzers; left out), {} unwound short of the top-level function \
             (phase by module), {} of them in no phase (the crate's root; whole run only)",
            p.total, p.in_cabprof, p.outside, p.by_module + p.no_phase, p.no_phase
        );
    }
    let _ = writeln!(
        s,
        "cabprof (profiled build, CABPROF=1 CABPROF_ANALYSES=time, every call timed): {} processes, \
         calibrated cost of a timed call: {}",
        reports.len(),
        reports
            .iter()
            .map(|r| format!("{:.1} ns", r.timed_ns))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "(a) self-time share (%) of the functions at {SHARE_FLOOR} % or more in perf or in any process; \
         diff = cabprof - perf, in points; against perf on the plain build, then on the profiled \
         build counting calls (the program cabprof times, less cabprof's own code)"
    );
    let mut verdicts = Vec::new();
    let mut effect = String::new();
    let whole = |p: &Sampled| shares(&counts(&p.whole));
    let phase = |p: &Sampled, i: usize| shares(&counts(&p.phases[i]));
    let mut tables = vec![(
        "whole run".to_string(),
        "whole run",
        whole(sampled),
        whole(counting),
        reports
            .iter()
            .map(|r| shares(&r.exclusive))
            .collect::<Vec<_>>(),
    )];
    for (p, (name, top)) in PHASES.iter().enumerate() {
        tables.push((
            format!("{name} only (under {top})"),
            name,
            phase(sampled, p),
            phase(counting, p),
            reports.iter().map(|r| shares(&r.phases[p])).collect(),
        ));
    }
    for (title, what, perf_plain, perf_counting, cab) in &tables {
        for (reference, perf) in [("plain", perf_plain), ("counting", perf_counting)] {
            let (t, w) = share_table(
                &format!("{title}, against perf on the {reference} build"),
                perf,
                cab,
                &["perf"],
            );
            s.push_str(&t);
            verdicts.push((*what, reference, w));
        }
        let (t, _) = share_table(
            title,
            perf_plain,
            std::slice::from_ref(perf_counting),
            &["plain", "counting"],
        );
        effect.push_str(&t);
    }

    let _ = writeln!(s);
    let refs: Vec<f64> = (0..2)
        .map(|p| median(plain_runs.iter().map(|r| r[p]).collect()))
        .collect();
    let _ = writeln!(
        s,
        "(b) top-level inclusive time (3 rounds), compensated ± its stated error (raw), against the plain build's wall \
         time of the same phases: the median of {} plain processes without perf, and the plain \
         process run just before (paired; the host's load drifts between processes)",
        plain_runs.len()
    );
    for (p, (_, top)) in PHASES.iter().enumerate() {
        let runs: Vec<String> = plain_runs
            .iter()
            .map(|r| format!("{:.1}", r[p] / 1e6))
            .collect();
        let _ = writeln!(
            s,
            "  plain {top}: median {:.1} ms (runs: {} ms)",
            refs[p] / 1e6,
            runs.join(", ")
        );
    }
    let _ = write!(s, "  {:<8}", "process");
    for (_, top) in PHASES {
        let name = top.rsplit("::").next().unwrap_or(top);
        let _ = write!(
            s,
            " {:>27} {:>7} {:>7} {:>5}",
            format!("{name} ± (raw)"),
            "/median",
            "/paired",
            "plain"
        );
    }
    let _ = writeln!(s);
    // The ratio furthest from 1, against each reference: (ratio, function, process).
    let mut worst: [Option<(f64, &str, usize)>; 2] = [None, None];
    // Per phase: the processes whose paired plain run lay within the report's `±`.
    let mut inside = [0usize; 2];
    for (i, (r, paired)) in reports.iter().zip(plain_runs).enumerate() {
        let _ = write!(s, "  {:<8}", format!("p{}", i + 1));
        for (p, (_, top)) in PHASES.iter().enumerate() {
            let (comp, raw) = r.inclusive[p];
            let ratios = [comp / refs[p], comp / paired[p]];
            let within = (comp - paired[p]).abs() <= r.stated[p];
            inside[p] += usize::from(within && r.stated[p] > 0.0);
            let _ = write!(
                s,
                " {:>27} {:>6.2}x {:>6.2}x {:>5}",
                format!(
                    "{:.1}±{:.1} ms ({:.1})",
                    comp / 1e6,
                    r.stated[p] / 1e6,
                    raw / 1e6
                ),
                ratios[0],
                ratios[1],
                match (r.stated[p] > 0.0, within) {
                    (false, _) => "n/a",
                    (true, true) => "in",
                    (true, false) => "OUT",
                }
            );
            for (w, ratio) in worst.iter_mut().zip(ratios) {
                if w.is_none_or(|w| (ratio - 1.0).abs() > (w.0 - 1.0).abs()) {
                    *w = Some((ratio, top, i + 1));
                }
            }
        }
        let _ = writeln!(s);
    }
    if !sampled.unseen.is_empty() {
        let _ = writeln!(s);
        let _ =
            writeln!(
            s,
            "instrumented functions in no perf sample (too rarely run to be sampled, or a name \
             that did not map): {}",
            sampled.unseen.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(s, "(c) verdict");
    for (what, reference, w) in verdicts {
        match w {
            Some((d, f, p)) => {
                let ok = d.abs() <= SHARE_POINTS;
                let _ = writeln!(
                    s,
                    "  shares within {SHARE_POINTS} points of perf on the {reference} build in every process ({what}): {} (largest: {f} in p{p}, {d:+.1} points)",
                    if ok { "yes" } else { "NO" }
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  shares ({what}, against perf on the {reference} build): no function at {SHARE_FLOOR} % or more"
                );
            }
        }
    }
    for (p, (_, top)) in PHASES.iter().enumerate() {
        let _ = writeln!(
            s,
            "  the paired plain run within {top}'s stated ± (sample interval + calibration error): {}/{} processes",
            inside[p],
            reports.len()
        );
    }
    for (reference, w) in ["the median plain run", "the paired plain run"]
        .iter()
        .zip(worst)
    {
        if let Some((ratio, top, p)) = w {
            let ok = (ratio - 1.0).abs() <= INCLUSIVE_TOLERANCE;
            let _ = writeln!(
                s,
                "  top-level inclusive within {:.0} % of {reference} in every process: {} (furthest: {top} in p{p}, {ratio:.2}x)",
                INCLUSIVE_TOLERANCE * 100.0,
                if ok { "yes" } else { "NO" }
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "(d) what instrumenting does to the program: perf's shares on the profiled build counting \
         calls (cabprof's own code left out) against the plain build's; diff in points"
    );
    s.push_str(&effect);
    s
}
