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

/// The 29-bit duration field of a `LongReturn` (see [`encode_field`]).
#[inline]
pub(super) const fn encode_long_duration(ticks: u64) -> u32 {
    encode_field::<29>(ticks)
}

#[inline]
pub(super) const fn decode_long_duration(field: u32) -> u64 {
    decode_field::<29>(field)
}

/// Durations a `TimedReturn` carries exactly: below 2^29 ticks (about 0.18 s at 3 GHz).
pub const EXACT_DURATION: u64 = 1 << 29;
/// The longest duration a `TimedReturn` carries (2^61 − 2^36 ticks: months); longer ones
/// saturate.
pub const MAX_DURATION: u64 = ((1 << 25) - 1) << MAX_DURATION_SHIFT;
pub(super) const MAX_DURATION_SHIFT: u32 = 36;

/// The 30-bit duration field of a `TimedReturn` (see [`encode_field`]).
#[inline(always)]
pub(super) const fn encode_duration(ticks: u64) -> u32 {
    encode_field::<30>(ticks)
}

#[inline(always)]
pub(super) const fn decode_duration(field: u32) -> u64 {
    decode_field::<30>(field)
}

/// A duration field of `BITS` bits: below 2^(BITS − 1) ticks the ticks themselves (exact);
/// above, the top bit set, a 5-bit shift − 5 and the BITS − 6 bits below the leading one of
/// `ticks >> shift` (BITS − 5 significant bits), saturating at the largest such value with a
/// shift of [`MAX_DURATION_SHIFT`] ([`MAX_DURATION`] for 30 bits, [`MAX_LONG_DURATION`] for 29).
#[inline(always)]
const fn encode_field<const BITS: u32>(ticks: u64) -> u32 {
    let significant = BITS - 5;
    if ticks < 1 << (BITS - 1) {
        return ticks as u32;
    }
    let max = ((1 << significant) - 1) << MAX_DURATION_SHIFT;
    let t = if ticks > max { max } else { ticks };
    let shift = 64 - t.leading_zeros() - significant; // 5..=36
    let top = t >> shift; // `significant` bits, leading one set
    (1 << (BITS - 1))
        | ((shift - 5) << (significant - 1))
        | (top as u32 & ((1 << (significant - 1)) - 1))
}

/// The ticks of an [`encode_field`] field of `BITS` bits.
#[inline(always)]
const fn decode_field<const BITS: u32>(field: u32) -> u64 {
    let significant = BITS - 5;
    if field < 1 << (BITS - 1) {
        return field as u64;
    }
    let shift = ((field >> (significant - 1)) & 0x1F) + 5;
    ((field as u64 & ((1 << (significant - 1)) - 1)) | 1 << (significant - 1)) << shift
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
