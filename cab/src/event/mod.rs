//! Event words: one `u64` per event, never equal to [`CLEAR`] or [`MAGIC`].
//!
//! The ring's protocol (Ha et al., OOPSLA 2009, §3.1.2) reserves two values: `CLEAR` marks a free
//! slot and `MAGIC` marks the end of the buffer. Every other `u64` is a valid event word. This
//! module owns the only layout of those words:
//!
//! ```text
//!  63   60 59                                                        0
//! +-------+-----------------------------------------------------------+
//! |  tag  |  payload (60 bits)                                        |
//! +-------+-----------------------------------------------------------+
//! tag 1  Call    caller: bits 30..60 (30 bits)   callee: bits 0..30 (30 bits)
//! tag 2  Return  callee: bits 0..30
//!        LongReturn  timed: bit 59   duration: bits 30..59 (29 bits)   callee: bits 0..30
//!                    (bits 30..60 not all 0: a Return with them all 0 is a plain one)
//! tag 3  Path    method: bits 30..60             path:   bits 0..30
//! tag 4  Mem     store: bit 59, log2(size): bits 56..59, addr: bits 0..56
//! tag 5  Thread  id: bits 0..60
//! tag 6  Marker  value: bits 0..60 (values 0xCA0 << 48 and 0xCA1 << 48 up: calibration.rs;
//!                0xCA2 << 48 up: timeline.rs; 0xB10 << 48: alloc.rs; 0xB20 to 0xB23 << 48:
//!                wait.rs; 0xB30 << 48: poll.rs)
//! tag 7  Poll (first)   method: bits 30..60   task: bits 0..30
//! tag 8  Poll (resumed) method: bits 30..60   task: bits 0..30
//! tag 9  PollEnd done: bit 59   poll: bits 30..59 (29 bits)   task: bits 0..30
//! tag 10 Time    ticks: bits 0..60 (the clock's low 60 bits); in timeline mode also right
//!                before a TimedReturn, its exit stamp (timeline.rs)
//! tag 11 Alloc   size: bits 0..60 (bytes)
//! tag 12 Dealloc size: bits 0..60 (bytes)
//! tag 13 Realloc       wide: bit 59 = 0   old size: bits 29..58 (29 bits)   new size: bits 0..29
//!        ReallocFrom   wide: bit 59 = 1   to: bit 58 = 0   old size: bits 0..58 (58 bits)
//!        ReallocTo     wide: bit 59 = 1   to: bit 58 = 1   new size: bits 0..58 (58 bits)
//! ```
//!
//! Tags run from 1 to 14, so the top nibble of a word is never `0x0` (which `CLEAR = 0` has) nor
//! `0xF` (which `MAGIC = u64::MAX` has): no payload, however chosen, can collide with a sentinel.
//! Fields that do not fit are rejected by the checked constructors with an [`EventError`] that
//! names the field and its range; [`MethodId`] is range-checked once, when it is made, so the hot
//! `Call`/`Return`/`Path` constructors need no check at all.

use std::fmt;

// The constructors of two families of words, in files of their own; the layout stays here.
mod alloc;
mod calibration;
mod duration;
mod poll;
mod timeline;
mod wait;

pub use alloc::as_block;
pub use calibration::{as_calibration, is_probe, CallCosts};
pub use duration::{
    as_long_return, as_time, as_timed_return, EXACT_DURATION, LONG_EXACT_DURATION, MAX_DURATION,
    MAX_LONG_DURATION,
};
use duration::{
    decode_duration, decode_long_duration, encode_duration, encode_long_duration, LONG_FIELD_MASK,
    LONG_TIMED_BIT,
};
pub use poll::{as_wake_delay, MAX_WAKE_DELAY};
pub use timeline::{as_thread_mark, MAX_THREAD_NUMBER};
pub use wait::{as_wait, widen_stamp, WaitKind, WaitWord, MAX_WAITERS, MAX_WAIT_NS};

/// The value of a free slot. Never a valid event word.
pub const CLEAR: u64 = 0;
/// The value of the extra slot after the last one, marking the end of the ring. Never a valid
/// event word.
pub const MAGIC: u64 = u64::MAX;

