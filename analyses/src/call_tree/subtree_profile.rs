//! The depth-two call-tree profile; see the parent module for the contract.

use std::hash::{Hash, Hasher};

use cab::event::{decode, EventKind, MethodId};
use hashbrown::{Equivalent, HashMap};

use crate::thread_stacks::ThreadStacks;
use crate::Analysis;

/// How often each function ran with each ordered list of direct callees.
///
/// Only invocations seen whole are recorded: from their `Call` to their `Return` with no
/// resynchronisation in between. A resynchronisation means events were lost, so every frame it
/// touches is closed without being recorded: the frames it pops (they lost their `Return`), and
/// the frame it leaves on top (its callee list may miss calls). A frame that was already open
/// when the stream started (made for the caller of a `Call` with no open frame) is not recorded
/// either. Frames still open when
/// the stream ends are not recorded either ([`open_frames`](Self::open_frames) counts them).
///
/// A pattern's key holds the invocation's whole callee list, so an invocation that makes many
/// calls costs memory in proportion; each list is stored once however often it recurs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallTreeProfile {
    /// Count per distinct (function, ordered callee list).
    subtrees: HashMap<Subtree, u64>,
    threads: ThreadStacks<OpenCalls>,
    approximate: bool,
    resyncs: u64,
    unmatched_returns: u64,
}

/// One thread's open invocations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct OpenCalls {
    /// Innermost last.
    frames: Vec<Frame>,
    /// The callee lists of all open frames, back to back: frame `i`'s list is
    /// `callees[frames[i].start..frames[i + 1].start - 1]` (the slot before a frame's start holds
    /// its own entry in its parent's list), and the innermost frame's runs to the end. Stack
    /// discipline keeps every open frame's list contiguous.
    callees: Vec<MethodId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    method: MethodId,
    /// Where this frame's callee list starts in [`OpenCalls::callees`]; `<= callees.len()`.
    start: usize,
    /// `false` if part of this invocation may be missing (opened before the stream started,
    /// or passed through by a resynchronisation): it will not be recorded.
    complete: bool,
}

impl OpenCalls {
    /// Drop frames `n..` (they lost their `Return`s) and their callee lists.
    fn truncate(&mut self, n: usize) {
        if let Some(f) = self.frames.get(n) {
            self.callees.truncate(f.start);
            self.frames.truncate(n);
        }
    }
}

/// A stored pattern: `method` and the ordered methods it called directly.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Subtree {
    method: MethodId,
    callees: Box<[MethodId]>,
}

/// A pattern looked up without allocating; hashes exactly as [`Subtree`] does.
struct SubtreeRef<'a> {
    method: MethodId,
    callees: &'a [MethodId],
}

impl Hash for Subtree {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.method.hash(h);
        (*self.callees).hash(h);
    }
}

impl Hash for SubtreeRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.method.hash(h);
        self.callees.hash(h);
    }
}

impl Equivalent<Subtree> for SubtreeRef<'_> {
    fn equivalent(&self, key: &Subtree) -> bool {
        self.method == key.method && *self.callees == *key.callees
    }
}

impl From<&SubtreeRef<'_>> for Subtree {
    fn from(r: &SubtreeRef<'_>) -> Subtree {
        Subtree {
            method: r.method,
            callees: r.callees.into(),
        }
    }
}

impl CallTreeProfile {
    /// An empty profile.
    pub fn new() -> CallTreeProfile {
        CallTreeProfile::default()
    }

    /// How many recorded invocations of `method` called exactly `callees`, in that order.
    pub fn count(&self, method: MethodId, callees: &[MethodId]) -> u64 {
        self.subtrees
            .get(&SubtreeRef { method, callees })
            .copied()
            .unwrap_or(0)
    }

