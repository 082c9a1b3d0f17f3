//! Paths: the Ball-Larus path register of `#[profile(paths)]`.
//!
//! With `paths`, a [`PathGuard`] also carries the Ball-Larus path register: the generated code
//! only adds constants to it on branch edges ([`branch`], [`try_branch`], [`PathGuard::add`]),
//! and at loop back edges (and split points) [`PathGuard::back_edge`] emits the path and
//! restarts the register. On exit the guard emits the final path, then the `Return`. If the
//! function unwinds, the path emitted is `num_paths + register`, which decodes as "cut short by
//! a panic".

use super::frames::{enter_recorded, leave_inner, Entry};
use super::timing::UNTIMED;
use super::{contained, method, recording, Site};
use cabprof_cab::event::{Event, MAX_PATH_NUMBER};
use cabprof_cab::runtime::{emit, session_key};
use std::ops::ControlFlow;
use std::task::Poll;

/// A frame with a Ball-Larus path register. `CALLS`: also emit `Call`/`Return` (false inside an
/// `async fn`, whose frame is the [`Instrumented`](super::Instrumented) future).
#[must_use]
#[derive(Debug)]
pub struct PathGuard<const CALLS: bool> {
    /// This function's id, or 0 if no session ran at entry (then nothing is emitted).
    method: u32,
    /// The frame that was innermost at entry, restored on drop (`CALLS` only).
    caller: u32,
    /// The path register: the sum of the edge values taken since the path began. Below
    /// `unwound` for exact numberings; wrapping for [`PathMode::Hashed`](super::PathMode::Hashed) ones, whose sums may
    /// exceed 64 bits.
    register: u64,
    /// `num_paths` of the numbering: added to the register of a path cut short by a panic.
    unwound: u64,
    /// The numbering is [`PathMode::Hashed`](super::PathMode::Hashed): emit a hash of the register.
    hashed: bool,
    /// The clock at entry if this call is timed (`CALLS` only), else [`UNTIMED`].
    start: u64,
}

/// Enter the function of `site`, instrumented with `paths`.
#[inline(always)]
pub fn enter_paths(site: &'static Site, num_paths: u64, hashed: bool) -> PathGuard<true> {
    let key = session_key();
    let e = if key == 0 {
        Entry::IDLE
    } else {
        enter_recorded::<false>(site, key)
    };
    PathGuard {
        method: e.callee(),
        caller: e.caller(),
        register: 0,
        unwound: num_paths,
        hashed,
        start: e.start,
    }
}

/// The path register of an `async fn` body (its frame is the
/// [`Instrumented`](super::Instrumented) future).
#[inline(always)]
pub fn async_paths(site: &'static Site, num_paths: u64, hashed: bool) -> PathGuard<false> {
    PathGuard {
        method: if recording(site) { site.id() } else { 0 },
        caller: 0,
        register: 0,
        unwound: num_paths,
        hashed,
        start: UNTIMED,
    }
}

/// 30 bits of a 64-bit register, for [`PathMode::Hashed`](super::PathMode::Hashed) (Fibonacci hashing: the top bits of
/// a multiply by 2^64 / φ).
#[inline(always)]
fn hash_path(r: u64) -> u32 {
    (r.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 34) as u32
}

impl<const CALLS: bool> PathGuard<CALLS> {
    /// Take an edge of value `value`.
    #[inline(always)]
    pub fn add(&mut self, value: u64) {
        self.register = self.register.wrapping_add(value);
    }

    /// A back edge (or split point): the running path ends with an edge of value `end`, and
    /// a new one starts with the value `restart` of its entry edge.
    #[inline(always)]
    pub fn back_edge(&mut self, end: u64, restart: u64) {
        if self.method != 0 {
            emit_path(self.method, self.register.wrapping_add(end), self.hashed);
        }
        self.register = restart;
    }
}

/// The `Path` event of path `path` (a register value) of `method_id`.
#[inline(always)]
fn emit_path(method_id: u32, path: u64, hashed: bool) {
    let number = if hashed {
        hash_path(path)
    } else {
        debug_assert!(
            path <= MAX_PATH_NUMBER as u64,
            "path number {path} too large"
        );
        path as u32
    };
    if let Ok(e) = Event::path(method(method_id), number & MAX_PATH_NUMBER) {
        emit(e);
    }
}

/// Exit of a [`PathGuard`]: the last path (marked if unwinding), then the `Return` if `calls`.
/// Cannot unwind, as the frames' `leave`.
#[inline(never)]
#[allow(improper_ctypes_definitions)] // Called from Rust only; the ABI is for `nounwind`.
extern "C" fn exit_paths<const CALLS: bool>(guard: &PathGuard<CALLS>) {
    let (method_id, caller, hashed) = (guard.method, guard.caller, guard.hashed);
    // Contained apart, so that the frame is popped and closed even if the path's word fails.
    contained(
        || {
            let mut path = guard.register;
            if !hashed && std::thread::panicking() {
                path = path.wrapping_add(guard.unwound);
            }
            emit_path(method_id, path, hashed);
        },
        (),
    );
    if CALLS {
        contained(|| leave_inner(method_id, caller, guard.start, emit), ());
    }
}

impl<const CALLS: bool> Drop for PathGuard<CALLS> {
    #[inline(always)]
    fn drop(&mut self) {
        // Out of line for the same reason as `leave`.
        if self.method != 0 {
            exit_paths(self);
        }
    }
}

/// A boolean decision: add `if_true` or `if_false` to the register, return `cond`. The
/// condition comes first so that it is evaluated before the guard is borrowed.
#[inline(always)]
pub fn branch<const CALLS: bool>(
    cond: bool,
    guard: &mut PathGuard<CALLS>,
    if_true: u64,
    if_false: u64,
) -> bool {
    guard.add(if cond { if_true } else { if_false });
    cond
}

/// The decision of `value?`: add `if_error` when `?` will return early, else `if_ok`.
#[inline(always)]
pub fn try_branch<T: TryBranch, const CALLS: bool>(
    value: T,
    guard: &mut PathGuard<CALLS>,
    if_ok: u64,
    if_error: u64,
) -> T {
    guard.add(if value.is_residual() { if_error } else { if_ok });
    value
}

/// Types `?` applies to on stable Rust: whether `?` returns early on this value.
pub trait TryBranch {
    /// `?` would return early.
    fn is_residual(&self) -> bool;
}

impl<T, E> TryBranch for Result<T, E> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        self.is_err()
    }
}

impl<T> TryBranch for Option<T> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        self.is_none()
    }
}

impl<B, C> TryBranch for ControlFlow<B, C> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        self.is_break()
    }
}

impl<T, E> TryBranch for Poll<Result<T, E>> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        matches!(self, Poll::Ready(Err(_)))
    }
}

impl<T, E> TryBranch for Poll<Option<Result<T, E>>> {
    #[inline(always)]
    fn is_residual(&self) -> bool {
        matches!(self, Poll::Ready(Some(Err(_))))
    }
}
