//! The words of the lock and channel wrappers (the facade's `cabprof::sync`): a **wait** word
//! saying what kind of wait it was, at which creation site and, for a hold, how many threads
//! waited meanwhile, followed by a **wait time** word with its nanoseconds. Both are `Marker`
//! words in ranges of their own, so every analysis that does not want them ignores them as
//! it ignores any marker; the thread that waited (or, for a hold, released) writes both, back
//! to back, so the analysis charges them to that thread's calling context.
//!
//! ```text
//!  63  60 59        48 47   44 43          32 31                          0
//! +------+------------+-------+--------------+-----------------------------+
//! |  6   | 0xB20      | kind  | waiters      | site (32 bits)              |   wait
//! +------+------------+-------+--------------+-----------------------------+
//! |  6   | 0xB21      | nanoseconds (48 bits, saturating: 78 hours)        |   wait time
//! +------+------------+------------------------------------------------------+
//! |  6   | 0xB22      | clock reading at the start, low 48 bits            |   wait from
//! +------+------------+------------------------------------------------------+
//! |  6   | 0xB23      | clock reading at the end, low 48 bits              |   wait to
//! +------+------------+------------------------------------------------------+
//! ```
//!
//! A channel message's **latency** (kind `Latency`) is the same two words, written by the
//! thread that received it: the time from its send to that receive.
//!
//! In timeline mode a wait of the block profile (not a hold) is followed by its **from** and
//! **to** words: the clock (`crate::clock::now`) at its two ends, for the timeline to draw it.
//! They carry the readings' low 48 bits (a day at 3 GHz): the timeline takes the high bits
//! from the nearest full reading it has seen.

use super::{Event, PAYLOAD_MASK, TAG_MARKER, TAG_SHIFT};

const WAIT_MARK: u64 = 0xB20;
const WAIT_NS_MARK: u64 = 0xB21;
const WAIT_FROM_MARK: u64 = 0xB22;
const WAIT_TO_MARK: u64 = 0xB23;
const MARK_SHIFT: u32 = 48;
const LOW_MASK: u64 = (1 << MARK_SHIFT) - 1;
const KIND_SHIFT: u32 = 44;
const WAITERS_SHIFT: u32 = 32;
/// Largest waiter count a wait word carries; more saturate.
pub const MAX_WAITERS: u32 = (1 << (KIND_SHIFT - WAITERS_SHIFT)) - 1;
/// Largest duration a wait time word carries, in nanoseconds; longer ones saturate.
pub const MAX_WAIT_NS: u64 = LOW_MASK;

/// What a wait word is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// A thread waited for a lock, from its attempt to the grant (Go's block profile).
    Lock,
    /// A thread released a lock others waited for: the time they waited during this hold,
    /// one waiter's worth per waiter (Go's mutex profile).
    Hold,
    /// A thread waited to send on a full channel (block profile).
    Send,
    /// A thread waited to receive from an empty channel (block profile).
    Receive,
    /// A message sat in a channel from its send to the receive that took it out (not a wait
    /// of either profile: the receiving thread writes it, but no thread waited for it).
    Latency,
}

impl WaitKind {
    const ALL: [WaitKind; 5] = [
        WaitKind::Lock,
        WaitKind::Hold,
        WaitKind::Send,
        WaitKind::Receive,
        WaitKind::Latency,
    ];

    const fn code(self) -> u64 {
        match self {
            WaitKind::Lock => 0,
            WaitKind::Hold => 1,
            WaitKind::Send => 2,
            WaitKind::Receive => 3,
            WaitKind::Latency => 4,
        }
    }
}

/// A decoded wait or wait time word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitWord {
    /// What waited, where: the wait time word comes next.
    Wait {
        /// The kind of wait.
        kind: WaitKind,
        /// For a hold, the threads that waited during it (saturating at [`MAX_WAITERS`]);
        /// 1 for the other kinds.
        waiters: u32,
        /// The creation site's number (the facade's table of sites names it).
        site: u32,
    },
    /// How long, in nanoseconds.
    Nanos(u64),
    /// Timeline mode: the clock at the wait's start, its low 48 bits.
    From(u64),
    /// Timeline mode: the clock at the wait's end, its low 48 bits.
    To(u64),
}

impl Event {
    /// A wait of `kind` at `site`, `waiters` threads' worth (see the module docs); the
    /// [`wait_ns`](Self::wait_ns) word follows it.
    #[inline]
    pub const fn wait(kind: WaitKind, waiters: u32, site: u32) -> Event {
        let waiters = if waiters > MAX_WAITERS {
            MAX_WAITERS
        } else {
            waiters
        } as u64;
        Event(
            TAG_MARKER << TAG_SHIFT
                | WAIT_MARK << MARK_SHIFT
                | kind.code() << KIND_SHIFT
                | waiters << WAITERS_SHIFT
                | site as u64,
        )
    }

