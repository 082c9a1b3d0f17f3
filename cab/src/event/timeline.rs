//! The words of timeline mode: where a timed call's start comes from, and which thread a
//! stream's slices belong to.
//!
//! A timed call is `Call`, …, `TimedReturn { ticks }`: its duration, no start. In timeline
//! mode its exit also writes the clock reading it took for that duration, as a `Time` word
//! right before the `TimedReturn` (`Call`, …, `Time(end)`, `TimedReturn(ticks)`), so that the
//! call's start is `end - ticks`. The exit reads the clock once either way: timeline mode adds
//! one word per timed call, not a clock read. Functions stamped at both ends (`paths`) and
//! futures' polls already carry both stamps and are left as they were. The time analysis
//! takes such a `Time` as a stamp of the frame the `TimedReturn` closes (its start, in a leaf
//! whose `Call` came just before, else its end), which the duration the `TimedReturn` carries
//! supersedes, so its figures do not change, with one exception: a wait for a full ring while
//! the exit stamp is pushed is told in a `Stall` word between the stamp and the `TimedReturn`,
//! so the time analysis takes that wait out of the closing call as well as out of the calls
//! around it (the call's compensated time is then short by the wait; its raw time is right).
//!
//! Each thread also writes, once per session (after its first timed exit's words), a **thread
//! mark**: a `Marker` word in a range of its own naming the thread's number in the process, so
//! that the timeline can tell its threads apart and name them (the facade keeps the number's
//! name). Every other analysis ignores it as it ignores any marker; the time the mark took (a
//! `Stall` word, when the number is new) comes after the exit it follows, outside that call.
//!
//! ```text
//!  63  60 59        48 47                                          0
//! +------+------------+---------------------------------------------+
//! |  6   | 0xCA2      | thread number (48 bits)                     |   thread mark
//! +------+------------+---------------------------------------------+
//! ```

use super::{Event, PAYLOAD_MASK, TAG_MARKER, TAG_SHIFT};

/// The marker values' top 12 bits (of 60) of a thread mark.
const THREAD_MARK: u64 = 0xCA2;
const MARK_SHIFT: u32 = 48;
/// Largest thread number a thread mark carries (48 bits).
pub const MAX_THREAD_NUMBER: u64 = (1 << MARK_SHIFT) - 1;

impl Event {
    /// Timeline mode: the events around this word come from thread number `n` (taken modulo
    /// 2^48, see [`MAX_THREAD_NUMBER`]).
    pub const fn thread_mark(n: u64) -> Event {
        Event(TAG_MARKER << TAG_SHIFT | THREAD_MARK << MARK_SHIFT | (n & MAX_THREAD_NUMBER))
    }
}

/// The thread number of a thread mark, or `None` for any other word.
#[inline]
pub const fn as_thread_mark(word: u64) -> Option<u64> {
    if word >> TAG_SHIFT != TAG_MARKER {
        return None;
    }
    let p = word & PAYLOAD_MASK;
    if p >> MARK_SHIFT != THREAD_MARK {
        return None;
    }
    Some(p & MAX_THREAD_NUMBER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_marks_round_trip_and_differ_from_probes_and_calibrations() {
        for n in [0, 1, 77, MAX_THREAD_NUMBER] {
            let w = Event::thread_mark(n).word();
            assert_eq!(as_thread_mark(w), Some(n));
            assert!(Event::from_word(w).is_some());
            assert_eq!(super::super::as_calibration(w), None);
            assert!(!super::super::is_probe(w));
        }
        assert_eq!(as_thread_mark(Event::probe().word()), None);
        assert_eq!(as_thread_mark(Event::time(5).word()), None);
        assert_eq!(as_thread_mark(Event::marker(3).unwrap().word()), None);
    }
}
