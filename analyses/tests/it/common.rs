//! Helpers shared by the tests: event words by hand, chunked consumption, random traces.
#![allow(dead_code)]

use cabprof_analyses::EventAnalysis;
use cabprof_cab::event::{Event, MethodId};

pub(crate) fn m(id: u32) -> MethodId {
    MethodId::new(id).unwrap()
}

pub(crate) fn call(caller: u32, callee: u32) -> u64 {
    Event::call(m(caller), m(callee)).word()
}

pub(crate) fn ret(callee: u32) -> u64 {
    Event::ret(m(callee)).word()
}

pub(crate) fn path(method: u32, p: u32) -> u64 {
    Event::path(m(method), p).unwrap().word()
}

pub(crate) fn load(addr: u64, size: u32) -> u64 {
    Event::mem(addr, size, false).unwrap().word()
}

pub(crate) fn store(addr: u64, size: u32) -> u64 {
    Event::mem(addr, size, true).unwrap().word()
}

pub(crate) fn thread(id: u64) -> u64 {
    Event::thread(id).unwrap().word()
}

pub(crate) fn marker(value: u64) -> u64 {
    Event::marker(value).unwrap().word()
}

/// Feed `words` to `a` cut at `cuts` (positions taken modulo `words.len() + 1`, any order).
pub(crate) fn consume_in_chunks<A: EventAnalysis>(a: &mut A, words: &[u64], cuts: &[usize]) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (words.len() + 1)).collect();
    cuts.push(0);
    cuts.push(words.len());
    cuts.sort_unstable();
    for w in cuts.windows(2) {
        a.consume(&words[w[0]..w[1]]);
    }
}

/// A balanced, well-formed single-thread trace driven by `actions`: each byte either calls one
/// of methods `1..=methods` from the current method, returns, or emits a `Path` or `Mem` word.
/// Every frame is closed at the end, and every `Call` names the true caller.
pub(crate) fn balanced_trace(actions: &[u8], methods: u32) -> Vec<u64> {
    let mut words = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    for &a in actions {
        let top = stack.last().copied().unwrap_or(0);
        match a % 8 {
            0..=2 => {
                let callee = 1 + (a as u32 / 8) % methods;
                words.push(call(top, callee));
                stack.push(callee);
            }
            3..=4 => {
                if let Some(f) = stack.pop() {
                    words.push(ret(f));
                }
            }
            5 => {
                if top != 0 {
                    words.push(path(top, a as u32 / 8 % 4));
                }
            }
            _ => {
                let addr = (a as u64 * 40) % 2048;
                words.push(if a % 2 == 0 {
                    load(addr, 8)
                } else {
                    store(addr, 4)
                });
            }
        }
    }
    while let Some(f) = stack.pop() {
        words.push(ret(f));
    }
    words
}

/// Arbitrary words: events of every kind over small id and address ranges (so they collide),
/// and raw `u64`s, which may or may not decode.
pub(crate) fn arbitrary_words() -> impl proptest::strategy::Strategy<Value = Vec<u64>> {
    use proptest::prelude::*;
    let word = prop_oneof![
        4 => (0u32..6, 1u32..6).prop_map(|(a, b)| call(a, b)),
        4 => (1u32..6).prop_map(ret),
        2 => (1u32..6, 0u32..8).prop_map(|(a, p)| path(a, p)),
        6 => (0u64..8192, 0u32..8, any::<bool>())
            .prop_map(|(addr, log, st)| {
                if st { store(addr, 1 << log) } else { load(addr, 1 << log) }
            }),
        1 => (0u64..3).prop_map(thread),
        1 => (0u64..100).prop_map(marker),
        1 => any::<u64>(),
    ];
    proptest::collection::vec(word, 0..400)
}
