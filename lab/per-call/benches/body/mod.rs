//! The body every per-call bench times (`per_call`, `clock_cost`), in one place so that their
//! figures stay comparable.

/// A short dependent chain of multiplies, about 2 ns with the call.
#[inline(always)]
pub(crate) fn work(x: u64) -> u64 {
    let mut h = x;
    for _ in 0..3 {
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (h >> 29);
    }
    h
}
