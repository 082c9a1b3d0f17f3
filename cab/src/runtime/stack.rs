//! Room on the stack for the runtime's one-off work.
//!
//! A thread's first instrumented call may start the process-wide session (`CABPROF=1`), attach
//! the thread to the running one (a ring, an analysis instance, a place with an analyzer) or
//! start a test profile. That work builds analyses by value and spawns threads: tens of KiB of
//! stack in a debug build. The call may come from a thread with a small stack (regex-syntax's
//! tests run one of 16 KiB), or deep in a recursion: so the work runs here only when the
//! calling thread has [`ROOM`] bytes of stack left, and otherwise on a helper thread with a
//! stack of its own, while the caller waits for it. Up to [`IDLE_HELPERS`] helpers wait for
//! the next such work after theirs, so that a program starting many small-stacked threads
//! does not start a helper for each.

use parking_lot::Mutex;
use std::sync::Arc;

/// The stack the runtime's one-off work may use on the calling thread, with a wide margin:
/// done there, a first call that starts the process-wide session took 56 KiB in a debug
/// build (27 KiB in release), and a ring's analysis is whatever the session's factory makes.
pub const ROOM: usize = 256 * 1024;

/// The helper thread's stack: Rust's default for spawned threads, whatever `RUST_MIN_STACK`
/// says.
const HELPER_STACK: usize = 2 << 20;

/// Run `f` where there is stack for it: on the calling thread if it has [`ROOM`] bytes of stack
/// left (or its stack cannot be found), else on a new thread with a stack of its own, waiting
/// for it. A panic of `f` on the calling thread unwinds as usual; on the helper thread it is
/// returned as `Err` with its message, as is a helper that could not be spawned. A large `R`
/// is best boxed: a debug build copies it through every frame on the way back.
pub fn with_room<R, F>(f: F) -> Result<R, String>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    if stack_left().is_none_or(|left| left >= ROOM) {
        return Ok(here(f));
    }
    let out = Arc::new(Mutex::new(None));
    let put = out.clone();
    off_stack(Box::new(move || *put.lock() = Some(f())))?;
    let r = out.lock().take();
    r.ok_or_else(|| "the helper thread returned nothing".into())
}

/// `f()`, in a frame of its own: inlined, `f`'s frame would be part of its caller's even when
/// `f` runs on the helper thread.
#[inline(never)]
fn here<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Helper threads kept waiting for work after their job, at most this many: a program that
/// starts hundreds of small-stacked threads would otherwise start a helper for each.
const IDLE_HELPERS: usize = 8;

/// A job for a helper thread, and where to say it finished (`Err`: its panic's message).
type Job = (
    Box<dyn FnOnce() + Send>,
    std::sync::mpsc::SyncSender<Result<(), String>>,
);

/// The idle helpers, each waiting on its channel.
static IDLE: Mutex<Vec<std::sync::mpsc::SyncSender<Job>>> = Mutex::new(Vec::new());

/// The process whose helpers [`IDLE`] lists (0 until one is kept). A child of `fork` has a
/// copy of the list but not the threads, and a copy of its lock that a thread it does not
/// have may have held: there every job gets a helper of its own, and none is kept.
static OWNER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The idle helpers, locked, if this process may use them.
fn idle() -> Option<parking_lot::MutexGuard<'static, Vec<std::sync::mpsc::SyncSender<Job>>>> {
    use std::sync::atomic::Ordering::SeqCst;
    let me = std::process::id();
    // Recorded before the lock is first taken, so a child forked while a thread held it
    // finds its parent's id here.
    let owner = OWNER
        .compare_exchange(0, me, SeqCst, SeqCst)
        .unwrap_or_else(|o| o);
    (owner == me).then(|| IDLE.lock())
}

/// [`with_room`]'s helper thread, out of line and of one type whatever the work (`std`'s spawn
/// is generic, so its frames are as large as the types it is instantiated with, in a debug
/// build unoptimized): the calling thread has little stack left.
///
/// A job goes only to an idle helper, or to a new one: never behind another job, which could
/// be waiting for something the caller holds (a session starting).
#[cold]
#[inline(never)]
fn off_stack(job: Box<dyn FnOnce() + Send>) -> Result<(), String> {
    let (done, finished) = std::sync::mpsc::sync_channel(1);
    let idle = idle().and_then(|mut idle| idle.pop());
    let mut job = Some((job, done));
    if let Some(helper) = idle {
        // A helper in the list waits on its channel until given a job: the send fails only if
        // it is gone, and then the job comes back for a new helper.
        if let Err(std::sync::mpsc::SendError(j)) = helper.send(job.take().expect("not given")) {
            job = Some(j);
        }
    }
    if let Some(job) = job {
        std::thread::Builder::new()
            .name("cabprof-helper".into())
            .stack_size(HELPER_STACK)
            .spawn(move || {
                // Its allocations are the runtime's, not the program's.
                super::work::mark_runtime_thread();
                helper(job);
            })
            .map_err(|e| format!("could not spawn a helper thread: {e}"))?;
    }
    finished
        .recv()
        .unwrap_or_else(|_| Err("the helper thread ended without finishing".into()))
}

