//! Byte sizes on the command line (`32K`, `2M`) and in output (`48 KiB`).

/// Parse a byte count by the project's one rule ([`cabprof_cab::parse_bytes`], the same as for
/// `CABPROF_BUFFER`): decimal digits with an optional `K`, `M` or `G` suffix (binary
/// multiples, either case, an optional trailing `B` or `iB`): `64`, `32K`, `32KiB`, `2M`.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    cabprof_cab::parse_bytes("size", text)
        .map(|n| n as u64)
        .map_err(|e| e.to_string())
}

/// Sizes in output, by the project's one rule.
pub(crate) use cabprof_cab::show_bytes;

/// A rate in millions (per second): `81.3`, `0.42`, `123`.
pub(crate) fn show_millions(per_second: f64) -> String {
    let m = per_second / 1e6;
    if m >= 100.0 {
        format!("{m:.0}")
    } else if m >= 10.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.2}")
    }
}
