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
//! producer's first lap takes one page fault per 2 MiB instead of two per 4 KiB page (it reads
//! a slot before writing it: one fault maps the zero page, the next copies it); figures in
//! docs/PERFORMANCE.md, "Ring memory". The cost is memory: the first event commits the ring's whole first 2 MiB,
//! where 4 KiB pages commit only what the producer has reached; the rings' total stays under
//! the session's ring budget either way. With transparent huge pages off in the kernel
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `never`) the advice is ignored and the
//! ring behaves as with 4 KiB pages. With `huge_pages` off, a ring of that size is advised
//! `MADV_NOHUGEPAGE` instead, so it is in 4 KiB pages whatever the kernel's mode (`always`
//! would otherwise back any 2 MiB-aligned part of it with a huge page).
//!
//! **Freed rings are kept for the next ones** (Unix): a freed ring is zeroed by the thread that
//! frees it (an analyzer, which drains and frees the rings of exited threads, or `finish`) and
//! kept, up to [`POOL_RINGS`] rings and [`POOL_BYTES`] bytes, for the next ring of the same
//! length and page kind, which then costs its thread no zeroing and no page faults where its
//! earlier owners wrote. Zeroed is only what a CAB producer can have written (it says how far
//! it got when dropped: see [`Slots::written`] and `Producer`'s `Drop`), so untouched pages
//! stay untouched; other designs' rings are zeroed whole. Without it,
//! every new thread of a program that starts many (a test harness runs each test on a new
//! thread) would pay for a fresh ring's first touch (`cargo bench -p cabprof-cab --bench
//! runtime`, section 3). A ring made with none of its length and page kind kept, and no
//! room to keep it later (no place, or not the bytes), unmaps kept rings of other kinds until
//! there is: the kept rings follow the current configuration. What is kept is bounded by
//! construction and counted by no session's ring budget (a ring is one word more than its
//! `buffer_bytes`, so of 4 MiB rings 3 are kept). A child of `fork` neither takes nor keeps
//! rings: its copy of the table's lock may be held by a thread it does not have.

use crate::config::ConfigError;
use crate::sync::AtomicU64;
#[cfg(not(loom))]
use std::cell::Cell;
use std::ops::Deref;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The huge-page size asked for (the x86-64 and 4 KiB-granule AArch64 PMD size): rings at least
/// this large are mapped at a multiple of it (see the module docs).
#[cfg_attr(any(loom, not(target_os = "linux")), allow(dead_code))]
pub(crate) const HUGE_PAGE: usize = 2 << 20;

#[cfg(not(loom))]
thread_local! {
    /// Set inside [`without_reuse`].
    static NO_REUSE: Cell<bool> = const { Cell::new(false) };
}

impl Slots {
    /// Only the words below `below` and from `from` on can have been written (the ring's
    /// owner knows, when its producer is done): keeping the ring for reuse zeroes those alone,
    /// not pages nothing touched (zeroing them would fault them in).
    pub(crate) fn written(&self, below: usize, from: usize) {
        #[cfg(not(loom))]
        {
            // Relaxed: read only by `Drop`, which the last `Arc` holder's drop orders after.
            self.written_below.store(below.min(self.len), Relaxed);
            self.written_from.store(from.min(self.len), Relaxed);
        }
        #[cfg(loom)]
        let _ = (below, from);
    }
}

/// Run `f` with the rings it makes neither taken from the kept ones nor kept when freed: for
/// a ring made only to see that one can be (a session's start), whose untouched pages
/// keeping would have to zero, that is fault in.
pub(crate) fn without_reuse<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(not(loom))]
    {
        let was = NO_REUSE.with(|c| c.replace(true));
        let out = f();
        NO_REUSE.with(|c| c.set(was));
        out
    }
    #[cfg(loom)]
    f()
}

/// `len` atomic words, zero-initialized. Derefs to the slice.
pub(crate) struct Slots {
    #[cfg(not(loom))]
    /// Start of the words; valid for `len` words until drop (a dangling, aligned pointer
    /// when `len` is 0).
    ptr: std::ptr::NonNull<AtomicU64>,
    #[cfg(not(loom))]
    len: usize,
    /// Mapped for huge pages (`map_zeroed`'s `huge`): what a ring kept for reuse must match.
    #[cfg(not(loom))]
    #[cfg_attr(not(unix), allow(dead_code))]
    huge: bool,
    /// Kept for reuse when freed (not for rings made inside [`without_reuse`]).
    #[cfg(not(loom))]
    #[cfg_attr(not(unix), allow(dead_code))]
    reuse: bool,
    /// What keeping must zero: the words below `written_below` and from `written_from` on
    /// (see [`Slots::written`]; until told, all of them).
    #[cfg(not(loom))]
    #[cfg_attr(not(unix), allow(dead_code))]
    written_below: AtomicUsize,
    #[cfg(not(loom))]
    #[cfg_attr(not(unix), allow(dead_code))]
    written_from: AtomicUsize,
    #[cfg(loom)]
    words: Box<[AtomicU64]>,
}

