//! Call-tree analyses, rebuilt on the analyzer side from `Call`/`Return` words.
//!
//! Contract, for both analyses here:
//! - Only `Call`, `Return`, `Thread`, `Poll` and `PollEnd` words matter; all others are
//!   skipped. Results do not depend on how the stream is cut into chunks.
//! - Contexts belong to tasks, not threads: between a `Poll { method, task, .. }` word and its
//!   `PollEnd`, events belong to that future (an instrumented `async fn`), whose stack is its
//!   calling context (learnt at its first poll, right after its `Call`) plus what this poll
//!   opens; the thread's own stack is parked meanwhile. So interleaved tasks, and tasks that
//!   move between threads, get the tree they would have had running alone. The frame of an
//!   `async fn` spans its polls; its callee list is assembled from the pieces of each poll, in
//!   poll order. When a future is polled on a thread whose stream this instance did not see its
//!   first poll in, the pieces wait (a detached subtree, a list of fragments) until `merge`
//!   brings the instance that did; an instance keeps such pending state only for futures that
//!   moved between streams.
//! - Each instance keeps one shadow stack per thread of its stream (a ring normally carries one
//!   thread; `Thread { id }` words switch stacks when it multiplexes several). `merge` combines
//!   *results*, not stacks: merging the instances of independent threads gives the same report
//!   as one instance that saw each thread's complete stream.
//! - An exhaustive, balanced stream is rebuilt exactly. A stream that starts mid-run or has gaps
//!   (sampling mode) is handled without panicking: a `Return` that matches no open frame is
//!   counted in `unmatched_returns` and otherwise ignored; a `Call` whose caller is not the top
//!   of the stack, or a `Return` for a frame below the top, resynchronises (see each type) and is
//!   counted in `resyncs`. Either sets the `approximate` flag, which callers may also set for
//!   every sampled run (gaps that happen to keep the stack consistent cannot be detected).
//!
//! The two analyses:
//! - [`CallTreeProfile`]: the call-tree profile of Ha et al. (CAB, OOPSLA 2009, §5.2, after the
//!   call-tree profiling of Ha, Rossbach, Davis, Roy and Witchel, 2007): for each function, how
//!   often each distinct depth-two subtree (the function plus the ordered list of its direct
//!   callees in one invocation) occurred.
//! - [`CallingContextTree`]: the calling context tree of Ammons, Ball and Larus, "Exploiting
//!   Hardware Performance Counters with Flow and Context Sensitive Profiling" (PLDI 1997): one
//!   node per distinct call path from the root, with the number of calls that reached it; the
//!   shape flame graphs want ([`CallingContextTree::folded`]).

mod context_tree;
mod subtree_profile;
pub(crate) mod tasks;
pub(crate) mod tracker;
pub(crate) mod trie;

pub use context_tree::{CallingContextTree, MAX_OPEN_MERGED};
pub use subtree_profile::{CallTreeProfile, MAX_CALLEES};

use cabprof_cab::event::{self, decode, EventKind, MethodId};

/// What a call-tree analysis does with the words it reads; every other word is skipped.
trait CallEvents {
    fn on_call(&mut self, caller: MethodId, callee: MethodId);
    fn on_return(&mut self, callee: MethodId);
    /// A `Call` directly followed by its callee's `Return` (or `TimedReturn`): a leaf
    /// invocation. Exactly `on_call` then `on_return`; an analysis overrides it to skip the
    /// frame it would push and pop at once.
    #[inline]
    fn on_leaf(&mut self, caller: MethodId, callee: MethodId) {
        self.on_call(caller, callee);
        self.on_return(callee);
    }
    fn on_thread(&mut self, id: u64);
    fn on_poll(&mut self, method: MethodId, task: u32, first: bool);
    fn on_poll_end(&mut self, task: u32, poll: u32, done: bool);
}

/// Both analyses at once: each word is decoded once and handed to both.
impl<P: CallEvents, T: CallEvents> CallEvents for (&mut P, &mut T) {
    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        self.0.on_call(caller, callee);
        self.1.on_call(caller, callee);
    }
    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        self.0.on_return(callee);
        self.1.on_return(callee);
    }
    #[inline]
    fn on_leaf(&mut self, caller: MethodId, callee: MethodId) {
        self.0.on_leaf(caller, callee);
        self.1.on_leaf(caller, callee);
    }
    fn on_thread(&mut self, id: u64) {
        self.0.on_thread(id);
        self.1.on_thread(id);
    }
    fn on_poll(&mut self, method: MethodId, task: u32, first: bool) {
        self.0.on_poll(method, task, first);
        self.1.on_poll(method, task, first);
    }
    fn on_poll_end(&mut self, task: u32, poll: u32, done: bool) {
        self.0.on_poll_end(task, poll, done);
        self.1.on_poll_end(task, poll, done);
    }
}

/// Decode `words` and dispatch the call-tree events to `a`. A `Call` whose next word in
/// `words` returns from it goes to `on_leaf` (at least half of all invocations in any call
/// tree are leaves); a pair cut by a chunk boundary goes through `on_call` and `on_return`,
/// which is the same (the chunk-boundary tests feed streams one word at a time).
#[inline]
fn feed(a: &mut impl CallEvents, words: &[u64]) {
    let mut rest = words;
    while let Some((&w, tail)) = rest.split_first() {
        rest = tail;
        match decode(w) {
            Some(EventKind::Call { caller, callee }) => {
                if let Some((&next, tail)) = rest.split_first() {
                    if returns_from(next) == Some(callee.get()) {
                        rest = tail;
                        a.on_leaf(caller, callee);
                        continue;
                    }
                }
                a.on_call(caller, callee)
            }
            Some(
                EventKind::Return { callee }
                | EventKind::TimedReturn { callee, .. }
                | EventKind::LongReturn { callee, .. },
            ) => a.on_return(callee),
            Some(EventKind::Thread { id }) => a.on_thread(id),
            Some(EventKind::Poll {
                method,
                task,
                first,
            }) => a.on_poll(method, task, first),
            Some(EventKind::PollEnd { task, poll, done }) => a.on_poll_end(task, poll, done),
            _ => {}
        }
    }
}

/// The callee id of a `Return`, `TimedReturn` or `LongReturn` word (the words `decode` takes
/// as one of them).
#[inline(always)]
fn returns_from(word: u64) -> Option<u32> {
    event::as_return(word)
        .or_else(|| event::as_timed_return(word).map(|(callee, _)| callee))
        .or_else(|| event::as_long_return(word).map(|(callee, _, _)| callee))
}

/// Feed `words` to both call-tree analyses in one pass (one decode per word): the same
/// results as `profile.consume(words)` then `tree.consume(words)`, cheaper when both run, as
/// the `CallTree` analysis of the `cabprof` facade does.
pub fn consume_both(profile: &mut CallTreeProfile, tree: &mut CallingContextTree, words: &[u64]) {
    feed(&mut (profile, tree), words);
}
