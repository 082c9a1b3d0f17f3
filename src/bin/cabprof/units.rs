//! Byte sizes on the command line (`32K`, `2M`) and in output (`48 KiB`).

/// Parse a byte count: decimal digits with an optional `K`, `M` or `G` suffix (binary
/// multiples, either case, an optional trailing `B` or `iB`): `64`, `32K`, `32KiB`, `2M`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match body.as_bytes().last() {
        Some(b'K') => (&body[..body.len() - 1], 10),
        Some(b'M') => (&body[..body.len() - 1], 20),
        Some(b'G') => (&body[..body.len() - 1], 30),
        _ => (body, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{text:?} is not a size (examples: 64, 32K, 512K, 2M)"))
}

/// `bytes` in the largest binary unit that divides it (`48 KiB`, `3 MiB`, `100 B`), or with
/// one decimal when none does.
pub fn show_bytes(bytes: u64) -> String {
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
pub fn show_millions(per_second: f64) -> String {
    let m = per_second / 1e6;
    if m >= 100.0 {
        format!("{m:.0}")
    } else if m >= 10.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.2}")
    }
}
