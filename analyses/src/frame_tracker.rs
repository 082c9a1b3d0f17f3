//! The one tracker of calls, returns and polls that the analyses rebuilding task stacks share:
//! each thread's open frames, the polls in progress with the frames they parked, and the rules
//! that resynchronise a stream that lost words. An analysis keeps its own data per frame (and
//! per context, such as a callee list) in a type implementing [`Frames`], asks the tracker
//! whether a word matches the innermost frame, and reacts to what each resynchronisation
//! reports; so every analysis built on it reads a gappy stream the same way.
//!
//! Built on it: the calling-context tracker (`call_tree::tracker`, and through it the calling
//! context tree, allocations and waits), the depth-two call-tree profile, the time analysis and
//! the timeline. Their per-call fast paths may test the top frame themselves (on raw ids, with
//! their own caches); what happens when the test fails is always the tracker's. (The timeline
//! does not test a `Call`'s caller at all: see its `on_call`.)

use cabprof_cab::event::MethodId;

use crate::call_tree::tasks::TaskKey;
use crate::thread_stacks::ThreadStacks;

/// The open frames of one context (a thread's own, or one poll of a future), innermost last,
/// with whatever the analysis keeps beside them.
pub(crate) trait Frames: Default {
    /// What the analysis keeps per thread beside its frames, which polls do not park (tables
    /// of what is open on the thread, pending stamps).
    type Thread: Default + Clone + std::fmt::Debug + Eq;
    /// How many frames are open.
    fn depth(&self) -> usize;
    /// The function of the frame at `i` (0: the outermost); `i < depth()`.
    fn method(&self, i: usize) -> MethodId;
    /// Keep the `n` outermost frames: those above lost their `Return`s (they close on
    /// `thread`).
    fn truncate(&mut self, n: usize, thread: &mut Self::Thread);
}

/// One thread's open frames, the polls it is inside, and the analysis' own per-thread state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Open<S: Frames> {
    /// The frames of the context running now (a poll's, inside one).
    pub(crate) stack: S,
    /// The polls in progress, innermost last: each future's key and the frames it parked.
    pub(crate) polls: Vec<(TaskKey, S)>,
    pub(crate) thread: S::Thread,
}

/// What [`FrameTracker::resync_call`] did with a `Call` whose caller was not on top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallFrom {
    /// The caller's innermost open frame is on top now (the frames above it were closed).
    Caller,
    /// The caller is the root: every frame was closed.
    Root,
    /// The caller has no open frame (its `Call` was lost, or came before the stream began):
    /// every frame was closed, and the analysis opens one for the caller, not counted as a
    /// call, before the callee's.
    Missing,
}

/// Per thread of a stream, the open frames `S` and the polls in progress, and what
/// resynchronising cost.
///
/// Resynchronisation (sampling gaps, streams starting mid-run): a `Call` whose caller is not on
/// top continues from the caller's innermost open frame, closing the frames above it (they
/// lost their `Return`s), from the root if the caller is the root, and otherwise from a frame
/// the analysis makes for the caller ([`CallFrom`]). A `Return` that is not the innermost
/// frame's closes its innermost open frame and everything above it, or is ignored (and
/// counted) if it has none. A `PollEnd` that finds no poll in progress is ignored; one whose
/// task is not the innermost poll's (a `PollEnd` was lost) ends the innermost poll anyway.
/// Each of these sets `approximate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FrameTracker<S: Frames> {
    pub(crate) threads: ThreadStacks<Open<S>>,
    /// A resynchronisation, an unmatched `Return` or a lost `PollEnd` was seen (or the
    /// analysis said so).
    pub(crate) approximate: bool,
    /// `Call`s whose caller was not the innermost open frame, and `Return`s that closed frames
    /// above their own.
    pub(crate) resyncs: u64,
    /// `Return`s that matched no open frame.
    pub(crate) unmatched_returns: u64,
}

impl<S: Frames> Default for FrameTracker<S> {
    fn default() -> Self {
        FrameTracker {
            threads: ThreadStacks::default(),
            approximate: false,
            resyncs: 0,
            unmatched_returns: 0,
        }
    }
}

impl<S: Frames> FrameTracker<S> {
    /// The frames of the context running on the current thread.
    #[inline(always)]
    pub(crate) fn stack(&self) -> &S {
        &self.threads.current.stack
    }

    /// The same, to change.
    #[inline(always)]
    pub(crate) fn stack_mut(&mut self) -> &mut S {
        &mut self.threads.current.stack
    }