const TAG_SHIFT: u32 = 60;
const PAYLOAD_MASK: u64 = (1 << TAG_SHIFT) - 1;
const ID_BITS: u32 = 30;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
const ADDR_BITS: u32 = 56;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
const SIZE_SHIFT: u32 = 56;
const STORE_BIT: u64 = 1 << 59;

const TAG_CALL: u64 = 1;
const TAG_RETURN: u64 = 2;
const TAG_PATH: u64 = 3;
const TAG_MEM: u64 = 4;
const TAG_THREAD: u64 = 5;
const TAG_MARKER: u64 = 6;
const TAG_POLL_FIRST: u64 = 7;
const TAG_POLL: u64 = 8;
const TAG_POLL_END: u64 = 9;
const TAG_TIME: u64 = 10;
const TAG_ALLOC: u64 = 11;
const TAG_DEALLOC: u64 = 12;
const TAG_REALLOC: u64 = 13;
const TAG_TIMED_RETURN: u64 = 14;
const TAG_STALL: u64 = 15;

/// Largest method id an event can carry (30 bits). Id 0 is the root ("no caller").
pub const MAX_METHOD_ID: u32 = (1 << ID_BITS) - 1;
/// Largest Ball-Larus path number a `Path` event can carry (30 bits).
pub const MAX_PATH_NUMBER: u32 = (1 << ID_BITS) - 1;
/// Largest data address a `Mem` event can carry (56 bits: all of user space, even with 5-level
/// paging).
pub const MAX_ADDRESS: u64 = ADDR_MASK;
/// Largest access size a `Mem` event can carry, in bytes (sizes are powers of two, `1..=128`).
pub const MAX_ACCESS_SIZE: u32 = 128;
/// Largest `Thread`/`Marker` payload (60 bits).
pub const MAX_PAYLOAD: u64 = PAYLOAD_MASK;
/// Largest size an `Alloc`/`Dealloc` word carries exactly (60 bits); larger sizes saturate.
pub const MAX_ALLOC_SIZE: u64 = PAYLOAD_MASK;
/// Largest old or new size a `Realloc` word can carry (29 bits: 512 MiB − 1); a reallocation
/// with a larger size is two words, `ReallocFrom` and `ReallocTo` ([`Event::realloc`]).
pub const MAX_REALLOC_SIZE: u64 = REALLOC_MASK;
/// Largest size a `ReallocFrom`/`ReallocTo` word carries exactly (58 bits: 256 PiB − 1, more
/// than any address space); larger sizes saturate.
pub const MAX_WIDE_REALLOC_SIZE: u64 = WIDE_SIZE_MASK;

// A `Realloc` word: both sizes in one word, or (bit 59) one half of a two-word resize.
const REALLOC_BITS: u32 = 29;
const REALLOC_MASK: u64 = (1 << REALLOC_BITS) - 1;
const REALLOC_WIDE_BIT: u64 = 1 << 59;
const REALLOC_TO_BIT: u64 = 1 << 58;
const WIDE_SIZE_MASK: u64 = REALLOC_TO_BIT - 1;

/// A method id that fits an event word: `0..=MAX_METHOD_ID`, where 0 means "the root".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MethodId(u32);

impl MethodId {
    /// The root: the caller of a thread's outermost instrumented function.
    pub const ROOT: MethodId = MethodId(0);

    /// A checked method id.
    pub const fn new(id: u32) -> Result<MethodId, EventError> {
        if id > MAX_METHOD_ID {
            Err(EventError {
                field: "function id",
                value: id as u64,
                max: MAX_METHOD_ID as u64,
            })
        } else {
            Ok(MethodId(id))
        }
    }

    /// The raw id.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for MethodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A field did not fit its place in an event word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventError {
    /// The field that did not fit ("function id", "path number", "address", ...).
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// The largest value allowed.
    pub max: u64,
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event {} {} does not fit: allowed 0..={}",
            self.field, self.value, self.max
        )
    }
}

impl std::error::Error for EventError {}

/// One event word. Holds neither [`CLEAR`] nor [`MAGIC`], by construction.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Event(u64);

