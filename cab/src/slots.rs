//! The memory of a ring: `n` atomic words, all `CLEAR` (0), allocated fallibly and given back
//! to the operating system when freed.
//!
//! On Unix the words are an anonymous private mapping (`mmap`): pages are zero-filled on
//! first touch, so a thread that makes a ring and emits little costs little, and `munmap`
//! returns all of it at once when the ring is freed. Through `malloc`, a freed multi-megabyte
//! ring is often kept by the allocator for reuse (glibc raises its mapping threshold after
//! freeing one), so a program that churns through threads would keep the memory of rings it
//! no longer has. Elsewhere the global allocator's zeroed allocation is used. Either way a
//! refused allocation is an error naming `buffer_bytes`, never an abort: rings are made on
//! application threads, at their first event.

use crate::config::ConfigError;
use crate::sync::AtomicU64;
use std::ops::Deref;

/// `len` atomic words, zero-initialized. Derefs to the slice.
pub(crate) struct Slots {
    #[cfg(not(loom))]
    /// Start of the words; valid for `len` words until drop (a dangling, aligned pointer
    /// when `len` is 0).
    ptr: std::ptr::NonNull<AtomicU64>,
    #[cfg(not(loom))]
    len: usize,
    #[cfg(loom)]
    words: Box<[AtomicU64]>,
}

// SAFETY: `Slots` owns its words exclusively (like a `Box<[AtomicU64]>`), and atomics may be
// used from any thread.
unsafe impl Send for Slots {}
// SAFETY: shared access only hands out `&[AtomicU64]`, which is `Sync`.
unsafe impl Sync for Slots {}

impl Slots {
    /// `n` words, all 0, or an error if the memory cannot be had.
    pub(crate) fn zeroed(n: usize) -> Result<Slots, ConfigError> {
        let bytes = n.checked_mul(std::mem::size_of::<AtomicU64>());
        let refused = || {
            ConfigError::new(
                "buffer_bytes",
                bytes.unwrap_or(usize::MAX),
                "a ring the system can allocate (allocating it failed: not enough memory)",
            )
        };
        #[cfg(loom)]
        {
            let _ = refused;
            Ok(Slots {
                words: (0..n).map(|_| AtomicU64::new(0)).collect(),
            })
        }
        #[cfg(not(loom))]
        {
            let bytes = bytes
                .filter(|&b| b <= isize::MAX as usize)
                .ok_or_else(refused)?;
            if bytes == 0 {
                return Ok(Slots {
                    ptr: std::ptr::NonNull::dangling(),
                    len: 0,
                });
            }
            let ptr = map_zeroed(bytes).ok_or_else(refused)?;
            Ok(Slots { ptr, len: n })
        }
    }
}

/// `bytes` (non-zero) of zeroed memory aligned for `AtomicU64`, or `None`.
#[cfg(all(unix, not(loom)))]
fn map_zeroed(bytes: usize) -> Option<std::ptr::NonNull<AtomicU64>> {
    // SAFETY: an anonymous private mapping of a non-zero length at an address of the kernel's
    // choosing touches no existing memory. It is page-aligned (enough for `AtomicU64`) and
    // zero-filled, and stays mapped until `unmap` in `Drop`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    std::ptr::NonNull::new(p.cast())
}

#[cfg(all(not(unix), not(loom)))]
fn map_zeroed(bytes: usize) -> Option<std::ptr::NonNull<AtomicU64>> {
    let layout =
        std::alloc::Layout::from_size_align(bytes, std::mem::align_of::<AtomicU64>()).ok()?;
    // SAFETY: `layout` has a non-zero size (the caller's contract).
    std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }.cast())
}

impl Drop for Slots {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        {
            if self.len == 0 {
                return;
            }
            let bytes = self.len * std::mem::size_of::<AtomicU64>();
            #[cfg(unix)]
            {
                // SAFETY: `ptr` is the start of a mapping of exactly `bytes` made by
                // `map_zeroed`, unmapped only here; nothing borrows it any more (`&mut self`).
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), bytes) };
            }
            #[cfg(not(unix))]
            {
                let layout =
                    std::alloc::Layout::from_size_align(bytes, std::mem::align_of::<AtomicU64>())
                        .expect("the layout it was allocated with");
                // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is freed once.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
            }
        }
    }
}

impl Deref for Slots {
    type Target = [AtomicU64];

    fn deref(&self) -> &[AtomicU64] {
        #[cfg(not(loom))]
        {
            // SAFETY: `ptr` is valid for `len` initialized (zeroed = valid) `AtomicU64`s for
            // as long as `self` lives, and only shared references to them are handed out.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
        }
        #[cfg(loom)]
        {
            &self.words
        }
    }
}
