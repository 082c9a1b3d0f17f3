//! Numbers as the evaluation page writes them.

/// `x` with `d` decimals (correctly rounded, ties to even), never `-0`.
pub(crate) fn fixed(x: f64, d: usize) -> String {
    let s = format!("{x:.d$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// Seconds as milliseconds with one decimal.
pub(crate) fn ms(s: f64) -> String {
    fixed(s * 1000.0, 1)
}

/// A fraction as a whole percentage.
pub(crate) fn pct(x: f64) -> String {
    format!("{}%", fixed(x * 100.0, 0))
}

/// A buffer size as the page writes it, by the project's one rule (`16 KiB`, `2 MiB`); a
/// size read back from a CSV that is not a whole number of bytes is shown as it was read.
pub(crate) fn buffer_label(bytes: f64) -> String {
    if bytes >= 0.0 && bytes.fract() == 0.0 && bytes < u64::MAX as f64 {
        cabprof_cab::show_bytes(bytes as u64)
    } else {
        format!("{bytes} B")
    }
}

/// A sampling rate as a percentage label: `0%`, `5%`, `100%`.
pub(crate) fn rate_label(rate: f64) -> String {
    let p = rate * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}%", fixed(p, 0))
    } else {
        format!("{}%", p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fixed(-0.0004, 1), "0.0");
        assert_eq!(pct(-0.004), "0%");
        assert_eq!(pct(-0.1084), "-11%");
        assert_eq!(fixed(23063.5, 0), "23064");
        assert_eq!(buffer_label(16384.0), "16 KiB");
        assert_eq!(buffer_label(33554432.0), "32 MiB");
        assert_eq!(buffer_label(1536.0), "1.5 KiB");
        assert_eq!(rate_label(0.05), "5%");
    }
}