/// A decoded event word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `caller` called `callee` (caller 0 = the thread's root).
    Call {
        /// The calling function (the thread's root when [`MethodId::ROOT`]).
        caller: MethodId,
        /// The function called.
        callee: MethodId,
    },
    /// `callee` returned (normally, early, by `?` or by unwinding).
    Return {
        /// The function that returned.
        callee: MethodId,
    },
    /// One acyclic Ball-Larus path `path` through `method` completed.
    Path {
        /// The function the path runs through.
        method: MethodId,
        /// Its Ball-Larus path number, at most [`MAX_PATH_NUMBER`].
        path: u32,
    },
    /// A data access of `size` bytes (a power of two) at `addr`; `store` for a write.
    Mem {
        /// The address accessed, at most [`MAX_ADDRESS`].
        addr: u64,
        /// Bytes accessed: a power of two in `1..=128`.
        size: u32,
        /// A write (`true`) or a read.
        store: bool,
    },
    /// The events that follow come from thread `id` (for multiplexed rings).
    Thread {
        /// The thread's id in the stream.
        id: u64,
    },
    /// A user marker.
    Marker {
        /// The user's value.
        value: u64,
    },
    /// A poll of an instrumented `async fn`'s future begins: instance `task` (an id unique
    /// among the futures alive, wrapping at [`MAX_TASK_ID`]) of `method`. `first` for its first
    /// poll, which directly follows its `Call`. Until the matching [`PollEnd`](Self::PollEnd),
    /// the events belong to that future's context, not to the thread's.
    Poll {
        /// The instrumented `async fn`.
        method: MethodId,
        /// The future's id, at most [`MAX_TASK_ID`].
        task: u32,
        /// Whether this is the future's first poll.
        first: bool,
    },
    /// The innermost open poll (of `task`) ends; it was the future's poll number `poll`
    /// (0 = the first, saturating at [`MAX_POLL_NUMBER`]); `done` if the future completed (its
    /// `Return` came just before) or was dropped.
    PollEnd {
        /// The future's id, as in its [`Poll`](Self::Poll).
        task: u32,
        /// Which poll of the future this was (0 = the first).
        poll: u32,
        /// Whether the future completed or was dropped.
        done: bool,
    },
    /// A timestamp: the low 60 bits of the session's clock (`cabprof_cab::clock`). Right after a
    /// `Call` or `Poll` it stamps that frame's (or poll's) start; otherwise it stamps the end of
    /// the innermost frame or poll, whose `Return` or `PollEnd` follows (in timeline mode,
    /// also the `TimedReturn` of a timed call: its exit stamp, see `timeline.rs`).
    Time {
        /// Clock ticks modulo 2^60; differences wrap at [`MAX_PAYLOAD`].
        ticks: u64,
    },
    /// `callee` returns from a call that took `ticks` clock ticks: the `Return` of a timed
    /// call, carrying its duration (so a timed call is two words, as an untimed one). Exact
    /// below [`EXACT_DURATION`] ticks; longer durations keep 25 significant bits (see
    /// [`Event::timed_return`]).
    TimedReturn {
        /// The function returning.
        callee: MethodId,
        /// Its call's duration in clock ticks.
        ticks: u64,
    },
    /// `callee` returns from a call known to be long: with sampled timing, a call during
    /// which the coarse clock (a ticker thread's reading, about every millisecond) ticked
    /// many times (the facade's threshold: 16). `timed`: the call was one of the
    /// timed sample, and `ticks` is its exact duration, as a `TimedReturn`'s; otherwise its
    /// entry was placed between two ticks and `ticks` is measured from their midpoint (within
    /// half a tick interval). Exact below [`LONG_EXACT_DURATION`] ticks; longer durations
    /// keep 24 significant bits.
    LongReturn {
        /// The function returning.
        callee: MethodId,
        /// Its call's duration in clock ticks (at least 1).
        ticks: u64,
        /// Whether the call was timed (both ends read from the clock).
        timed: bool,
    },
    /// The thread spent `ticks` clock ticks inside cabprof itself (an exhaustive producer
    /// waiting for its analyzer, a ring attached, a name registered, a snapshot), between the
    /// event before this one and the event after it. Every frame open on the thread contains
    /// that time; the time analysis takes it out of them.
    Stall {
        /// Clock ticks, below [`MAX_PAYLOAD`] (saturating).
        ticks: u64,
    },
    /// The thread allocated a block of `size` bytes (`alloc` or `alloc_zeroed` of a global
    /// allocator), saturating at [`MAX_ALLOC_SIZE`].
    Alloc {
        /// Bytes requested (the layout's size).
        size: u64,
    },
    /// The thread freed a block of `size` bytes (its layout's size, so a block freed on
    /// another thread than the one that made it still balances).
    Dealloc {
        /// Bytes freed.
        size: u64,
    },
    /// The thread resized a block from `old` to `new` bytes (both at most
    /// [`MAX_REALLOC_SIZE`]).
    Realloc {
        /// The block's size before.
        old: u64,
        /// The block's size after.
        new: u64,
    },
    /// The first word of a resize too large for one `Realloc` word: the thread resized a block
    /// of `old` bytes, to the size the [`ReallocTo`](Self::ReallocTo) after it gives. The
    /// thread writes the two back to back (only a `Stall` can come between them); a stream
    /// with gaps (sampling) may hold one without the other.
    ReallocFrom {
        /// The block's size before, at most [`MAX_WIDE_REALLOC_SIZE`].
        old: u64,
    },
    /// The second word of such a resize: the block's size after, `new` bytes.
    ReallocTo {
        /// The block's size after, at most [`MAX_WIDE_REALLOC_SIZE`].
        new: u64,
    },
}

