//! The words of a global allocator wrapper: `Alloc`, `Dealloc` and `Realloc` (one word, or
//! `ReallocFrom` and `ReallocTo` for blocks too large for one).

#[cfg(doc)]
use super::MAX_ALLOC_SIZE;
use super::{
    Event, MAX_REALLOC_SIZE, MAX_WIDE_REALLOC_SIZE, PAYLOAD_MASK, REALLOC_BITS, REALLOC_TO_BIT,
    REALLOC_WIDE_BIT, TAG_ALLOC, TAG_DEALLOC, TAG_REALLOC, TAG_SHIFT,
};

impl Event {
    /// A block of `size` bytes was allocated. Sizes above [`MAX_ALLOC_SIZE`] saturate (no
    /// allocation that large can succeed), so this needs no check.
    #[inline(always)]
    pub const fn alloc(size: usize) -> Event {
        Event(TAG_ALLOC << TAG_SHIFT | Self::saturate(size))
    }

    /// A block of `size` bytes was freed; saturating like [`alloc`](Self::alloc).
    #[inline(always)]
    pub const fn dealloc(size: usize) -> Event {
        Event(TAG_DEALLOC << TAG_SHIFT | Self::saturate(size))
    }

    /// A block was resized from `old` to `new` bytes: one `Realloc` word when both sizes fit
    /// [`MAX_REALLOC_SIZE`], else `Err` with two words to write back to back, a `ReallocFrom`
    /// of `old` and a `ReallocTo` of `new` (for the rare block of half a gigabyte or more;
    /// sizes above [`MAX_WIDE_REALLOC_SIZE`], which no block can have, saturate).
    ///
    /// Two exact words rather than one with coarser sizes: the analysis adds the growth to
    /// the bytes allocated, so an inexact size would make `bytes − freed_bytes` drift from
    /// the heap's growth. Rather than a `Dealloc` and an `Alloc` (which it was): those count a
    /// free and an allocation, the old block's size twice.
    #[inline(always)]
    pub const fn realloc(old: usize, new: usize) -> Result<Event, [Event; 2]> {
        let (old, new) = (old as u64, new as u64);
        if old <= MAX_REALLOC_SIZE && new <= MAX_REALLOC_SIZE {
            Ok(Event(TAG_REALLOC << TAG_SHIFT | old << REALLOC_BITS | new))
        } else {
            Err([
                Event::realloc_half(Self::saturate_wide(old), false),
                Event::realloc_half(Self::saturate_wide(new), true),
            ])
        }
    }

    /// A `ReallocFrom` (`to` false) or `ReallocTo` word of `size <= MAX_WIDE_REALLOC_SIZE`.
    #[inline(always)]
    pub(super) const fn realloc_half(size: u64, to: bool) -> Event {
        let to = if to { REALLOC_TO_BIT } else { 0 };
        Event(TAG_REALLOC << TAG_SHIFT | REALLOC_WIDE_BIT | to | size)
    }

    #[inline(always)]
    const fn saturate_wide(size: u64) -> u64 {
        if size > MAX_WIDE_REALLOC_SIZE {
            MAX_WIDE_REALLOC_SIZE
        } else {
            size
        }
    }

    #[inline(always)]
    const fn saturate(size: usize) -> u64 {
        let size = size as u64;
        if size > PAYLOAD_MASK {
            PAYLOAD_MASK
        } else {
            size
        }
    }
}
