//! The words of a timed call: the durations `TimedReturn` and `LongReturn` words carry (exact
//! below a bound, a floating-point-like encoding above it) and the `Time` word.

#[cfg(doc)]
use super::decode;
use super::{ID_BITS, ID_MASK, PAYLOAD_MASK, TAG_RETURN, TAG_SHIFT, TAG_TIME, TAG_TIMED_RETURN};

/// A `TimedReturn` word's callee id and duration in ticks.
#[inline(always)]
pub const fn as_timed_return(word: u64) -> Option<(u32, u64)> {
    if word >> TAG_SHIFT == TAG_TIMED_RETURN {
        let p = word & PAYLOAD_MASK;
        Some((
            (p & ID_MASK) as u32,
            decode_duration(((p >> ID_BITS) & ID_MASK) as u32),
        ))
    } else {
        None
    }
}

/// A `LongReturn` word's callee id, duration in ticks and whether it was timed (the words
/// [`decode`] reads as a `LongReturn`).
#[inline(always)]
pub const fn as_long_return(word: u64) -> Option<(u32, u64, bool)> {
    if word >> TAG_SHIFT == TAG_RETURN && (word & PAYLOAD_MASK) >> ID_BITS != 0 {
        let p = word & PAYLOAD_MASK;
        Some((
            (p & ID_MASK) as u32,
            decode_long_duration(((p >> ID_BITS) & LONG_FIELD_MASK) as u32),
            p & LONG_TIMED_BIT != 0,
        ))
    } else {
        None
    }
}

/// A `LongReturn`'s timed flag.
pub(super) const LONG_TIMED_BIT: u64 = 1 << 59;
/// Its 29-bit duration field.
pub(super) const LONG_FIELD_MASK: u64 = (1 << 29) - 1;
/// Durations a `LongReturn` carries exactly: below 2^28 ticks (about 0.09 s at 3 GHz).
pub const LONG_EXACT_DURATION: u64 = 1 << 28;
/// The longest duration a `LongReturn` carries (2^60 − 2^36 ticks: years); longer ones
/// saturate.
pub const MAX_LONG_DURATION: u64 = ((1 << 24) - 1) << MAX_DURATION_SHIFT;

/// The 29-bit duration field of a `LongReturn`: below [`LONG_EXACT_DURATION`] the ticks
/// themselves; above, bit 28 set, a 5-bit shift − 5 and the 23 bits below the leading one of
/// `ticks >> shift`.
#[inline]
pub(super) const fn encode_long_duration(ticks: u64) -> u32 {
    if ticks < LONG_EXACT_DURATION {
        return ticks as u32;
    }
    let t = if ticks > MAX_LONG_DURATION {
        MAX_LONG_DURATION
    } else {
        ticks
    };
    let bits = 64 - t.leading_zeros(); // 29..=60
    let shift = bits - 24; // 5..=36
    let top = t >> shift; // 24 bits, leading one set
    (1 << 28) | ((shift - 5) << 23) | (top as u32 & 0x7F_FFFF)
}

#[inline]
pub(super) const fn decode_long_duration(field: u32) -> u64 {
    if field < (1 << 28) {
        return field as u64;
    }
    let shift = ((field >> 23) & 0x1F) + 5;
    ((field as u64 & 0x7F_FFFF) | 1 << 23) << shift
}

/// Durations a `TimedReturn` carries exactly: below 2^29 ticks (about 0.18 s at 3 GHz).
pub const EXACT_DURATION: u64 = 1 << 29;
/// The longest duration a `TimedReturn` carries (2^61 − 2^36 ticks: months); longer ones
/// saturate.
pub const MAX_DURATION: u64 = ((1 << 25) - 1) << MAX_DURATION_SHIFT;
pub(super) const MAX_DURATION_SHIFT: u32 = 36;

/// The 30-bit duration field: below [`EXACT_DURATION`] the ticks themselves; above, bit 29
/// set, a 5-bit shift − 5 and the 24 bits below the leading one of `ticks >> shift`.
#[inline(always)]
pub(super) const fn encode_duration(ticks: u64) -> u32 {
    if ticks < EXACT_DURATION {
        return ticks as u32;
    }
    let t = if ticks > MAX_DURATION {
        MAX_DURATION
    } else {
        ticks
    };
    let bits = 64 - t.leading_zeros(); // 30..=61
    let shift = bits - 25; // 5..=36
    let top = t >> shift; // 25 bits, leading one set
    (1 << 29) | ((shift - 5) << 24) | (top as u32 & 0xFF_FFFF)
}

#[inline(always)]
pub(super) const fn decode_duration(field: u32) -> u64 {
    if field < (1 << 29) {
        return field as u64;
    }
    let shift = ((field >> 24) & 0x1F) + 5;
    ((field as u64 & 0xFF_FFFF) | 1 << 24) << shift
}

/// A `Time` word's counter value.
#[inline(always)]
pub const fn as_time(word: u64) -> Option<u64> {
    if word >> TAG_SHIFT == TAG_TIME {
        Some(word & PAYLOAD_MASK)
    } else {
        None
    }
}
