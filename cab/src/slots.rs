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
//!
//! **Huge pages** (Linux, on by default: [`RingConfig::huge_pages`](crate::config::RingConfig)).
//! A ring of at least [`HUGE_PAGE`] bytes is mapped at a huge-page boundary and advised
//! `MADV_HUGEPAGE`, so the kernel backs it with transparent huge pages where it can: the
//! producer's first lap takes one page fault per 2 MiB instead of one per 4 KiB. Measured
//! here on the evaluation's worker-pool workload (four threads, a 2 MiB ring each, one run of
//! the workload per session), those 4 KiB faults made the concurrent run take as long again as
//! the program. The cost is memory: the first event commits the ring's whole first 2 MiB,
//! where 4 KiB pages commit only what the producer has reached; the rings' total stays under
//! the session's ring budget either way. With transparent huge pages off in the kernel
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `never`) the advice is ignored and the
//! ring behaves as with 4 KiB pages.

use crate::config::ConfigError;
use crate::sync::AtomicU64;
use std::ops::Deref;

/// The huge-page size asked for (the x86-64 and 4 KiB-granule AArch64 PMD size): rings at least
/// this large are mapped at a multiple of it (see the module docs).
#[cfg_attr(any(loom, not(target_os = "linux")), allow(dead_code))]
pub(crate) const HUGE_PAGE: usize = 2 << 20;

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
    /// `n` words, all 0, or an error if the memory cannot be had. `huge`: ask for huge pages
    /// (see the module docs; ignored below [`HUGE_PAGE`] bytes and off Linux).
    pub(crate) fn zeroed(n: usize, huge: bool) -> Result<Slots, ConfigError> {
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
            let _ = (refused, huge);
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
            let ptr = map_zeroed(bytes, huge).ok_or_else(refused)?;
            Ok(Slots { ptr, len: n })
        }
    }
}

