//! Room on the stack for the runtime's one-off work.
//!
//! A thread's first instrumented call may start the process-wide session (`CABPROF=1`), attach
//! the thread to the running one (a ring, an analysis instance, a place with an analyzer) or
//! start a test profile. That work builds analyses by value and spawns threads: tens of KiB of
//! stack in a debug build. The call may come from a thread with a small stack (regex-syntax's
//! tests run one of 16 KiB), or deep in a recursion: so the work runs here only when the
//! calling thread has [`ROOM`] bytes of stack left, and otherwise on a short-lived helper
//! thread with a stack of its own, while the caller waits for it.

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

/// [`with_room`]'s helper thread, out of line and of one type whatever the work (`std`'s spawn
/// is generic, so its frames are as large as the types it is instantiated with, in a debug
/// build unoptimized): the calling thread has little stack left.
#[cold]
#[inline(never)]
fn off_stack(job: Box<dyn FnOnce() + Send>) -> Result<(), String> {
    let helper = std::thread::Builder::new()
        .name("cabprof-helper".into())
        .stack_size(HELPER_STACK)
        .spawn(move || {
            // Its allocations are the runtime's, not the program's.
            super::work::mark_runtime_thread();
            job();
        })
        .map_err(|e| format!("could not spawn a helper thread: {e}"))?;
    helper.join().map_err(|panic| panic_message(&*panic))
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
