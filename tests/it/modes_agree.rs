//! Every analysis gives bit-identical results in sequential and concurrent exhaustive mode, on
//! the same deterministic multi-threaded workload, whatever the buffer and chunk sizes —
//! including tiny rings where the producer blocks constantly (blocking must not change what is
//! measured). Events are emitted directly, as instrumentation would.

use cabprof::{Analysis, RunMode, Session, SessionBuilder};
use cabprof_cab::runtime::emit;
use cabprof_cab::{Event, MethodId};

use crate::support::SERIAL;

fn m(id: u32) -> MethodId {
    MethodId::new(id).unwrap()
}

/// A deterministic call tree with paths and memory accesses: `work(depth)` calls itself twice
/// and a leaf, choosing paths and touching addresses from a per-thread LCG.
fn work(depth: u32, caller: MethodId, seed: &mut u64, base: u64) {
    let me = m(10 + depth);
    emit(Event::call(caller, me));
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let path = (*seed >> 60) as u32 % 5;
    emit(Event::path(me, path).unwrap());
    // Synthetic addresses (real ones differ from run to run): 64 KB per thread, some
    // straddling a line.
    let offset = (*seed >> 20) % 65_536;
    emit(Event::mem(base + offset, 8, path.is_multiple_of(2)).unwrap());
    if depth > 0 {
        work(depth - 1, me, seed, base);
        work(depth - 1, me, seed, base);
    } else {
        emit(Event::call(me, m(99)));
        emit(Event::ret(m(99)));
    }
    emit(Event::ret(me));
}

fn run(builder: SessionBuilder) -> cabprof::ReportData {
    let session = builder.all_analyses().pin(false).start().unwrap();
    let handles: Vec<_> = (0..3u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut seed = 12345 + t;
                for _ in 0..40 {
                    work(7, MethodId::ROOT, &mut seed, 0x100_0000 * (t + 1));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    session.finish().data
}

#[test]
fn sequential_and_concurrent_exhaustive_agree_bit_for_bit() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let reference = run(Session::builder().mode(RunMode::Sequential));
    assert!(reference.method_count.as_ref().unwrap().len() > 5);
    assert!(reference.call_tree.as_ref().unwrap().contexts.len() > 8);
    assert!(reference.paths.as_ref().unwrap().len() > 5);
    let want = reference.results_json();
    for (buffer, chunk) in [
        (256, 64),
        (4 << 10, 1 << 10),
        (64 << 10, 4 << 10),
        (2 << 20, 128 << 10),
    ] {
        let got = run(Session::builder()
            .mode(RunMode::Exhaustive)
            .buffer_bytes(buffer)
            .chunk_bytes(chunk));
        assert_eq!(got.totals.dropped, 0);
        if buffer == 256 {
            assert!(got.totals.producer_blocks > 0, "a 32-event ring must block");
        }
        assert!(
            got.results_json() == want,
            "results differ at buffer {buffer}, chunk {chunk}"
        );
    }
    let _ = Analysis::ALL;
}
