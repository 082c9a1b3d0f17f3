//! The words of a global allocator wrapper: `Alloc`, `Dealloc` and `Realloc` (one word, or
//! `ReallocFrom` and `ReallocTo` for blocks too large for one), each followed by the block's
//! address in a **block** word (a resize by two: the old block's, then the new one's), so that
//! an analysis can match a free to its allocation and keep what is live per allocation site.
//!
//! A block word is a `Marker` in a range of its own (every analysis that does not want it
//! ignores it as any marker): the top 12 bits of the 60-bit value are `0xB10`, the low 48 the
//! address (user-space addresses fit 48 bits on x86-64 and AArch64; higher bits, such as an
//! AArch64 tag, are dropped).
//!
//! ```text
//!  63  60 59        48 47                                          0
//! +------+------------+---------------------------------------------+
//! |  6   | 0xB10      | address (48 bits)                           |   block
//! +------+------------+---------------------------------------------+
//! ```

#[cfg(doc)]
use super::MAX_ALLOC_SIZE;
use super::{
    Event, MAX_REALLOC_SIZE, MAX_WIDE_REALLOC_SIZE, PAYLOAD_MASK, REALLOC_BITS, REALLOC_TO_BIT,
    REALLOC_WIDE_BIT, TAG_ALLOC, TAG_DEALLOC, TAG_MARKER, TAG_REALLOC, TAG_SHIFT,
};

/// A block word's marker value's top 12 bits.
const BLOCK_MARK: u64 = 0xB10;
const BLOCK_SHIFT: u32 = 48;
/// The address bits a block word keeps.
const BLOCK_ADDR_MASK: u64 = (1 << BLOCK_SHIFT) - 1;

/// The address a block word carries, or `None` for any other word.
#[inline(always)]
pub fn as_block(word: u64) -> Option<u64> {
    if word >> TAG_SHIFT != TAG_MARKER || (word & PAYLOAD_MASK) >> BLOCK_SHIFT != BLOCK_MARK {
        return None;
    }
    Some(word & BLOCK_ADDR_MASK)
}

impl Event {
    /// The address of the block the allocation word before it made, freed or resized (see the
    /// module docs).
    #[inline(always)]
    pub const fn block(addr: usize) -> Event {
        Event(TAG_MARKER << TAG_SHIFT | BLOCK_MARK << BLOCK_SHIFT | (addr as u64 & BLOCK_ADDR_MASK))
    }

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
