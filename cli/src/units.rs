//! Byte sizes on the command line (`32K`, `2M`) and in output (`48 KiB`).

/// Parse a byte count by the project's one rule ([`cabprof_cab::parse_bytes`], the same as for
/// `CABPROF_BUFFER`): decimal digits with an optional `K`, `M` or `G` suffix (binary
/// multiples, either case, an optional trailing `B` or `iB`): `64`, `32K`, `32KiB`, `2M`.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    cabprof_cab::parse_bytes("size", text)
        .map(|n| n as u64)
        .map_err(|e| e.to_string())
}

/// `bytes` in the largest binary unit that divides it (`48 KiB`, `3 MiB`, `100 B`), or with
/// one decimal when none does.
pub(crate) fn show_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    for (unit, name) in UNITS {
        if bytes >= unit {
            return format!("{:.1} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

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