/// `bytes` (non-zero) of zeroed memory aligned for `AtomicU64`, or `None`; `huge`: at a
/// [`HUGE_PAGE`] boundary, advised `MADV_HUGEPAGE` (Linux, `bytes >= HUGE_PAGE`).
#[cfg(all(unix, not(loom)))]
fn map_zeroed(bytes: usize, huge: bool) -> Option<std::ptr::NonNull<AtomicU64>> {
    #[cfg(target_os = "linux")]
    if huge && bytes >= HUGE_PAGE {
        if let Some(p) = map_huge(bytes) {
            return Some(p);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = huge;
    map_anonymous(bytes).map(|p| p.cast())
}

/// An anonymous private read-write mapping of `bytes` (non-zero) at an address of the
/// kernel's choosing, or `None`.
#[cfg(all(unix, not(loom)))]
fn map_anonymous(bytes: usize) -> Option<std::ptr::NonNull<libc::c_void>> {
    // SAFETY: an anonymous private mapping of a non-zero length at an address of the kernel's
    // choosing touches no existing memory. It is page-aligned (enough for `AtomicU64`) and
    // zero-filled, and stays mapped until `munmap`.
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
    std::ptr::NonNull::new(p)
}

/// `bytes` (at least [`HUGE_PAGE`]) of zeroed memory starting at a [`HUGE_PAGE`] boundary and
/// advised `MADV_HUGEPAGE`: [`HUGE_PAGE`] bytes more are mapped and the unaligned ends given
/// back, so exactly `bytes` stay mapped (what `Drop` unmaps). `None` if the mapping fails.
#[cfg(all(target_os = "linux", not(loom)))]
fn map_huge(bytes: usize) -> Option<std::ptr::NonNull<AtomicU64>> {
    let span = bytes.checked_add(HUGE_PAGE)?;
    let p = map_anonymous(span)?.as_ptr() as usize;
    let start = p.next_multiple_of(HUGE_PAGE);
    let end = start + bytes;
    // SAFETY: `[p, p + span)` is the mapping just made and nothing else uses it. `p <= start`
    // and `end <= p + span` (`start - p < HUGE_PAGE`), so both ranges given back lie inside
    // it, and both start page-aligned (`p`, and `end` rounded up to a page), so the pages
    // that hold `[start, end)` stay mapped: the pages `Drop`'s `munmap(start, bytes)` removes.
    unsafe {
        if start > p {
            libc::munmap(p as *mut libc::c_void, start - p);
        }
        let tail = end.next_multiple_of(page_size());
        if p + span > tail {
            libc::munmap(tail as *mut libc::c_void, p + span - tail);
        }
        // Advice only: refused (a kernel without transparent huge pages), the mapping is
        // an ordinary one.
        libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
    }
    std::ptr::NonNull::new(start as *mut AtomicU64)
}

/// The system's page size.
#[cfg(all(target_os = "linux", not(loom)))]
fn page_size() -> usize {
    // SAFETY: `sysconf` has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

#[cfg(all(not(unix), not(loom)))]
fn map_zeroed(bytes: usize, _huge: bool) -> Option<std::ptr::NonNull<AtomicU64>> {
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

#[cfg(all(test, target_os = "linux", not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// The `AnonHugePages` of the mapping that holds `addr`, in KiB, from `/proc/self/smaps`
    /// (`None`: no such mapping). The kernel may have merged the ring's mapping with a
    /// neighbour made with the same flags: then it is the pair's.
    fn anon_huge_kib(addr: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        while let Some(line) = lines.next() {
            let range = line.split(' ').next().unwrap_or("");
            let Some((lo, hi)) = range.split_once('-') else {
                continue;
            };
            let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            else {
                continue;
            };
            if !(lo..hi).contains(&addr) {
                continue;
            }
            for field in lines.by_ref() {
                if let Some(v) = field.strip_prefix("AnonHugePages:") {
                    return v.trim().trim_end_matches("kB").trim().parse().ok();
                }
            }
        }
        None
    }

    /// Whether the kernel hands out transparent huge pages to regions that ask.
    fn thp_available() -> bool {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| !s.contains("[never]"))
    }

    #[test]
    fn a_large_ring_starts_on_a_huge_page_and_is_backed_by_one() {
        // A 2 MiB ring plus the CAB ring's one extra slot, as the runtime makes it.
        let n = HUGE_PAGE / 8 + 1;
        let s = Slots::zeroed(n, true).unwrap();
        let addr = s.as_ptr() as usize;
        assert_eq!(addr % HUGE_PAGE, 0, "a huge-page-aligned start");
        assert!(s.iter().all(|w| w.load(Ordering::Relaxed) == 0), "zeroed");
        for (i, w) in s.iter().enumerate() {
            w.store(i as u64 + 1, Ordering::Relaxed);
        }
        assert_eq!(
            s[n - 1].load(Ordering::Relaxed),
            n as u64,
            "the last word is usable"
        );
        if thp_available() {
            let kib = anon_huge_kib(addr).expect("the ring is mapped");
            assert!(
                kib >= 2048,
                "the ring's first 2 MiB are a transparent huge page: {kib} KiB of them"
            );
        } else {
            eprintln!("transparent huge pages are off in this kernel: alignment checked only");
        }
    }

    #[test]
    fn without_huge_pages_or_below_their_size_the_ring_is_plain() {
        let s = Slots::zeroed(HUGE_PAGE / 8 + 1, false).unwrap();
        let addr = s.as_ptr() as usize;
        for w in s.iter() {
            w.store(1, Ordering::Relaxed);
        }
        // Not advised: whatever the alignment, the kernel (in `madvise` mode) gives it no
        // huge page. With `always` it might, so only check when the mode is `madvise`.
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if mode.is_ok_and(|m| m.contains("[madvise]")) {
            assert_eq!(anon_huge_kib(addr), Some(0));
        }
        let small = Slots::zeroed(1024, true).unwrap();
        assert!(small.iter().all(|w| w.load(Ordering::Relaxed) == 0));
    }
}
