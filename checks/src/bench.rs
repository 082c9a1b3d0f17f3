//! What the benches here share: their rounds setting, and the CPU they ran on.

/// The whole number of rounds in the environment variable `var`, from `lo` to `hi`
/// (`default` when unset); anything else exits with status 2 after naming the variable and
/// the range.
pub fn rounds(var: &str, lo: usize, hi: usize, default: usize) -> usize {
    match std::env::var_os(var) {
        None => default,
        Some(v) => match v.to_str().and_then(|s| s.trim().parse::<usize>().ok()) {
            Some(n) if (lo..=hi).contains(&n) => n,
            _ => {
                eprintln!(
                    "{var}={v:?}: expected a whole number from {lo} to {hi} (unset: {default})"
                );
                std::process::exit(2);
            }
        },
    }
}

/// The CPU's model name (Linux), for a table's header.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
