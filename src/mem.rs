//! Memory-access events for what `#[profile(memory)]` cannot see (accesses inside macros, through
//! method calls, in uninstrumented code).
//!
//! Each call emits one `Mem { addr, size, store }` event for the bytes of `x`: the address of
//! `x`, and its size rounded up to a power of two and capped at 128 bytes (the event's size
//! field; the cache simulator splits an access across lines itself). Zero-sized values emit
//! nothing. With no session running a call costs one load and one branch; compiled out
//! (without cabprof's `enabled` feature) nothing.
//!
//! ```
//! let table = [1u32, 2, 3];
//! cabprof::mem::load(&table[1]); // as if `table[1]` were read here
//! let mut total = 0u64;
//! total += 1;
//! cabprof::mem::store(&total); // as if `total` were written here
//! ```

#[cfg(feature = "enabled")]
use cabprof_cab::event::{Event, MAX_ACCESS_SIZE};
#[cfg(feature = "enabled")]
use cabprof_cab::runtime::{active, emit};

/// Record a read of `x`.
#[inline(always)]
pub fn load<T: ?Sized>(x: &T) {
    #[cfg(feature = "enabled")]
    record(x, false);
    #[cfg(not(feature = "enabled"))]
    let _ = x;
}

/// Record a write of `x` (only its address is needed, so a shared reference will do).
#[inline(always)]
pub fn store<T: ?Sized>(x: &T) {
    #[cfg(feature = "enabled")]
    record(x, true);
    #[cfg(not(feature = "enabled"))]
    let _ = x;
}

/// The event size for a value of `bytes` bytes: the next power of two, at most 128; `None` for
/// zero-sized values.
#[cfg(feature = "enabled")]
#[inline(always)]
pub(crate) const fn size_class(bytes: usize) -> Option<u32> {
    if bytes == 0 {
        None
    } else if bytes >= MAX_ACCESS_SIZE as usize {
        Some(MAX_ACCESS_SIZE)
    } else {
        Some(bytes.next_power_of_two() as u32)
    }
}

#[cfg(feature = "enabled")]
#[inline(always)]
pub(crate) fn record<T: ?Sized>(x: &T, store: bool) {
    if active() {
        record_active(x, store);
    }
}

#[cfg(feature = "enabled")]
#[inline]
fn record_active<T: ?Sized>(x: &T, store: bool) {
    let Some(size) = size_class(std::mem::size_of_val(x)) else {
        return;
    };
    let addr = x as *const T as *const () as usize as u64;
    // User-space addresses fit the event's 56 bits on every 64-bit target we know; anything
    // else is dropped rather than truncated into a wrong address.
    if let Ok(e) = Event::mem(addr, size, store) {
        emit(e);
    }
}

#[cfg(feature = "enabled")]
#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn sizes_round_up_to_powers_of_two_and_cap_at_128() {
        assert_eq!(size_class(0), None);
        assert_eq!(size_class(1), Some(1));
        assert_eq!(size_class(3), Some(4));
        assert_eq!(size_class(8), Some(8));
        assert_eq!(size_class(24), Some(32));
        assert_eq!(size_class(128), Some(128));
        assert_eq!(size_class(4096), Some(128));
    }
}
