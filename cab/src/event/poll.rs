//! The words of an instrumented future's polls (`async fn`): `Poll` and `PollEnd`.

use super::{
    Event, EventError, MethodId, DONE_BIT, ID_BITS, ID_MASK, MAX_POLL_NUMBER, MAX_TASK_ID,
    TAG_POLL, TAG_POLL_END, TAG_POLL_FIRST, TAG_SHIFT,
};

impl Event {
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