    /// Whether a `Call` from `caller` continues the innermost frame (or the root, with none
    /// open); if not, [`resync_call`](Self::resync_call).
    #[inline(always)]
    pub(crate) fn calls_from_top(&self, caller: MethodId) -> bool {
        let s = self.stack();
        match s.depth() {
            0 => caller == MethodId::ROOT,
            d => s.method(d - 1) == caller,
        }
    }

    /// Whether a `Return` of `callee` closes the innermost frame; if not,
    /// [`resync_return`](Self::resync_return).
    #[inline(always)]
    pub(crate) fn returns_top(&self, callee: MethodId) -> bool {
        let s = self.stack();
        let d = s.depth();
        d > 0 && s.method(d - 1) == callee
    }

    /// A `Call` whose caller is not on top: see the type docs.
    #[cold]
    pub(crate) fn resync_call(&mut self, caller: MethodId) -> CallFrom {
        self.approximate = true;
        self.resyncs += 1;
        let open = &mut self.threads.current;
        if let Some(i) = innermost(&open.stack, caller) {
            open.stack.truncate(i + 1, &mut open.thread);
            return CallFrom::Caller;
        }
        open.stack.truncate(0, &mut open.thread);
        if caller == MethodId::ROOT {
            CallFrom::Root
        } else {
            CallFrom::Missing
        }
    }

    /// A `Return` of `callee` that does not close the innermost frame: close `callee`'s
    /// innermost frame and what is above it (`true`), or count it unmatched (`false`).
    #[cold]
    pub(crate) fn resync_return(&mut self, callee: MethodId) -> bool {
        if !self.unwind_to(callee) {
            return false;
        }
        let open = &mut self.threads.current;
        let d = open.stack.depth();
        open.stack.truncate(d - 1, &mut open.thread);
        true
    }

    /// [`resync_return`](Self::resync_return) for an analysis that closes `callee`'s frame
    /// itself (it may time it): only the frames above it are closed, leaving it on top.
    #[cold]
    pub(crate) fn unwind_to(&mut self, callee: MethodId) -> bool {
        self.approximate = true;
        let open = &mut self.threads.current;
        match innermost(&open.stack, callee) {
            Some(i) => {
                open.stack.truncate(i + 1, &mut open.thread);
                self.resyncs += 1;
                true
            }
            None => {
                self.unmatched_returns += 1;
                false
            }
        }
    }

    /// A `Thread` word: the events that follow are thread `id`'s.
    pub(crate) fn on_thread(&mut self, id: u64) {
        self.threads.switch_to(id);
    }

    /// A poll of future `key` begins: the thread's frames are parked and the poll continues
    /// from `stack` (the future's own frame).
    pub(crate) fn park(&mut self, key: TaskKey, stack: S) {
        let open = &mut self.threads.current;
        let parked = std::mem::replace(&mut open.stack, stack);
        open.polls.push((key, parked));
    }

    /// The innermost poll ends (its `PollEnd` names `task`): back to the frames it parked.
    /// Returns the future's key and the poll's frames; `None` if no poll was in progress.
    pub(crate) fn unpark(&mut self, task: u32) -> Option<(TaskKey, S)> {
        let open = &mut self.threads.current;
        let Some((key, parked)) = open.polls.pop() else {
            // Its `Poll` was not seen (a stream starting mid-poll, or sampling).
            self.approximate = true;
            return None;
        };
        // A lost `PollEnd` (sampling): the key is another future's.
        self.approximate |= key.1 != task;
        Some((key, std::mem::replace(&mut open.stack, parked)))
    }

    /// Every thread's open frames and parked ones.
    pub(crate) fn all_stacks_mut(&mut self) -> impl Iterator<Item = &mut S> + '_ {
        self.threads.all_mut().flat_map(|open| {
            std::iter::once(&mut open.stack).chain(open.polls.iter_mut().map(|p| &mut p.1))
        })
    }

    /// Add `other`'s counts (merging two streams' results; their frames stay apart).
    pub(crate) fn merge_counts(&mut self, other: &FrameTracker<S>) {
        self.approximate |= other.approximate;
        self.resyncs += other.resyncs;
        self.unmatched_returns += other.unmatched_returns;
    }
}

/// The innermost open frame of `method` in `s`.
fn innermost<S: Frames>(s: &S, method: MethodId) -> Option<usize> {
    (0..s.depth()).rev().find(|&i| s.method(i) == method)
}