impl Event {
    /// `caller` calls `callee`.
    #[inline(always)]
    pub const fn call(caller: MethodId, callee: MethodId) -> Event {
        Event(TAG_CALL << TAG_SHIFT | (caller.0 as u64) << ID_BITS | callee.0 as u64)
    }

    /// `callee` returns.
    #[inline(always)]
    pub const fn ret(callee: MethodId) -> Event {
        Event(TAG_RETURN << TAG_SHIFT | callee.0 as u64)
    }

    /// `callee` returns from a call of `ticks` clock ticks. Durations below
    /// [`EXACT_DURATION`] are carried exactly; longer ones are truncated to 25 significant
    /// bits (a relative error below 2^-24), and saturate at [`MAX_DURATION`].
    #[inline(always)]
    pub const fn timed_return(callee: MethodId, ticks: u64) -> Event {
        Event(
            TAG_TIMED_RETURN << TAG_SHIFT
                | (encode_duration(ticks) as u64) << ID_BITS
                | callee.0 as u64,
        )
    }

    /// `callee` returns from a long call of `ticks` clock ticks (see
    /// [`EventKind::LongReturn`]). Durations below [`LONG_EXACT_DURATION`] are carried
    /// exactly; longer ones keep 24 significant bits (a relative error below 2^-23) and
    /// saturate at [`MAX_LONG_DURATION`]. An untimed call of 0 ticks is carried as 1: the
    /// word must differ from a plain `Return`.
    #[inline]
    pub const fn long_return(callee: MethodId, ticks: u64, timed: bool) -> Event {
        let ticks = if ticks == 0 && !timed { 1 } else { ticks };
        Event(
            TAG_RETURN << TAG_SHIFT
                | if timed { LONG_TIMED_BIT } else { 0 }
                | (encode_long_duration(ticks) as u64) << ID_BITS
                | callee.0 as u64,
        )
    }

    /// Path number `path` of `method` completed. Fails if `path > MAX_PATH_NUMBER`.
    #[inline]
    pub const fn path(method: MethodId, path: u32) -> Result<Event, EventError> {
        if path > MAX_PATH_NUMBER {
            return Err(EventError {
                field: "path number",
                value: path as u64,
                max: MAX_PATH_NUMBER as u64,
            });
        }
        Ok(Event(
            TAG_PATH << TAG_SHIFT | (method.0 as u64) << ID_BITS | path as u64,
        ))
    }

    /// A data access. `size` must be a power of two in `1..=128`, `addr <= MAX_ADDRESS`.
    #[inline]
    pub const fn mem(addr: u64, size: u32, store: bool) -> Result<Event, EventError> {
        if addr > ADDR_MASK {
            return Err(EventError {
                field: "address",
                value: addr,
                max: ADDR_MASK,
            });
        }
        if size == 0 || size > MAX_ACCESS_SIZE || !size.is_power_of_two() {
            return Err(EventError {
                field: "access size (a power of two)",
                value: size as u64,
                max: MAX_ACCESS_SIZE as u64,
            });
        }
        let log = size.trailing_zeros() as u64;
        let store = if store { STORE_BIT } else { 0 };
        Ok(Event(
            TAG_MEM << TAG_SHIFT | store | log << SIZE_SHIFT | addr,
        ))
    }