// SAFETY: `Slots` owns its words exclusively (like a `Box<[AtomicU64]>`), and atomics may be
// used from any thread.
unsafe impl Send for Slots {}
// SAFETY: shared access only hands out `&[AtomicU64]`, which is `Sync`.
unsafe impl Sync for Slots {}

impl Slots {
    /// `n` words, all 0, or an error if the memory cannot be had. `huge`: ask for huge pages,
    /// or keep the words off them (see the module docs; both only from [`HUGE_PAGE`] bytes
    /// and on Linux).
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
            let reuse = !NO_REUSE.with(Cell::get);
            let ptr = if bytes == 0 {
                std::ptr::NonNull::dangling()
            } else {
                #[cfg(unix)]
                let kept = reuse.then(|| pool::take(n, huge)).flatten();
                #[cfg(not(unix))]
                let kept = None;
                match kept {
                    Some(ptr) => ptr,
                    None => map_zeroed(bytes, huge).ok_or_else(refused)?,
                }
            };
            Ok(Slots {
                ptr,
                len: n,
                huge,
                reuse,
                written_below: AtomicUsize::new(n),
                written_from: AtomicUsize::new(n),
            })
        }
    }
}

/// `bytes` (non-zero) of zeroed memory aligned for `AtomicU64`, or `None`. On Linux, from
/// [`HUGE_PAGE`] bytes: with `huge`, at a [`HUGE_PAGE`] boundary and advised `MADV_HUGEPAGE`
/// (where that mapping fails, a plain one); without, advised `MADV_NOHUGEPAGE`.
#[cfg(all(unix, not(loom)))]
fn map_zeroed(bytes: usize, huge: bool) -> Option<std::ptr::NonNull<AtomicU64>> {
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_PAGE {
        if huge {
            if let Some(p) = map_huge(bytes) {
                return Some(p);
            }
        } else {
            let p = map_anonymous(bytes)?;
            // SAFETY: `[p, p + bytes)` is the mapping just made; advice changes no contents.
            // Advice only: refused (a kernel without transparent huge pages), it has no huge
            // pages to keep out.
            unsafe { libc::madvise(p.as_ptr(), bytes, libc::MADV_NOHUGEPAGE) };
            return Some(p.cast());
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
/// back, so exactly the pages of `[start, start + bytes)` stay mapped (what `Drop` unmaps).
/// `None` if the mapping fails, or if giving back an end fails (then none of it stays mapped).
#[cfg(all(target_os = "linux", not(loom)))]
fn map_huge(bytes: usize) -> Option<std::ptr::NonNull<AtomicU64>> {
    let span = bytes.checked_add(HUGE_PAGE)?;
    let p = map_anonymous(span)?.as_ptr() as usize;
    let (start, head, tail) = huge_trim(p, bytes, page_size());
    // SAFETY: `[p, p + span)` is the mapping just made and nothing else uses it. `head` and
    // `tail` lie inside it and start page-aligned, and the pages that hold `[start, start +
    // bytes)` lie between them (`huge_trim`), so those stay mapped: the pages `Drop`'s
    // `munmap(start, bytes)` removes. On failure the whole span is unmapped, parts of it
    // perhaps already (which `munmap` allows), and nothing was handed out.
    unsafe {
        let give_back = |r: std::ops::Range<usize>| {
            r.is_empty() || libc::munmap(r.start as *mut libc::c_void, r.len()) == 0
        };
        if !(give_back(head) && give_back(tail)) {
            libc::munmap(p as *mut libc::c_void, span);
            return None;
        }
        // Advice only: refused (a kernel without transparent huge pages), the mapping is
        // an ordinary one.
        libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
    }
    std::ptr::NonNull::new(start as *mut AtomicU64)
}

/// Of a mapping of `bytes + HUGE_PAGE` bytes at `p` (page-aligned): where the `bytes` start
/// (`p` rounded up to [`HUGE_PAGE`]), and the two ranges to give back so that exactly the
/// pages holding `[start, start + bytes)` stay mapped. Both ranges start page-aligned; the
/// tail's end is the span's, which `munmap` rounds up to the page the mapping ends on.
#[cfg(all(target_os = "linux", not(loom)))]
fn huge_trim(
    p: usize,
    bytes: usize,
    page: usize,
) -> (usize, std::ops::Range<usize>, std::ops::Range<usize>) {
    // No overflow: the mapping `[p, p + bytes + HUGE_PAGE)` exists, and `start - p <
    // HUGE_PAGE`, so `start + bytes` and its rounding up to a page stay within the span's end
    // rounded up to a page.
    let start = p.next_multiple_of(HUGE_PAGE);
    let end = (start + bytes).next_multiple_of(page);
    (start, p..start, end..p + bytes + HUGE_PAGE)
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
            #[cfg(unix)]
            {
                let written = (*self.written_below.get_mut(), *self.written_from.get_mut());
                // SAFETY: `ptr` holds `len` words that nothing borrows any more (`&mut self`),
                // zero outside `written` (the ring's producer said where it wrote).
                let kept =
                    self.reuse && unsafe { pool::give(self.ptr, self.len, self.huge, written) };
                if kept {
                    return;
                }
                // SAFETY: as in `unmap`'s contract: the words `map_zeroed` mapped, whose last
                // owner this is (`give` did not keep them).
                unsafe { unmap(self.ptr, self.len) };
            }
            #[cfg(not(unix))]
            {
                let bytes = self.len * std::mem::size_of::<AtomicU64>();
                let layout =
                    std::alloc::Layout::from_size_align(bytes, std::mem::align_of::<AtomicU64>())
                        .expect("the layout it was allocated with");
                // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is freed once.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
            }
        }
    }
}

/// Unmap `len` words at `ptr`.
///
/// # Safety
/// `ptr` starts the pages of `len` words that `map_zeroed` left mapped (a mapping of that
/// size, or what `map_huge` kept of a larger one), which nothing uses any more and nothing
/// unmaps again.
#[cfg(all(unix, not(loom)))]
unsafe fn unmap(ptr: std::ptr::NonNull<AtomicU64>, len: usize) {
    let bytes = len * std::mem::size_of::<AtomicU64>();
    // SAFETY: the caller's contract.
    unsafe { libc::munmap(ptr.as_ptr().cast(), bytes) };
}

/// Most rings kept for reuse (see the module docs).
#[cfg(not(loom))]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) const POOL_RINGS: usize = 4;
/// Most bytes of rings kept for reuse.
#[cfg(not(loom))]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) const POOL_BYTES: usize = 16 << 20;

/// The rings kept for reuse: a fixed table under a lock taken only when a ring is made or
/// freed, which never allocates (rings are made while an allocation-tracking allocator may be
/// running).
#[cfg(all(unix, not(loom)))]
mod pool {
    use super::{unmap, AtomicU64, POOL_BYTES, POOL_RINGS};
    use std::ptr::NonNull;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Mutex, MutexGuard};

    /// A kept ring: `len` zeroed words at `ptr`, mapped as `huge`.
    #[derive(Clone, Copy, Debug)]
    pub(super) struct Kept {
        pub(super) ptr: NonNull<AtomicU64>,
        pub(super) len: usize,
        pub(super) huge: bool,
    }

    /// The table (`Kept` is a pointer, so it needs saying that it may move between threads:
    /// it owns its words exclusively, as `Slots` does).
    pub(super) struct Table(pub(super) [Option<Kept>; POOL_RINGS]);
    // SAFETY: a kept ring's words are owned by the table alone until `take` hands them out.
    unsafe impl Send for Table {}

    static TABLE: Mutex<Table> = Mutex::new(Table([None; POOL_RINGS]));

    /// The process that uses [`TABLE`] (0 until one does). A child of `fork` has a copy of
    /// the table and of its lock, which a thread the child does not have may have held: it
    /// neither takes nor keeps rings (they are few there: profiling is off after a fork).
    static OWNER: AtomicU32 = AtomicU32::new(0);

    /// The table, locked; `None` in a child forked since the table was first used.
    fn table() -> Option<MutexGuard<'static, Table>> {
        let me = std::process::id();
        // Recorded before the lock is first taken, so a child forked while any thread held
        // it finds its parent's id here.
        let owner = match OWNER.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => me,
            Err(owner) => owner,
        };
        // A panic while holding the lock leaves the table consistent (every change is one
        // assignment), so a poisoned lock is used as is.
        (owner == me).then(|| TABLE.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn bytes(len: usize) -> usize {
        len * std::mem::size_of::<AtomicU64>()
    }

    impl Table {
        /// Whether a ring of `len` words can be kept now: a free place, and bytes for it.
        pub(super) fn room(&self, len: usize) -> bool {
            let used: usize = self.0.iter().flatten().map(|k| bytes(k.len)).sum();
            self.0.iter().any(Option::is_none) && used + bytes(len) <= POOL_BYTES
        }

        /// Take out a kept ring of `len` words mapped as `huge`.
        pub(super) fn take(&mut self, len: usize, huge: bool) -> Option<Kept> {
            self.0
                .iter_mut()
                .find(|k| matches!(k, Some(k) if k.len == len && k.huge == huge))
                .and_then(Option::take)
        }

        /// No kept ring is of the kind of a ring of `len` words being made: take out rings
        /// (of other kinds, then) until there is room to keep that one when it is freed, for
        /// the caller to unmap. The configuration changed, and the kept rings follow it, even
        /// when what leaves no room is their bytes, not their number. Nothing, for a ring
        /// too large ever to be kept.
        pub(super) fn make_room(&mut self, len: usize) -> [Option<Kept>; POOL_RINGS] {
            let mut out = [None; POOL_RINGS];
            if bytes(len) <= POOL_BYTES {
                for (i, o) in out.iter_mut().enumerate() {
                    if self.room(len) {
                        break;
                    }
                    *o = self.0[i].take();
                }
            }
            out
        }

        /// Keep `k` if there is room.
        pub(super) fn put(&mut self, k: Kept) -> bool {
            if !self.room(k.len) {
                return false;
            }
            match self.0.iter_mut().find(|s| s.is_none()) {
                Some(slot) => {
                    *slot = Some(k);
                    true
                }
                None => false,
            }
        }
    }

    /// A kept ring of `len` words mapped as `huge`, all zero, now the caller's; or `None`.
    /// When none fits and there is no room to keep one (see [`Table::make_room`]), rings of
    /// other kinds are unmapped.
    pub(super) fn take(len: usize, huge: bool) -> Option<NonNull<AtomicU64>> {
        let mut t = table()?;
        if let Some(k) = t.take(len, huge) {
            return Some(k.ptr);
        }
        let stale = t.make_room(len);
        drop(t);
        for k in stale.into_iter().flatten() {
            // SAFETY: a kept ring is a whole `Slots` mapping that only the table owned, and it
            // has just left the table.
            unsafe { unmap(k.ptr, k.len) };
        }
        None
    }

    /// Keep `len` words at `ptr` (mapped as `huge`) for reuse, zeroing first the words below
    /// `written.0` and from `written.1` on (all that can be non-zero); `false` if there is no
    /// room, and then the caller still owns them.
    ///
    /// # Safety
    /// `ptr` holds `len` words of a `Slots` mapping, which nothing uses any more, zero outside
    /// the `written` ranges, and which becomes the table's if this returns `true`.
    pub(super) unsafe fn give(
        ptr: NonNull<AtomicU64>,
        len: usize,
        huge: bool,
        written: (usize, usize),
    ) -> bool {
        if !table().is_some_and(|t| t.room(len)) {
            return false;
        }
        // Zero outside the lock (a 2 MiB ring takes some 100 µs); if the room went meanwhile,
        // the work was wasted and the caller unmaps.
        let (below, from) = (written.0.min(len), written.1.min(len));
        // SAFETY: `ptr` is valid for `len` words that nothing else uses (the contract), and
        // both ranges lie within them; zero bytes are a valid `AtomicU64`.
        unsafe {
            std::ptr::write_bytes(ptr.as_ptr(), 0, below);
            std::ptr::write_bytes(ptr.as_ptr().add(from), 0, len - from);
        }
        table().is_some_and(|mut t| t.put(Kept { ptr, len, huge }))
    }

    /// Hold the table's lock (tests: to fork while it is held).
    #[cfg(test)]
    pub(super) fn lock_for_test() -> Option<MutexGuard<'static, Table>> {
        table()
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
    use std::ops::Range;
    use std::sync::atomic::Ordering;

    /// The mapping of `/proc/self/smaps` that holds an address.
    struct Vma {
        range: Range<usize>,
        /// `AnonHugePages`, KiB.
        anon_huge_kib: u64,
        /// `VmFlags`: `hg` advised `MADV_HUGEPAGE`, `nh` advised `MADV_NOHUGEPAGE`.
        flags: Vec<String>,
    }

    impl Vma {
        fn has(&self, flag: &str) -> bool {
            self.flags.iter().any(|f| f == flag)
        }
    }

    /// The mapping that holds `addr` (`None`: none does). The kernel may have merged the ring's
    /// mapping with an adjacent one made with the same flags: then it is the pair's.
    fn vma(addr: usize) -> Option<Vma> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut found: Option<Vma> = None;
        for line in smaps.lines() {
            if let Some(range) = header(line) {
                if found.is_some() {
                    break;
                }
                if range.contains(&addr) {
                    found = Some(Vma {
                        range,
                        anon_huge_kib: 0,
                        flags: Vec::new(),
                    });
                }
                continue;
            }
            let Some(v) = found.as_mut() else { continue };
            if let Some(kib) = line.strip_prefix("AnonHugePages:") {
                v.anon_huge_kib = kib.trim().trim_end_matches("kB").trim().parse().unwrap();
            } else if let Some(flags) = line.strip_prefix("VmFlags:") {
                v.flags = flags.split_whitespace().map(String::from).collect();
            }
        }
        found
    }

    /// The address range of an smaps header line (`lo-hi perms ...`), `None` for other lines.
    fn header(line: &str) -> Option<Range<usize>> {
        let (lo, hi) = line.split(' ').next()?.split_once('-')?;
        Some(usize::from_str_radix(lo, 16).ok()?..usize::from_str_radix(hi, 16).ok()?)
    }

    /// Whether this kernel takes huge-page advice at all (built with transparent huge pages).
    fn advice_taken() -> bool {
        let p = map_anonymous(page_size()).unwrap().as_ptr();
        // SAFETY: `p` is a fresh page-sized mapping of ours, advised and then unmapped.
        unsafe {
            let taken = libc::madvise(p, page_size(), libc::MADV_HUGEPAGE) == 0;
            libc::munmap(p, page_size());
            taken
        }
    }

    /// Whether the kernel grants a transparent huge page right now to a 2 MiB-aligned region
    /// advised `MADV_HUGEPAGE`. Not when they are off (`never`, a process or container with
    /// them disabled) or none can be had (fragmented memory): a ring cannot get one either.
    fn huge_page_granted() -> bool {
        let span = 2 * HUGE_PAGE;
        let p = map_anonymous(span).unwrap().as_ptr() as usize;
        let start = p.next_multiple_of(HUGE_PAGE);
        // SAFETY: `[start, start + HUGE_PAGE)` lies in `[p, p + span)`, a fresh mapping of
        // ours, written once and then unmapped whole.
        unsafe {
            libc::madvise(start as *mut libc::c_void, HUGE_PAGE, libc::MADV_HUGEPAGE);
            std::ptr::write_volatile(start as *mut u8, 1);
        }
        let kib = vma(start).map_or(0, |v| v.anon_huge_kib);
        // SAFETY: as above.
        unsafe { libc::munmap(p as *mut libc::c_void, span) };
        kib >= 2048
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
        let v = vma(addr).expect("the ring is mapped");
        // The extra 2 MiB was given back: the mapping ends with the ring's last page (no
        // ring starts there, a page past a 2 MiB boundary, to have merged with it).
        assert_eq!(
            v.range.end,
            addr + HUGE_PAGE + page_size(),
            "the ring's own pages"
        );
        if advice_taken() {
            assert!(v.has("hg"), "advised MADV_HUGEPAGE: VmFlags {:?}", v.flags);
        }
        if v.anon_huge_kib < 2048 {
            assert!(
                !huge_page_granted(),
                "the kernel grants huge pages, yet the ring's first 2 MiB has {} KiB of them",
                v.anon_huge_kib
            );
            eprintln!("no transparent huge page to be had here: alignment and advice checked");
        }
    }

    #[test]
    fn without_huge_pages_a_large_ring_is_kept_off_them_and_a_small_one_is_plain() {
        let s = Slots::zeroed(HUGE_PAGE / 8 + 1, false).unwrap();
        let addr = s.as_ptr() as usize;
        for w in s.iter() {
            w.store(1, Ordering::Relaxed);
        }
        let v = vma(addr).expect("the ring is mapped");
        // Advised MADV_NOHUGEPAGE, so in 4 KiB pages even where the kernel's mode is
        // `always` (which would back a 2 MiB-aligned part of it with a huge page).
        if advice_taken() {
            assert!(
                v.has("nh"),
                "advised MADV_NOHUGEPAGE: VmFlags {:?}",
                v.flags
            );
        }
        assert_eq!(v.anon_huge_kib, 0);
        let small = Slots::zeroed(1024, true).unwrap();
        assert!(small.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        assert!(!vma(small.as_ptr() as usize).expect("mapped").has("hg"));
    }

    /// The kept rings follow the configuration: a ring that finds none of its kind and no
    /// room to be kept later makes room, whether what is short is places or bytes.
    #[test]
    fn a_ring_of_a_new_kind_makes_room_among_the_kept_ones() {
        use pool::{Kept, Table};
        let ring = |mib: usize, huge: bool| Kept {
            ptr: std::ptr::NonNull::dangling(),
            len: (mib << 20) / 8 + 1,
            huge,
        };
        let len = |mib: usize| ring(mib, false).len;
        // Places to spare, but not the bytes: 12 MiB kept, a 5 MiB ring made.
        let mut t = Table([Some(ring(6, false)), Some(ring(6, false)), None, None]);
        assert!(t.take(len(5), false).is_none());
        assert!(!t.room(len(5)));
        assert_eq!(t.make_room(len(5)).iter().flatten().count(), 1);
        assert!(t.room(len(5)) && t.put(ring(5, false)), "kept when freed");
        assert!(t.take(len(5), false).is_some(), "and found by the next");
        // No place: one ring goes.
        let mut t = Table([Some(ring(1, true)); POOL_RINGS]);
        assert!(t.take(len(1), false).is_none(), "another page kind");
        assert_eq!(t.make_room(len(1)).iter().flatten().count(), 1);
        assert!(t.put(ring(1, false)));
        // A ring too large ever to be kept takes none out; the table never exceeds its bytes.
        let mut t = Table([Some(ring(1, false)), None, None, None]);
        assert!(t.make_room(len(16)).iter().all(Option::is_none));
        assert!(!t.put(ring(16, false)));
        assert!(t.put(ring(8, false)) && !t.put(ring(8, false)));
    }

    /// A child of `fork` has a copy of the table's lock, perhaps held by a thread of the parent
    /// that the child does not have: making and freeing a ring there must not wait for it.
    #[test]
    fn a_forked_child_makes_and_frees_rings_without_the_kept_ones() {
        // Held by this thread across the fork, as any thread of the parent may hold it.
        let held = pool::lock_for_test().expect("the parent's table");
        // SAFETY: the child only makes and frees a ring (system calls, no allocation, no lock
        // but the table's) and leaves with `_exit`.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            let ok = Slots::zeroed(1024, false).is_ok_and(|s| {
                s[0].store(1, Ordering::Relaxed);
                true
            });
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        drop(held);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child, writing its status into a local.
            let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
            if r == child {
                break;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: our own child, killed and reaped.
                unsafe {
                    libc::kill(child, libc::SIGKILL);
                    libc::waitpid(child, &mut status, 0);
                }
                panic!("the forked child waited for the kept rings' lock");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }

    /// The ranges `map_huge` gives back, for a start already on a 2 MiB boundary or not, and
    /// sizes that are a multiple of 2 MiB, of a page, or neither (the CAB ring's extra word,
    /// the sampling ring's padding).
    #[test]
    fn the_trim_keeps_exactly_the_pages_of_the_ring() {
        let page = 4096;
        for p in [0x7f00_0000_0000, 0x7f00_0000_1000, 0x7f00_001f_f000] {
            for bytes in [
                HUGE_PAGE,
                2 * HUGE_PAGE,
                HUGE_PAGE + 8,
                HUGE_PAGE + 8 * 137,
                3 * HUGE_PAGE + page,
            ] {
                let (start, head, tail) = huge_trim(p, bytes, page);
                let mapped = p..(p + bytes + HUGE_PAGE).next_multiple_of(page);
                let kept = start..(start + bytes).next_multiple_of(page);
                assert_eq!(start % HUGE_PAGE, 0);
                assert!(start - p < HUGE_PAGE, "{p:#x} {bytes}");
                // head, kept and tail (its end rounded up by `munmap`) tile the mapping.
                assert_eq!(head, mapped.start..kept.start, "{p:#x} {bytes}");
                assert_eq!(tail.start, kept.end, "{p:#x} {bytes}");
                assert_eq!(
                    tail.end.next_multiple_of(page),
                    mapped.end,
                    "{p:#x} {bytes}"
                );
                assert!(tail.start < tail.end && tail.start % page == 0);
            }
        }
    }
}