    /// Every pattern `(function, callees, count)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (MethodId, &[MethodId], u64)> + '_ {
        self.subtrees
            .iter()
            .map(|(s, &c)| (s.method, &*s.callees, c))
    }

    /// The patterns of `method`, most frequent first (ties in callee-list order).
    pub fn patterns_of(&self, method: MethodId) -> Vec<(&[MethodId], u64)> {
        let mut out: Vec<(&[MethodId], u64)> = self
            .iter()
            .filter(|&(m, _, _)| m == method)
            .map(|(_, callees, c)| (callees, c))
            .collect();
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        out
    }

    /// Every pattern sorted by `(function, callees)`; handy for reports and comparisons.
    pub fn sorted(&self) -> Vec<(MethodId, Vec<MethodId>, u64)> {
        let mut out: Vec<_> = self.iter().map(|(m, cs, c)| (m, cs.to_vec(), c)).collect();
        out.sort_unstable();
        out
    }

    /// Number of distinct patterns.
    pub fn len(&self) -> usize {
        self.subtrees.len()
    }

    /// `true` if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.subtrees.is_empty()
    }

    /// Recorded invocations (the sum of all pattern counts).
    pub fn total(&self) -> u64 {
        self.subtrees.values().sum()
    }

    /// Invocations of the current thread still open (their `Return` not seen yet).
    pub fn open_frames(&self) -> usize {
        self.threads.current.frames.len()
    }

    /// `true` if the profile may differ from the exact one: set by a resynchronisation or an
    /// unmatched `Return`, or by [`set_approximate`](Self::set_approximate).
    pub fn is_approximate(&self) -> bool {
        self.approximate
    }

    /// Mark the profile approximate (for sampled runs) or not.
    pub fn set_approximate(&mut self, approximate: bool) {
        self.approximate = approximate;
    }

    /// `Call`s whose caller was not the innermost open frame, and `Return`s that closed frames
    /// above their own.
    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    /// `Return`s that matched no open frame and were ignored.
    pub fn unmatched_returns(&self) -> u64 {
        self.unmatched_returns
    }

    #[inline]
    fn on_call(&mut self, caller: MethodId, callee: MethodId) {
        let top = self.threads.current.frames.last().map(|f| f.method);
        if top.unwrap_or(MethodId::ROOT) != caller {
            self.resync_call(caller);
        }
        let open = &mut self.threads.current;
        if !open.frames.is_empty() {
            open.callees.push(callee);
        }
        open.frames.push(Frame {
            method: callee,
            start: open.callees.len(),
            complete: true,
        });
    }

    /// `caller` is not on top: continue from its innermost open frame, or from the root, or
    /// (when it has no open frame) from a new, incomplete frame for it at the bottom.
    #[cold]
    fn resync_call(&mut self, caller: MethodId) {
        self.approximate = true;
        self.resyncs += 1;
        let open = &mut self.threads.current;
        match open.frames.iter().rposition(|f| f.method == caller) {
            Some(i) => {
                open.truncate(i + 1);
                open.frames[i].complete = false;
            }
            None => {
                open.truncate(0);
                if caller != MethodId::ROOT {
                    open.frames.push(Frame {
                        method: caller,
                        start: open.callees.len(),
                        complete: false,
                    });
                }
            }
        }
    }

    #[inline]
    fn on_return(&mut self, callee: MethodId) {
        let open = &mut self.threads.current;
        match open.frames.last() {
            Some(&f) if f.method == callee => {
                open.frames.pop();
                if f.complete {
                    let key = SubtreeRef {
                        method: callee,
                        callees: &open.callees[f.start..],
                    };
                    *self.subtrees.entry_ref(&key).or_insert(0) += 1;
                }
                open.callees.truncate(f.start);
            }
            _ => self.resync_return(callee),
        }
    }

    /// `callee` is not on top: close its innermost open frame and everything above it
    /// unrecorded, or ignore the `Return` if it has none.
    #[cold]
    fn resync_return(&mut self, callee: MethodId) {
        self.approximate = true;
        let open = &mut self.threads.current;
        match open.frames.iter().rposition(|f| f.method == callee) {
            Some(i) => {
                open.truncate(i);
                if let Some(f) = open.frames.last_mut() {
                    f.complete = false;
                }
                self.resyncs += 1;
            }
            None => self.unmatched_returns += 1,
        }
    }
}

impl Analysis for CallTreeProfile {
    fn consume(&mut self, words: &[u64]) {
        for &w in words {
            match decode(w) {
                Some(EventKind::Call { caller, callee }) => self.on_call(caller, callee),
                Some(EventKind::Return { callee }) => self.on_return(callee),
                Some(EventKind::Thread { id }) => {
                    self.threads.switch_to(id);
                }
                _ => {}
            }
        }
    }

    fn merge(&mut self, other: CallTreeProfile) {
        for (s, c) in other.subtrees {
            *self.subtrees.entry(s).or_insert(0) += c;
        }
        self.approximate |= other.approximate;
        self.resyncs += other.resyncs;
        self.unmatched_returns += other.unmatched_returns;
    }
}