    /// The following events come from thread `id` (`id <= MAX_PAYLOAD`).
    pub const fn thread(id: u64) -> Result<Event, EventError> {
        match Self::payload("thread id", id) {
            Ok(p) => Ok(Event(TAG_THREAD << TAG_SHIFT | p)),
            Err(e) => Err(e),
        }
    }

    /// A user marker (`value <= MAX_PAYLOAD`). Values from `0xCA0 << 48` to `0xCA1 << 48 |
    /// 0xFFFF_FFFF_FFFF` are the time analysis' probe and calibration words (see
    /// `calibration.rs`): a marker there is read as one by a session timing calls.
    pub const fn marker(value: u64) -> Result<Event, EventError> {
        match Self::payload("marker value", value) {
            Ok(p) => Ok(Event(TAG_MARKER << TAG_SHIFT | p)),
            Err(e) => Err(e),
        }
    }

    const fn payload(field: &'static str, v: u64) -> Result<u64, EventError> {
        if v > PAYLOAD_MASK {
            Err(EventError {
                field,
                value: v,
                max: PAYLOAD_MASK,
            })
        } else {
            Ok(v)
        }
    }

    /// A timestamp of `ticks` (taken modulo 2^60, so this needs no check).
    #[inline(always)]
    pub const fn time(ticks: u64) -> Event {
        Event(TAG_TIME << TAG_SHIFT | (ticks & PAYLOAD_MASK))
    }

    /// `ticks` spent inside cabprof (see [`EventKind::Stall`]); saturates below
    /// [`MAX_PAYLOAD`], whose word would be `MAGIC`.
    #[inline]
    pub const fn stall(ticks: u64) -> Event {
        let t = if ticks >= PAYLOAD_MASK {
            PAYLOAD_MASK - 1
        } else {
            ticks
        };
        Event(TAG_STALL << TAG_SHIFT | t)
    }

    /// The raw word, as it travels through a ring. Never `CLEAR` nor `MAGIC`.
    #[inline(always)]
    pub const fn word(self) -> u64 {
        self.0
    }

    /// Re-read a word taken from a ring. `None` for `CLEAR`, `MAGIC` and unknown tags.
    #[inline]
    pub const fn from_word(word: u64) -> Option<Event> {
        match decode(word) {
            Some(_) => Some(Event(word)),
            None => None,
        }
    }

    /// Decode the word.
    #[inline]
    pub const fn kind(self) -> EventKind {
        decode(self.0).expect("an Event always holds a known tag")
    }

    /// Re-read a word that should be a `Mem` event (as a memory trace stores them): `None`
    /// for any word without the `Mem` tag. Every word with that tag is a valid `Mem` event, so
    /// this is one comparison.
    #[inline(always)]
    pub const fn from_mem_word(word: u64) -> Option<Event> {
        if word >> TAG_SHIFT == TAG_MEM {
            Some(Event(word))
        } else {
            None
        }
    }

    /// Whether this is a `Mem` event.
    #[inline(always)]
    pub const fn is_mem(self) -> bool {
        self.0 >> TAG_SHIFT == TAG_MEM
    }

    /// Whether this is a `Mem` event that writes (a store); `false` for every other event.
    #[inline(always)]
    pub const fn is_store(self) -> bool {
        self.is_mem() && self.0 & STORE_BIT != 0
    }
}

/// A `Call` word's `(caller, callee)` ids, without building an [`EventKind`]: one compare of
/// the tag. For an analysis's hot loop; [`decode`] for everything else.
#[inline(always)]
pub const fn as_call(word: u64) -> Option<(u32, u32)> {
    if word >> TAG_SHIFT == TAG_CALL {
        let p = word & PAYLOAD_MASK;
        Some((((p >> ID_BITS) & ID_MASK) as u32, (p & ID_MASK) as u32))
    } else {
        None
    }
}