/// Frames with no data but their function.
impl Frames for Vec<MethodId> {
    type Thread = ();
    #[inline(always)]
    fn depth(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn method(&self, i: usize) -> MethodId {
        self[i]
    }
    fn truncate(&mut self, n: usize, _: &mut ()) {
        Vec::truncate(self, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(n: u32) -> MethodId {
        MethodId::new(n).unwrap()
    }

    fn stack(t: &FrameTracker<Vec<MethodId>>) -> Vec<u32> {
        t.stack().iter().map(|m| m.get()).collect()
    }

    fn with(frames: &[u32]) -> FrameTracker<Vec<MethodId>> {
        let mut t = FrameTracker::default();
        *t.stack_mut() = frames.iter().map(|&n| m(n)).collect();
        t
    }

    #[test]
    fn a_call_from_below_the_top_closes_the_frames_above_its_caller() {
        let mut t = with(&[1, 2, 1, 3, 4]);
        assert!(t.calls_from_top(m(4)));
        assert!(!t.calls_from_top(m(1)));
        assert_eq!(t.resync_call(m(1)), CallFrom::Caller);
        assert_eq!(stack(&t), [1, 2, 1]);
        assert!(t.approximate);
        assert_eq!((t.resyncs, t.unmatched_returns), (1, 0));
    }

    #[test]
    fn a_call_from_the_root_or_an_unknown_caller_closes_every_frame() {
        let mut t = with(&[1, 2]);
        assert_eq!(t.resync_call(MethodId::ROOT), CallFrom::Root);
        assert!(stack(&t).is_empty());
        assert!(t.calls_from_top(MethodId::ROOT));
        let mut t = with(&[1, 2]);
        assert_eq!(t.resync_call(m(9)), CallFrom::Missing);
        assert!(stack(&t).is_empty());
        assert_eq!(t.resyncs, 1);
    }

    #[test]
    fn a_return_below_the_top_closes_from_its_innermost_frame_or_is_unmatched() {
        let mut t = with(&[1, 2, 1, 3]);
        assert!(t.returns_top(m(3)));
        assert!(!t.returns_top(m(1)));
        assert!(t.resync_return(m(1)));
        assert_eq!(stack(&t), [1, 2]);
        assert!(!t.resync_return(m(7)));
        assert_eq!(stack(&t), [1, 2]);
        assert!(t.unwind_to(m(2)));
        assert_eq!(stack(&t), [1, 2]);
        assert!(t.unwind_to(m(1)));
        assert_eq!(stack(&t), [1]);
        assert_eq!((t.resyncs, t.unmatched_returns), (3, 1));
        // Nothing open: no `Return` is the top's, not even the root's.
        let t = with(&[]);
        assert!(!t.returns_top(MethodId::ROOT));
    }

    #[test]
    fn a_poll_parks_the_frames_and_its_end_brings_them_back() {
        let mut t = with(&[1, 2]);
        t.park((m(5), 8), vec![m(5)]);
        t.park((m(6), 9), vec![m(6), m(7)]);
        assert_eq!(stack(&t), [6, 7]);
        assert_eq!(t.unpark(9), Some(((m(6), 9), vec![m(6), m(7)])));
        assert_eq!(stack(&t), [5]);
        assert!(!t.approximate);
        // A lost `PollEnd`: the innermost poll ends anyway, approximately.
        assert_eq!(t.unpark(3), Some(((m(5), 8), vec![m(5)])));
        assert_eq!(stack(&t), [1, 2]);
        assert!(t.approximate);
        // No poll in progress.
        let mut t = with(&[1]);
        assert_eq!(t.unpark(8), None);
        assert_eq!(stack(&t), [1]);
        assert!(t.approximate);
    }

    #[test]
    fn each_thread_has_its_own_frames_and_polls() {
        let mut t = with(&[1]);
        t.on_thread(4);
        assert!(stack(&t).is_empty());
        t.stack_mut().push(m(2));
        t.park((m(3), 1), vec![m(3)]);
        t.on_thread(u64::MAX);
        assert_eq!(stack(&t), [1]);
        assert_eq!(t.unpark(1), None);
        t.on_thread(4);
        assert_eq!(t.unpark(1).map(|p| p.0), Some((m(3), 1)));
        assert_eq!(stack(&t), [2]);
        assert_eq!(t.all_stacks_mut().count(), 2);
    }
}