/// A helper thread: run the job, then wait for another while fewer than [`IDLE_HELPERS`] wait.
fn helper(mut job: Job) {
    loop {
        let (work, done) = job;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .map_err(|panic| panic_message(&*panic));
        let (next, jobs) = std::sync::mpsc::sync_channel(1);
        let kept = idle().is_some_and(|mut idle| {
            let keep = idle.len() < IDLE_HELPERS;
            if keep {
                idle.push(next);
            }
            keep
        });
        // Said after the helper is back in the list: a caller that starts its next job at once
        // finds it.
        let _ = done.send(result);
        if !kept {
            return;
        }
        match jobs.recv() {
            Ok(j) => job = j,
            Err(_) => return,
        }
    }
}

/// Bytes of stack below the caller's frame, `None` if the thread's stack cannot be found.
pub(super) fn stack_left() -> Option<usize> {
    let here = 0u8;
    let sp = std::hint::black_box(&here) as *const u8 as usize;
    Some(sp.saturating_sub(stack_low()?))
}

/// The lowest usable address of the calling thread's stack.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn stack_low() -> Option<usize> {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `pthread_getattr_np` fills `attr` with the calling thread's attributes, and only
    // on success (0) is it read and then destroyed, once; `pthread_attr_getstack` writes the
    // stack's lowest address and size into the two locals.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let mut addr = std::ptr::null_mut();
        let mut size = 0;
        let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        (rc == 0 && size > 0).then_some(addr as usize)
    }
}

/// Elsewhere the stack is not looked for: the work runs on the calling thread.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn stack_low() -> Option<usize> {
    None
}

/// The message of a caught panic (its `&str` or `String` payload).
pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_thread_has_little_left_and_a_default_one_has_room() {
        let left = |bytes| {
            std::thread::Builder::new()
                .stack_size(bytes)
                .spawn(stack_left)
                .unwrap()
                .join()
                .unwrap()
        };
        if cfg!(any(target_os = "linux", target_os = "android")) {
            assert!(left(16 * 1024).unwrap() < ROOM);
            assert!(left(HELPER_STACK).unwrap() >= ROOM);
        }
    }

    /// Twenty small threads' work, one after another, runs on helpers kept from the earlier
    /// ones: not a new helper each (other tests' work may take some of the kept ones).
    #[test]
    fn helpers_are_kept_for_the_next_work() {
        if !cfg!(any(target_os = "linux", target_os = "android")) {
            return;
        }
        let ids: std::collections::HashSet<_> = (0..20)
            .map(|_| {
                std::thread::Builder::new()
                    .stack_size(16 * 1024)
                    .spawn(|| with_room(|| std::thread::current().id()).unwrap())
                    .unwrap()
                    .join()
                    .unwrap()
            })
            .collect();
        assert!(
            ids.len() <= 1 + IDLE_HELPERS,
            "{} helpers for 20 jobs",
            ids.len()
        );
    }

    #[test]
    fn work_runs_on_a_helper_when_the_stack_is_small_and_its_panic_is_an_error() {
        let on_small_thread = |f: fn() -> Result<String, String>| {
            std::thread::Builder::new()
                .name("small".into())
                .stack_size(16 * 1024)
                .spawn(f)
                .unwrap()
                .join()
                .unwrap()
        };
        let name = || std::thread::current().name().unwrap_or("").to_owned();
        let ran_on = on_small_thread(|| {
            with_room(|| {
                std::thread::current()
                    .name()
                    .map(str::to_owned)
                    .unwrap_or_default()
            })
        });
        if cfg!(any(target_os = "linux", target_os = "android")) {
            assert_eq!(ran_on.unwrap(), "cabprof-helper");
            let err = on_small_thread(|| with_room(|| -> String { panic!("boom") }));
            assert_eq!(err.unwrap_err(), "boom");
        }
        assert_eq!(with_room(name).unwrap(), name());
    }
}
