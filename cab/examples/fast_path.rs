//! The producer's fast path, isolated so its machine code can be read:
//!
//! ```text
//! cargo build --release -p cabprof-cab --example fast_path
//! objdump -d --no-show-raw-insn target/release/examples/fast_path | awk '/<cab_push_exhaustive>:/,/^$/'
//! ```
//!
//! `cab_emit` is the runtime's entry point, [`cabprof_cab::runtime::emit`], compiled as instrumented
//! code sees it: the CAB exhaustive and sampling pushes must appear inlined in it (no call to
//! a `push` function), the other designs behind one indirect call:
//!
//! ```text
//! objdump -d --no-show-raw-insn target/release/examples/fast_path | awk '/<cab_emit>:/,/^$/'
//! ```
//!
//! Running it pushes a few million events through a ring, and through `emit` in a session,
//! and prints how many arrived.

use cabprof_cab::event::{Event, MethodId};
use cabprof_cab::ring::{self, Producer};
use cabprof_cab::runtime::{EventAnalysis, RuntimeConfig, Session};
use cabprof_cab::{Mode, Poll, RingConfig};

/// One exhaustive push, not inlined, so its code stands alone in the binary.
#[no_mangle]
#[inline(never)]
pub fn cab_push_exhaustive(p: &mut Producer, e: Event) {
    p.push(e);
}

/// One sampling push, not inlined.
#[no_mangle]
#[inline(never)]
pub fn cab_push_sampling(p: &mut Producer<true>, e: Event) {
    p.push(e);
}

/// The runtime's `emit`, not inlined, so its code stands alone in the binary.
#[no_mangle]
#[inline(never)]
pub fn cab_emit(e: Event) {
    cabprof_cab::runtime::emit(e);
}

fn main() {
    let cfg = RingConfig::new(1 << 20, 64 << 10);
    let (mut tx, mut rx) = ring::channel(&cfg).unwrap();
    let n = 4_000_000u64;
    let consumer = std::thread::spawn(move || {
        let mut got = 0u64;
        while rx.poll_with(|w| got += w.len() as u64) != Poll::Closed {}
        got
    });
    for i in 0..n {
        let callee = MethodId::new((i % 1000) as u32 + 1).unwrap();
        cab_push_exhaustive(&mut tx, Event::call(MethodId::ROOT, callee));
    }
    tx.close();
    println!(
        "exhaustive: pushed {n}, consumer received {}",
        consumer.join().unwrap()
    );

    let (mut tx, _rx) = ring::sampling_channel(&cfg.with_mode(Mode::sampling(0.1))).unwrap();
    for _ in 0..n {
        cab_push_sampling(&mut tx, Event::marker(1).unwrap());
    }
    println!(
        "sampling: pushed {} with no consumer, never blocked",
        tx.stats().pushed
    );
    // The runtime's entry point, with a session running (any `CABPROF_*` settings apply, so
    // `CABPROF_BUFFER_DESIGN=fastforward` sends the events through the erased push).
    let mut config = RuntimeConfig {
        pin: false,
        ..RuntimeConfig::default()
    };
    config.from_env().expect("valid CABPROF_* settings");
    let session = Session::start(config, Count::default).expect("start a session");
    for _ in 0..n {
        cab_emit(Event::marker(1).unwrap());
    }
    println!("emit: {n} events, analyzed {}", session.finish().analysis.0);
}

/// Counts the events it is given.
#[derive(Default)]
struct Count(u64);

impl EventAnalysis for Count {
    fn consume(&mut self, words: &[u64]) {
        self.0 += words.len() as u64;
    }
    fn merge(&mut self, other: Self) {
        self.0 += other.0;
    }
}
