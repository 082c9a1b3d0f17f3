//! `cabprof hw`: the host's caches as Linux describes them and as the X-Ray probe measures
//! the L1d (Yotov et al., QEST 2005; `cabprof_cab::hw`), and the CAB ring sizes derived from them.

use std::process::ExitCode;
use std::time::Instant;

use cabprof_cab::hw::{self, CacheGeometry, L1dSource};
use clap::Args;

use crate::units::show_bytes;
use crate::CliError;

/// Times the probe is run before its failure is reported.
const PROBE_ATTEMPTS: usize = 3;

const EXAMPLES: &str = "\
Examples:
  cabprof hw               sysfs, the probe's L1d beside sysfs's, and the ring sizes
  cabprof hw --no-probe    sysfs only (the probe takes up to a few seconds)

The chunk is 4 × the L1d (Ha et al. 2009, §3.1.3: a chunk must outlast the producer's L1, so
the chunk the analyzer reads was evicted from the writer's cache before it is read), the
buffer 16 chunks (the paper's 2 MB of 128 KB chunks, scaled). `cabprof simulate` and sessions
use these unless told otherwise.";

/// Arguments of `cabprof hw`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub(crate) struct HwArgs {
    /// Skip the X-Ray probe (it times memory walks for up to a few seconds).
    #[arg(long)]
    pub no_probe: bool,
}

/// Run `cabprof hw`.
pub(crate) fn run(args: &HwArgs) -> Result<ExitCode, CliError> {
    let mut o = String::new();
    let sysfs = hw::from_sysfs();
    o += &format!("caches of cpu0 (Linux sysfs, {}):\n", hw::SYSFS_CACHE_DIR);
    let sysfs_l1d = match &sysfs {
        Ok(caches) => {
            for c in caches {
                o += &format!("  {c}\n");
            }
            hw::find_l1d(caches)
        }
        Err(e) => {
            o += &format!("  unavailable: {e}\n");
            None
        }
    };
    o += "\nL1 data cache, two ways:\n";
    o += &format!("  {:<12} {}\n", "sysfs", show(sysfs_l1d.as_ref()));
    if args.no_probe {
        o += &format!("  {:<12} not run (--no-probe)\n", "X-Ray probe");
    } else {
        // Noise from other processes only ever slows a walk, which can make a step of the
        // probe miss the latency jump it looks for; a fresh attempt usually succeeds.
        let started = Instant::now();
        let mut probed = hw::probe_host_l1d();
        for _ in 1..PROBE_ATTEMPTS {
            if probed.is_ok() {
                break;
            }
            probed = hw::probe_host_l1d();
        }
        let secs = started.elapsed().as_secs_f64();
        match probed {
            Ok(g) => {
                let verdict = match &sysfs_l1d {
                    Some(s) => agreement(s, &g),
                    None => String::new(),
                };
                o += &format!(
                    "  {:<12} {g} (measured in {secs:.2} s){verdict}\n",
                    "X-Ray probe"
                );
            }
            Err(e) => {
                o += &format!(
                    "  {:<12} failed {PROBE_ATTEMPTS} times in {secs:.2} s; last: {e}\n",
                    "X-Ray probe"
                )
            }
        }
    }
    let (l1d, source) = hw::host_l1d_with_source();
    let source = match source {
        L1dSource::Sysfs => "sysfs's L1d",
        L1dSource::Probe => "the probe's L1d (sysfs has none)",
        L1dSource::Fallback => "the fallback L1d (neither sysfs nor the probe gave one)",
    };
    let chunk = hw::chunk_bytes_for(&l1d);
    o += &format!(
        "\nrecommended CAB ring (from {source}, {}):\n",
        show_bytes(l1d.size_bytes as u64)
    );
    o += &format!(
        "  chunk   {:>10}  ({chunk} bytes: 4 × L1d, Ha et al. 2009 §3.1.3)\n",
        show_bytes(chunk as u64)
    );
    o += &format!(
        "  buffer  {:>10}  ({} bytes: 16 chunks)\n",
        show_bytes(hw::recommended_buffer_bytes() as u64),
        hw::recommended_buffer_bytes()
    );
    let sampling = hw::recommended_sampling_chunk_bytes();
    o += &format!(
        "  sampling mode: chunk {} ({sampling} bytes: an eighth), buffer {} (16 chunks)\n",
        show_bytes(sampling as u64),
        show_bytes(16 * sampling as u64)
    );
    print!("{o}");
    Ok(ExitCode::SUCCESS)
}

fn show(g: Option<&CacheGeometry>) -> String {
    g.map_or_else(|| "none described".into(), |g| g.to_string())
}

/// How the probe's answer compares with sysfs's.
fn agreement(sysfs: &CacheGeometry, probe: &CacheGeometry) -> String {
    let mut differ = Vec::new();
    if sysfs.size_bytes != probe.size_bytes {
        differ.push("capacity");
    }
    if sysfs.ways != probe.ways {
        differ.push("ways");
    }
    if sysfs.line_bytes != probe.line_bytes {
        differ.push("line size");
    }
    if differ.is_empty() {
        ": agrees with sysfs".into()
    } else {
        format!(": differs from sysfs in {}", differ.join(", "))
    }
}
