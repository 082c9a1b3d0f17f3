//! The one place the ring's atomics come from.
//!
//! Under `cfg(loom)` every atomic, fence and spin hint is loom's model-checked stand-in, so the
//! same ring source is exhaustively checked by `cargo test --features loom` style runs
//! (`RUSTFLAGS="--cfg loom" cargo test -p cabprof-cab --test loom --release`). Everywhere else
//! they are `core`'s.

#[cfg(loom)]
#[allow(unused_imports)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex};

#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex};

/// Give the other side a chance to run: a spin hint normally, a scheduler yield under loom
/// (loom must see every spin loop yield, or it explores it forever).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Back off harder than a spin: yield the core, and after many yields sleep briefly so a
/// stalled peer does not cost a whole core.
#[inline]
pub(crate) fn back_off(round: u32) {
    #[cfg(loom)]
    {
        let _ = round;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if round < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}
