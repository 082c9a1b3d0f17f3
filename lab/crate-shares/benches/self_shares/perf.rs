//! perf's profile of a binary: recorded, symbolized, each sample given to the innermost
//! instrumented function.

use crate::names::{role, Role};
use crate::{ClearCabprof, Failure, Res, PHASES, PHASE_MODULES};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Self samples per function key, whole run and per phase.
pub(crate) struct Sampled {
    pub(crate) total: u64,
    /// Samples with no instrumented function of the crate on their stack (input generation,
    /// the round-trip check, start-up, cabprof's analyzers), left out of the shares.
    pub(crate) outside: u64,
    /// Samples taken in cabprof's own code (the profiled build), left out of the shares.
    pub(crate) in_cabprof: u64,
    /// Samples in an instrumented function with no top-level function found on the
    /// (truncated) stack, put in a phase by [`PHASE_MODULES`].
    pub(crate) by_module: u64,
    /// Such samples in a function of neither half (the crate's root): in the whole run only.
    pub(crate) no_phase: u64,
    pub(crate) whole: BTreeMap<String, u64>,
    pub(crate) phases: [BTreeMap<String, u64>; 2],
    /// Instrumented functions on no sampled stack: rarely run, or a name that did not map.
    pub(crate) unseen: BTreeSet<String>,
}

/// One frame of a sample's call chain in the binary.
pub(crate) struct Frame {
    /// The address in the ELF file's address space (what the symbolizer takes).
    addr: u64,
    /// Not the sampled instruction but a return address: the call is the byte before.
    is_return: bool,
}

/// One sample: the crate's function keys on its stack (see [`key`]), innermost first.
pub(crate) struct Stack {
    keys: Vec<String>,
    /// Taken in cabprof's own code: the first function of the crate or of cabprof met from
    /// the sampled instruction outwards is cabprof's.
    in_cabprof: bool,
}

/// Record `bin` (run with `env`) and return each sample's [`Stack`].
pub(crate) fn perf_profile(
    bin: &Path,
    env: &[(&str, &str)],
    symbolizer: &str,
    dir: &Path,
) -> Res<Vec<Stack>> {
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

    // Each address's inline chain once as roles; then each sample's, innermost first: the
    // call chain's frames, each expanded into its inline chain, kept where they are the
    // crate's own functions.
    let roles: HashMap<u64, Vec<Role>> = inline
        .iter()
        .map(|(&a, chain)| (a, chain.iter().map(|n| role(n)).collect()))
        .collect();
    let stacks = samples
        .iter()
        .map(|chain| {
            let all: Vec<&Role> = chain
                .iter()
                .flat_map(|f| roles[&(f.addr - u64::from(f.is_return))].iter())
                .collect();
            let keys = all
                .iter()
                .enumerate()
                .filter_map(|(i, r)| match r {
                    Role::Crate(k) => Some(k.clone()),
                    // The body of an instrumented function: the closure called (inlined or
                    // not, through the standard library's `FnOnce`) by cabprof's code.
                    Role::Closure(k) => all[i + 1..]
                        .iter()
                        .find(|outer| outer.decides())
                        .is_some_and(|outer| matches!(outer, Role::Cabprof))
                        .then(|| k.clone()),
                    Role::Cabprof | Role::Other => None,
                })
                .collect();
            Stack {
                keys,
                in_cabprof: all
                    .iter()
                    .find(|r| r.decides())
                    .is_some_and(|r| matches!(r, Role::Cabprof)),
            }
        })
        .collect();
    Ok(stacks)
}

/// Each sample to the innermost of its functions that cabprof instruments (`instrumented`:
/// the method tables of the reports), and to the phase of the outermost one (or, unwound
/// short of it, of the innermost one's module: [`PHASE_MODULES`]).
pub(crate) fn attribute(
    stacks: &[Stack],
    instrumented: &BTreeSet<String>,
    bin: &Path,
) -> Res<Sampled> {
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
pub(crate) fn symbol_table(bin: &Path) -> Res<HashMap<String, Option<u64>>> {
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
pub(crate) fn parse_script(
    text: &str,
    exe: &Path,
    symbols: &HashMap<String, Option<u64>>,
) -> Vec<Vec<Frame>> {
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
pub(crate) fn symbolize(
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
pub(crate) fn has_section(bin: &Path, name: &str) -> Res<bool> {
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
pub(crate) struct DebugInfo {
    /// Addresses without any source line.
    no_lines: usize,
    /// Inlined frames (every frame of a chain but its outermost).
    inlined: usize,
    /// Inlined frames named without a `::` path.
    short_names: usize,
}
