//! The words of an instrumented future's polls (`async fn`): `Poll` and `PollEnd`, and the
//! **wake delay** marker a timed future writes after a poll's start stamp when it was woken
//! since its last poll: the clock ticks from that wake to this poll's start (48 bits,
//! saturating), the executor's scheduling delay.
//!
//! ```text
//!  63  60 59        48 47                                                0
//! +------+------------+--------------------------------------------------+
//! |  6   | 0xB30      | ticks from the wake to the poll (48 bits)        |   wake delay
//! +------+------------+--------------------------------------------------+
//! ```

use super::{
    Event, EventError, MethodId, DONE_BIT, ID_BITS, ID_MASK, MAX_POLL_NUMBER, MAX_TASK_ID,
    PAYLOAD_MASK, TAG_MARKER, TAG_POLL, TAG_POLL_END, TAG_POLL_FIRST, TAG_SHIFT,
};

const WAKE_DELAY_MARK: u64 = 0xB30;
const MARK_SHIFT: u32 = 48;
/// Largest wake delay a word carries, in ticks; longer ones saturate.
pub const MAX_WAKE_DELAY: u64 = (1 << MARK_SHIFT) - 1;

/// The ticks of a wake delay word, or `None` for any other word.
#[inline]
pub const fn as_wake_delay(word: u64) -> Option<u64> {
    if word >> TAG_SHIFT != TAG_MARKER {
        return None;
    }
    let p = word & PAYLOAD_MASK;
    if p >> MARK_SHIFT == WAKE_DELAY_MARK {
        Some(p & MAX_WAKE_DELAY)
    } else {
        None
    }
}

impl Event {
    /// A timed future's poll began `ticks` after its waker was woken (saturating at
    /// [`MAX_WAKE_DELAY`]); written after the poll's start stamp.
    #[inline]
    pub const fn wake_delay(ticks: u64) -> Event {
        let t = if ticks > MAX_WAKE_DELAY {
            MAX_WAKE_DELAY
        } else {
            ticks
        };
        Event(TAG_MARKER << TAG_SHIFT | WAKE_DELAY_MARK << MARK_SHIFT | t)
    }

    /// A poll of future `task` of `method` begins (`first`: its first poll). `task` is taken
    /// modulo 2^30 (ids wrap at [`MAX_TASK_ID`]), so this needs no check.
    #[inline(always)]
    pub const fn poll(method: MethodId, task: u32, first: bool) -> Event {
        let tag = if first { TAG_POLL_FIRST } else { TAG_POLL };
        Event(tag << TAG_SHIFT | (method.0 as u64) << ID_BITS | (task as u64 & ID_MASK))
    }

    /// The poll number `poll` of future `task` ends; `done` if the future finished. `task` is
    /// taken modulo 2^30 and `poll` saturates at [`MAX_POLL_NUMBER`], so this needs no check.
    #[inline(always)]
    pub const fn poll_end(task: u32, poll: u32, done: bool) -> Event {
        let poll = if poll > MAX_POLL_NUMBER {
            MAX_POLL_NUMBER
        } else {
            poll
        };
        let done = if done { DONE_BIT } else { 0 };
        Event(TAG_POLL_END << TAG_SHIFT | done | (poll as u64) << ID_BITS | (task as u64 & ID_MASK))
    }

    pub(super) fn checked_poll(
        method: MethodId,
        task: u32,
        first: bool,
    ) -> Result<Event, EventError> {
        Self::task_id(task).map(|t| Event::poll(method, t, first))
    }

    pub(super) fn checked_poll_end(task: u32, poll: u32, done: bool) -> Result<Event, EventError> {
        if poll > MAX_POLL_NUMBER {
            return Err(EventError {
                field: "poll number",
                value: poll as u64,
                max: MAX_POLL_NUMBER as u64,
            });
        }
        Self::task_id(task).map(|t| Event::poll_end(t, poll, done))
    }

    fn task_id(task: u32) -> Result<u32, EventError> {
        if task > MAX_TASK_ID {
            Err(EventError {
                field: "task id",
                value: task as u64,
                max: MAX_TASK_ID as u64,
            })
        } else {
            Ok(task)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_delay_round_trips_saturates_and_is_no_other_marker() {
        for t in [0, 1, 123_456_789, MAX_WAKE_DELAY] {
            let w = Event::wake_delay(t).word();
            assert_eq!(as_wake_delay(w), Some(t));
            assert_eq!(crate::event::as_wait(w), None);
            assert_eq!(crate::event::as_thread_mark(w), None);
            assert_eq!(crate::event::as_calibration(w), None);
            assert!(Event::from_word(w).is_some());
        }
        assert_eq!(
            as_wake_delay(Event::wake_delay(u64::MAX).word()),
            Some(MAX_WAKE_DELAY)
        );
        assert_eq!(as_wake_delay(Event::marker(7).unwrap().word()), None);
        assert_eq!(as_wake_delay(Event::time(5).word()), None);
    }
}