    /// The duration of the wait word before it, in nanoseconds (saturating at
    /// [`MAX_WAIT_NS`]).
    #[inline]
    pub const fn wait_ns(ns: u64) -> Event {
        let ns = if ns > MAX_WAIT_NS { MAX_WAIT_NS } else { ns };
        Event(TAG_MARKER << TAG_SHIFT | WAIT_NS_MARK << MARK_SHIFT | ns)
    }

    /// Timeline mode, after a wait's time word: clock readings `from` and `to` at its ends
    /// (their low 48 bits; see the module docs).
    #[inline]
    pub const fn wait_span(from: u64, to: u64) -> [Event; 2] {
        [
            Event(TAG_MARKER << TAG_SHIFT | WAIT_FROM_MARK << MARK_SHIFT | (from & LOW_MASK)),
            Event(TAG_MARKER << TAG_SHIFT | WAIT_TO_MARK << MARK_SHIFT | (to & LOW_MASK)),
        ]
    }
}

/// The full clock reading (modulo 2^60, as `Time` words carry them) whose low 48 bits are
/// `low`, nearest to the full reading `near`.
pub const fn widen_stamp(low: u64, near: u64) -> u64 {
    let span = 1u64 << MARK_SHIFT;
    let candidate = (near & !LOW_MASK) | (low & LOW_MASK);
    let c = if candidate > near && candidate - near > span / 2 {
        candidate.wrapping_sub(span)
    } else if candidate < near && near - candidate > span / 2 {
        candidate.wrapping_add(span)
    } else {
        candidate
    };
    c & super::MAX_PAYLOAD
}

/// The wait or wait time word `word` is, or `None` for any other word.
#[inline]
pub const fn as_wait(word: u64) -> Option<WaitWord> {
    if word >> TAG_SHIFT != TAG_MARKER {
        return None;
    }
    let p = word & PAYLOAD_MASK;
    let low = p & LOW_MASK;
    match p >> MARK_SHIFT {
        WAIT_MARK => {
            let code = (low >> KIND_SHIFT) as usize;
            if code >= WaitKind::ALL.len() {
                return None;
            }
            Some(WaitWord::Wait {
                kind: WaitKind::ALL[code],
                waiters: ((low >> WAITERS_SHIFT) & MAX_WAITERS as u64) as u32,
                site: low as u32,
            })
        }
        WAIT_NS_MARK => Some(WaitWord::Nanos(low)),
        WAIT_FROM_MARK => Some(WaitWord::From(low)),
        WAIT_TO_MARK => Some(WaitWord::To(low)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamps_high_bits_come_from_the_nearest_reading() {
        let span = 1u64 << 48;
        let near = 7 * span + 100;
        assert_eq!(widen_stamp(near & LOW_MASK, near), near);
        // A little before or after `near`, across a boundary of the low bits.
        assert_eq!(widen_stamp(span - 5, 7 * span + 3), 7 * span - 5);
        assert_eq!(widen_stamp(4, 8 * span - 10), 8 * span + 4);
        // Modulo 2^60 at the top.
        let top = super::super::MAX_PAYLOAD;
        assert_eq!(widen_stamp(2, top - 3), 2);
    }

    #[test]
    fn wait_words_round_trip_and_are_no_other_marker() {
        for kind in WaitKind::ALL {
            for (waiters, site) in [(1, 0), (3, 7), (MAX_WAITERS, u32::MAX)] {
                let w = Event::wait(kind, waiters, site).word();
                assert_eq!(
                    as_wait(w),
                    Some(WaitWord::Wait {
                        kind,
                        waiters,
                        site
                    })
                );
                assert!(Event::from_word(w).is_some());
                assert_eq!(super::super::as_block(w), None);
                assert_eq!(super::super::as_thread_mark(w), None);
                assert_eq!(super::super::as_calibration(w), None);
            }
        }
        assert_eq!(
            as_wait(Event::wait(WaitKind::Hold, 99_999, 1).word()),
            Some(WaitWord::Wait {
                kind: WaitKind::Hold,
                waiters: MAX_WAITERS,
                site: 1
            })
        );
        for ns in [0, 1, 20_000_000, MAX_WAIT_NS] {
            assert_eq!(
                as_wait(Event::wait_ns(ns).word()),
                Some(WaitWord::Nanos(ns))
            );
        }
        assert_eq!(
            as_wait(Event::wait_ns(u64::MAX).word()),
            Some(WaitWord::Nanos(MAX_WAIT_NS))
        );
        let [from, to] = Event::wait_span(0xABC_0000_0000_1234, 5);
        assert_eq!(as_wait(from.word()), Some(WaitWord::From(0x0000_0000_1234)));
        assert_eq!(as_wait(to.word()), Some(WaitWord::To(5)));
        assert_eq!(as_wait(Event::block(0x1234).word()), None);
        assert_eq!(as_wait(Event::marker(3).unwrap().word()), None);
    }
}
