//! Per-thread state for the analyses that keep a shadow stack.
//!
//! A ring normally carries one application thread, so one state is live. When a ring
//! multiplexes several threads it says so with `Thread { id }` words; the events that follow
//! belong to thread `id`, so the stack-keeping analyses switch to that thread's state here and
//! park the previous one. Switching is rare (one hash operation per `Thread` word) and the hot
//! path touches only [`ThreadStacks::current`].

use hashbrown::HashMap;

/// The id under which events before the first `Thread` word are kept. Event thread ids are at
/// most 60 bits, so this never collides with a real one.
const UNNAMED_THREAD: u64 = u64::MAX;

/// One `S` per thread id seen in the stream; `current` belongs to `current_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ThreadStacks<S> {
    /// The state of the thread whose events are arriving now.
    pub(crate) current: S,
    /// The thread `current` belongs to; [`UNNAMED_THREAD`] before any `Thread` word.
    current_id: u64,
    /// Every other thread's state. Never holds `current_id`.
    parked: HashMap<u64, S>,
}

impl<S: Default> Default for ThreadStacks<S> {
    fn default() -> Self {
        ThreadStacks {
            current: S::default(),
            current_id: UNNAMED_THREAD,
            parked: HashMap::new(),
        }
    }
}

impl<S: Default> ThreadStacks<S> {
    /// Make thread `id`'s state current, parking the present one. Returns `true` if the thread
    /// changed.
    pub(crate) fn switch_to(&mut self, id: u64) -> bool {
        if id == self.current_id {
            return false;
        }
        let incoming = self.parked.remove(&id).unwrap_or_default();
        let outgoing = std::mem::replace(&mut self.current, incoming);
        self.parked.insert(self.current_id, outgoing);
        self.current_id = id;
        debug_assert!(!self.parked.contains_key(&self.current_id));
        true
    }

    /// The thread whose events are arriving now ([`UNNAMED_THREAD`] before any `Thread` word).
    pub(crate) fn current_id(&self) -> u64 {
        self.current_id
    }

    /// Every thread's state but the current one.
    pub(crate) fn parked(&self) -> impl Iterator<Item = &S> + '_ {
        self.parked.values()
    }

    /// Every thread's state, the current one included.
    pub(crate) fn all_mut(&mut self) -> impl Iterator<Item = &mut S> + '_ {
        std::iter::once(&mut self.current).chain(self.parked.values_mut())
    }
}