/// A `Return` word's callee id (the same words [`decode`] accepts as a `Return`).
#[inline(always)]
pub const fn as_return(word: u64) -> Option<u32> {
    if word >> TAG_SHIFT == TAG_RETURN && (word & PAYLOAD_MASK) >> ID_BITS == 0 {
        Some((word & ID_MASK) as u32)
    } else {
        None
    }
}

/// Whether `word` opens a frame or a poll (`Call`, `Poll`): a clock read of that frame comes
/// after it, not before.
#[inline]
pub const fn opens_frame(word: u64) -> bool {
    matches!(word >> TAG_SHIFT, TAG_CALL | TAG_POLL_FIRST | TAG_POLL)
}

/// Whether the runtime writes [`EventKind::Stall`] words: only the time analysis reads them,
/// so they are written only while a session runs it (other sessions' streams, and their
/// event counts, stay as they were).
static STALL_WORDS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write [`EventKind::Stall`] words from now on (or stop); returns the previous setting.
pub fn set_stall_words(on: bool) -> bool {
    STALL_WORDS.swap(on, std::sync::atomic::Ordering::Relaxed)
}

/// Whether [`EventKind::Stall`] words are written (see [`set_stall_words`]).
#[inline]
pub fn stall_words() -> bool {
    STALL_WORDS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Decode a raw ring word; `None` for `CLEAR`, `MAGIC`, an unknown tag or a word no
/// constructor here produces.
///
/// Always inlined: every analysis decodes every word, and out of line the call and the
/// returned enum cost the analyzer enough to leave the application waiting on a full ring
/// (docs/PERFORMANCE.md, "Profiling off, on a real crate").
#[inline(always)]
pub const fn decode(word: u64) -> Option<EventKind> {
    let p = word & PAYLOAD_MASK;
    let hi = MethodId(((p >> ID_BITS) & ID_MASK) as u32);
    let lo = (p & ID_MASK) as u32;
    Some(match word >> TAG_SHIFT {
        TAG_CALL => EventKind::Call {
            caller: hi,
            callee: MethodId(lo),
        },
        // A plain Return carries nothing above its id; a long one, its duration.
        TAG_RETURN if p >> ID_BITS == 0 => EventKind::Return {
            callee: MethodId(lo),
        },
        TAG_RETURN => EventKind::LongReturn {
            callee: MethodId(lo),
            ticks: decode_long_duration((hi.0 as u64 & LONG_FIELD_MASK) as u32),
            timed: p & LONG_TIMED_BIT != 0,
        },
        TAG_PATH => EventKind::Path {
            method: hi,
            path: lo,
        },
        TAG_MEM => EventKind::Mem {
            addr: p & ADDR_MASK,
            size: 1 << ((p >> SIZE_SHIFT) & 0x7),
            store: p & STORE_BIT != 0,
        },
        TAG_THREAD => EventKind::Thread { id: p },
        TAG_MARKER => EventKind::Marker { value: p },
        TAG_POLL_FIRST | TAG_POLL => EventKind::Poll {
            method: hi,
            task: lo,
            first: word >> TAG_SHIFT == TAG_POLL_FIRST,
        },
        TAG_POLL_END => EventKind::PollEnd {
            task: lo,
            poll: ((p >> ID_BITS) & POLL_MASK) as u32,
            done: p & DONE_BIT != 0,
        },
        TAG_TIME => EventKind::Time { ticks: p },
        TAG_TIMED_RETURN => EventKind::TimedReturn {
            callee: MethodId(lo),
            ticks: decode_duration(hi.0),
        },
        TAG_STALL if p != PAYLOAD_MASK => EventKind::Stall { ticks: p },
        TAG_ALLOC => EventKind::Alloc { size: p },
        TAG_DEALLOC => EventKind::Dealloc { size: p },
        // One word: bit 58 is above both sizes, so a word with it set is not one we made.
        TAG_REALLOC if p & (REALLOC_WIDE_BIT | REALLOC_TO_BIT) == 0 => EventKind::Realloc {
            old: (p >> REALLOC_BITS) & REALLOC_MASK,
            new: p & REALLOC_MASK,
        },
        TAG_REALLOC if p & REALLOC_WIDE_BIT != 0 && p & REALLOC_TO_BIT == 0 => {
            EventKind::ReallocFrom {
                old: p & WIDE_SIZE_MASK,
            }
        }
        TAG_REALLOC if p & REALLOC_WIDE_BIT != 0 => EventKind::ReallocTo {
            new: p & WIDE_SIZE_MASK,
        },
        _ => return None,
    })
}

impl EventKind {
    /// Encode, checking every field. The inverse of [`Event::kind`].
    pub fn encode(self) -> Result<Event, EventError> {
        match self {
            EventKind::Call { caller, callee } => Ok(Event::call(caller, callee)),
            EventKind::Return { callee } => Ok(Event::ret(callee)),
            EventKind::Path { method, path } => Event::path(method, path),
            EventKind::Mem { addr, size, store } => Event::mem(addr, size, store),
            EventKind::Thread { id } => Event::thread(id),
            EventKind::Marker { value } => Event::marker(value),
            EventKind::Poll {
                method,
                task,
                first,
            } => Event::checked_poll(method, task, first),
            EventKind::PollEnd { task, poll, done } => Event::checked_poll_end(task, poll, done),
            EventKind::Time { ticks } => Event::payload("ticks", ticks).map(Event::time),
            EventKind::Stall { ticks } => {
                if ticks < PAYLOAD_MASK {
                    Ok(Event::stall(ticks))
                } else {
                    Err(EventError {
                        field: "stall ticks",
                        value: ticks,
                        max: PAYLOAD_MASK - 1,
                    })
                }
            }
            EventKind::TimedReturn { callee, ticks } => {
                let e = Event::timed_return(callee, ticks);
                match e.kind() {
                    EventKind::TimedReturn { ticks: kept, .. } if kept == ticks => Ok(e),
                    _ => Err(EventError {
                        field: "duration (ticks; exact below 2^29, else 25 significant bits)",
                        value: ticks,
                        max: MAX_DURATION,
                    }),
                }
            }
            EventKind::LongReturn {
                callee,
                ticks,
                timed,
            } => {
                let e = Event::long_return(callee, ticks, timed);
                match e.kind() {
                    EventKind::LongReturn { ticks: kept, .. } if kept == ticks => Ok(e),
                    _ => Err(EventError {
                        field: "long duration (ticks; exact below 2^28, else 24 significant \
                                bits; an untimed one at least 1)",
                        value: ticks,
                        max: MAX_LONG_DURATION,
                    }),
                }
            }
            EventKind::Alloc { size } => {
                Event::payload("allocation size", size).map(|_| Event::alloc(size as usize))
            }
            EventKind::Dealloc { size } => {
                Event::payload("allocation size", size).map(|_| Event::dealloc(size as usize))
            }
            EventKind::Realloc { old, new } => {
                for v in [old, new] {
                    if v > MAX_REALLOC_SIZE {
                        return Err(EventError {
                            field: "reallocation size",
                            value: v,
                            max: MAX_REALLOC_SIZE,
                        });
                    }
                }
                match Event::realloc(old as usize, new as usize) {
                    Ok(e) => Ok(e),
                    Err(_) => unreachable!("both sizes were checked"),
                }
            }
            EventKind::ReallocFrom { old: size } | EventKind::ReallocTo { new: size } => {
                if size > MAX_WIDE_REALLOC_SIZE {
                    return Err(EventError {
                        field: "reallocation size (two words)",
                        value: size,
                        max: MAX_WIDE_REALLOC_SIZE,
                    });
                }
                let to = matches!(self, EventKind::ReallocTo { .. });
                Ok(Event::realloc_half(size, to))
            }
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind().fmt(f)
    }
}

impl From<Event> for u64 {
    fn from(e: Event) -> u64 {
        e.0
    }
}

// ---------------------------------------------------------------------------------------------
// Polls of instrumented futures (`async fn`)

/// Largest task id a `Poll`/`PollEnd` word can carry (30 bits); producers wrap their ids here.
pub const MAX_TASK_ID: u32 = (1 << ID_BITS) - 1;
/// Largest poll number a `PollEnd` word can carry (29 bits); producers saturate here.
pub const MAX_POLL_NUMBER: u32 = (1 << POLL_BITS) - 1;

const POLL_BITS: u32 = 29;
const POLL_MASK: u64 = (1 << POLL_BITS) - 1;
const DONE_BIT: u64 = 1 << 59;
