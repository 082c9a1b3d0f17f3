//! The allocation analysis on hand-built streams: counts by context, self and inclusive counts
//! by function (recursion counted once), chunking, and merging streams of threads that free
//! each other's blocks.

use cabprof_analyses::{AllocCounts, Allocations, EventAnalysis};
use cabprof_cab::event::{Event, MethodId};

fn m(id: u32) -> MethodId {
    MethodId::new(id).unwrap()
}

fn words(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.word()).collect()
}

fn counts(allocs: u64, bytes: u64, reallocs: u64, frees: u64, freed_bytes: u64) -> AllocCounts {
    AllocCounts {
        allocs,
        bytes,
        reallocs,
        frees,
        freed_bytes,
    }
}

/// root: alloc 8; main { alloc 100; work { realloc 32→64; work { alloc 16 } }; free 100 }
fn stream() -> Vec<u64> {
    let (main, work) = (m(1), m(2));
    words(&[
        Event::alloc(8),
        Event::call(MethodId::ROOT, main),
        Event::alloc(100),
        Event::call(main, work),
        Event::realloc(32, 64).unwrap(),
        Event::call(work, work),
        Event::alloc(16),
        Event::ret(work),
        Event::ret(work),
        Event::dealloc(100),
        Event::ret(main),
    ])
}

#[test]
fn contexts_and_functions_get_exact_self_and_inclusive_counts_at_any_chunking() {
    let w = stream();
    for chunk in 1..=w.len() {
        let mut a = Allocations::new();
        for c in w.chunks(chunk) {
            a.consume(c);
        }
        assert!(!a.is_approximate());
        assert_eq!(a.totals(), counts(3, 8 + 100 + 32 + 16, 1, 1, 100));
        assert_eq!(a.context(&[]), Some(counts(1, 8, 0, 0, 0)));
        assert_eq!(a.context(&[m(1)]), Some(counts(1, 100, 0, 1, 100)));
        assert_eq!(a.context(&[m(1), m(2)]), Some(counts(0, 32, 1, 0, 0)));
        assert_eq!(a.context(&[m(1), m(2), m(2)]), Some(counts(1, 16, 0, 0, 0)));
        let f = a.by_function();
        let get = |id: u32| *f.iter().find(|f| f.method == m(id)).unwrap();
        assert_eq!(get(0).self_, counts(1, 8, 0, 0, 0));
        assert_eq!(get(0).inclusive, a.totals());
        assert_eq!(get(1).inclusive, counts(2, 148, 1, 1, 100));
        // work recursed: the inner allocation counts once in its inclusive counts.
        assert_eq!(get(2).self_, counts(1, 48, 1, 0, 0));
        assert_eq!(get(2).inclusive, counts(1, 48, 1, 0, 0));
        assert_eq!(a.contexts().len(), 4);
    }
}

#[test]
fn a_block_freed_by_another_thread_balances_after_merging() {
    let (producer, consumer) = (m(1), m(2));
    let mut a = Allocations::new();
    a.consume(&words(&[
        Event::call(MethodId::ROOT, producer),
        Event::alloc(4096),
        Event::ret(producer),
    ]));
    let mut b = Allocations::new();
    b.consume(&words(&[
        Event::call(MethodId::ROOT, consumer),
        Event::dealloc(4096),
        Event::ret(consumer),
    ]));
    a.merge(b);
    let t = a.totals();
    assert_eq!((t.allocs, t.frees, t.net_bytes()), (1, 1, 0));
    assert_eq!(a.context(&[producer]).unwrap().bytes, 4096);
    assert_eq!(a.context(&[consumer]).unwrap().freed_bytes, 4096);
}

#[test]
fn polls_charge_the_future_context_and_a_lost_call_marks_the_result_approximate() {
    let (outer, fut, leaf) = (m(1), m(2), m(3));
    let mut a = Allocations::new();
    a.consume(&words(&[
        Event::call(MethodId::ROOT, outer),
        Event::call(outer, fut),
        Event::poll(fut, 7, true),
        Event::alloc(10),
        Event::poll_end(7, 0, false),
        Event::alloc(1), // back in outer
        Event::poll(fut, 7, false),
        Event::call(fut, leaf),
        Event::alloc(20),
        Event::ret(leaf),
        Event::ret(fut),
        Event::poll_end(7, 1, true),
        Event::ret(outer),
    ]));
    assert!(!a.is_approximate());
    assert_eq!(a.context(&[outer, fut]).unwrap().bytes, 10);
    assert_eq!(a.context(&[outer]).unwrap().bytes, 1);
    assert_eq!(a.context(&[outer, fut, leaf]).unwrap().bytes, 20);

    // A stream that starts inside a call.
    let mut b = Allocations::new();
    b.consume(&words(&[Event::call(outer, leaf), Event::alloc(5)]));
    assert!(b.is_approximate());
    assert_eq!(b.context(&[outer, leaf]).unwrap().bytes, 5);
}

/// Mutual recursion a → b → a → b allocating 1, 2, 4 and 8 bytes: each allocation counts once
/// in each function's inclusive counts, however often the function recurs above it; the
/// context nodes are the contexts' stacks, linked.
#[test]
fn mutual_recursion_counts_once_and_nodes_link_the_contexts() {
    let (fa, fb) = (m(1), m(2));
    let mut a = Allocations::new();
    a.consume(&words(&[
        Event::call(MethodId::ROOT, fa),
        Event::alloc(1),
        Event::call(fa, fb),
        Event::alloc(2),
        Event::call(fb, fa),
        Event::alloc(4),
        Event::call(fa, fb),
        Event::alloc(8),
        Event::ret(fb),
        Event::ret(fa),
        Event::ret(fb),
        Event::ret(fa),
    ]));
    let f = a.by_function();
    let get = |id: u32| *f.iter().find(|f| f.method.get() == id).unwrap();
    assert_eq!(get(1).self_.bytes, 5);
    assert_eq!(get(1).inclusive.bytes, 15);
    assert_eq!(get(2).self_.bytes, 10);
    assert_eq!(get(2).inclusive.bytes, 14);
    // The root: nothing of its own, everything inclusive.
    assert!(get(0).self_.is_empty());
    assert_eq!(get(0).inclusive, a.totals());
    assert!(a.root().is_empty());

    let nodes = a.context_nodes();
    let mut stacks: Vec<(Vec<MethodId>, AllocCounts)> = Vec::new();
    for (k, n) in nodes.iter().enumerate() {
        assert_eq!(n.node as usize, k + 1);
        let mut stack = if n.parent == 0 {
            Vec::new()
        } else {
            assert!(n.parent < n.node, "parents come first");
            stacks[n.parent as usize - 1].0.clone()
        };
        stack.push(n.method);
        assert_eq!(n.calls, 1);
        stacks.push((stack, n.counts));
    }
    let copied: Vec<_> = a
        .contexts()
        .into_iter()
        .map(|c| (c.stack, c.counts))
        .collect();
    stacks.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(stacks, copied);
}

/// A future called by `outer` and polled first on one thread, then to the end on another, each
/// thread in its own instance: after merging (in either order), what its later poll
/// allocated, itself and in a callee, is under outer → fut, and in outer's inclusive counts.
#[test]
fn a_future_that_moved_threads_is_grafted_under_its_first_poll() {
    let (outer, fut, leaf) = (m(1), m(2), m(3));
    let first = words(&[
        Event::call(MethodId::ROOT, outer),
        Event::call(outer, fut),
        Event::poll(fut, 7, true),
        Event::alloc(10),
        Event::poll_end(7, 0, false),
        Event::ret(outer),
    ]);
    let later = words(&[
        Event::poll(fut, 7, false),
        Event::alloc(20),
        Event::call(fut, leaf),
        Event::alloc(40),
        Event::ret(leaf),
        Event::ret(fut),
        Event::poll_end(7, 1, true),
    ]);
    for first_is_self in [true, false] {
        let mut a = Allocations::new();
        a.consume(&first);
        let mut b = Allocations::new();
        b.consume(&later);
        let p = if first_is_self {
            a.merge(b);
            a
        } else {
            b.merge(a);
            b
        };
        assert_eq!(p.context(&[outer, fut]), Some(counts(2, 30, 0, 0, 0)));
        assert_eq!(p.context(&[outer, fut, leaf]), Some(counts(1, 40, 0, 0, 0)));
        assert_eq!(p.context(&[fut]), None);
        assert_eq!(p.context_nodes().len(), 3);
        let f = p.by_function();
        let of = |id| f.iter().find(|f| f.method == id).unwrap();
        assert_eq!(of(outer).inclusive, counts(3, 70, 0, 0, 0));
        assert_eq!(of(fut).self_, counts(2, 30, 0, 0, 0));
        assert_eq!(of(fut).inclusive, counts(3, 70, 0, 0, 0));
        assert_eq!(p.totals(), counts(3, 70, 0, 0, 0));
        assert_eq!(p.pending_tasks(), 0);
        assert!(!p.is_approximate());
    }
}

/// A future `b` first polled inside a later poll of another future `a` (so, in that stream,
/// below `a`'s detached node), then polled on two more threads; `a`'s first poll on a fourth.
/// Merged in any order and grouping, what `b` allocated is under root → a → b: a detached
/// copy of `b` is grafted onto where its first poll was, never the other way round.
#[test]
fn a_future_first_polled_inside_a_moved_future_is_grafted_in_any_merge_order() {
    let (a, b) = (m(1), m(2));
    let streams = [
        // a's first poll.
        words(&[
            Event::call(MethodId::ROOT, a),
            Event::poll(a, 1, true),
            Event::alloc(1),
            Event::poll_end(1, 0, false),
        ]),
        // a's last poll, in which b is called and first polled.
        words(&[
            Event::poll(a, 1, false),
            Event::call(a, b),
            Event::poll(b, 2, true),
            Event::alloc(5),
            Event::poll_end(2, 0, false),
            Event::ret(a),
            Event::poll_end(1, 1, true),
        ]),
        // b's second poll.
        words(&[
            Event::poll(b, 2, false),
            Event::alloc(7),
            Event::poll_end(2, 1, false),
        ]),
        // b's last poll.
        words(&[
            Event::poll(b, 2, false),
            Event::alloc(9),
            Event::ret(b),
            Event::poll_end(2, 2, true),
        ]),
    ];
    let one = |i: usize| {
        let mut x = Allocations::new();
        x.consume(&streams[i]);
        x
    };
    let mut orders = Vec::new();
    for p in 0..4 {
        for q in 0..4 {
            for r in 0..4 {
                for s in 0..4 {
                    let v = [p, q, r, s];
                    if (0..4).all(|i| v.contains(&i)) {
                        orders.push(v);
                    }
                }
            }
        }
    }
    for [p, q, r, s] in orders {
        // ((p + q) + (r + s)) and (((p + q) + r) + s).
        let mut left = one(p);
        left.merge(one(q));
        let mut right = one(r);
        right.merge(one(s));
        let mut pairs = left.clone();
        pairs.merge(right);
        let mut folded = left;
        folded.merge(one(r));
        folded.merge(one(s));
        for (how, x) in [("pairs", pairs), ("fold", folded)] {
            let at = format!("{how} of {:?}", [p, q, r, s]);
            assert_eq!(x.context(&[a]), Some(counts(1, 1, 0, 0, 0)), "{at}");
            assert_eq!(x.context(&[a, b]), Some(counts(3, 21, 0, 0, 0)), "{at}");
            assert_eq!(x.context(&[b]), None, "{at}");
            let f = x.by_function();
            let of = |id| f.iter().find(|f| f.method == id).unwrap().inclusive;
            assert_eq!(of(a), counts(4, 22, 0, 0, 0), "{at}");
            assert_eq!(x.pending_tasks(), 0, "{at}");
        }
    }
}

const MIB: u64 = 1 << 20;

/// A resize too large for one `Realloc` word, 900 MiB → 1,200 MiB: its two words, with a
/// `Stall` between them (the producer waited on a full ring), cut at every place.
fn wide_resize(old: u64, new: u64) -> [Event; 2] {
    Event::realloc(old as usize, new as usize).expect_err("too large for one word")
}

#[test]
fn a_two_word_resize_counts_once_where_the_thread_is_at_any_chunking() {
    let (main, work) = (m(1), m(2));
    let [from, to] = wide_resize(900 * MIB, 1200 * MIB);
    let [from_down, to_down] = wide_resize(1200 * MIB, 600 * MIB);
    let w = words(&[
        Event::call(MethodId::ROOT, main),
        Event::alloc(900 * MIB as usize),
        Event::call(main, work),
        from,
        Event::stall(1234),
        to,
        Event::ret(work),
        from_down,
        to_down,
        Event::dealloc(600 * MIB as usize),
        Event::ret(main),
    ]);
    for chunk in 1..=w.len() {
        let mut a = Allocations::new();
        for c in w.chunks(chunk) {
            a.consume(c);
        }
        assert!(!a.is_approximate(), "chunks of {chunk}");
        assert_eq!(
            a.context(&[main, work]),
            Some(counts(0, 300 * MIB, 1, 0, 0)),
            "chunks of {chunk}"
        );
        assert_eq!(
            a.context(&[main]),
            Some(counts(1, 900 * MIB, 1, 1, 600 * MIB + 600 * MIB)),
            "chunks of {chunk}"
        );
        let t = a.totals();
        assert_eq!((t.allocs, t.reallocs, t.frees, t.net_bytes()), (1, 2, 1, 0));
    }
}

#[test]
fn two_word_resizes_of_multiplexed_threads_pair_by_thread() {
    let thread = |id: u64| Event::thread(id).unwrap();
    let [from1, to1] = wide_resize(2048 * MIB, 3072 * MIB);
    let [from2, to2] = wide_resize(4096 * MIB, 1024 * MIB);
    let mut a = Allocations::new();
    a.consume(&words(&[
        thread(1),
        Event::call(MethodId::ROOT, m(1)),
        from1,
        thread(2),
        Event::call(MethodId::ROOT, m(2)),
        from2,
        thread(1),
        to1,
        thread(2),
        to2,
    ]));
    assert!(!a.is_approximate());
    assert_eq!(a.context(&[m(1)]), Some(counts(0, 1024 * MIB, 1, 0, 0)));
    assert_eq!(a.context(&[m(2)]), Some(counts(0, 0, 1, 0, 3072 * MIB)));
}

/// A sampled stream may lose either word: the half seen is dropped (never paired with an
/// unrelated word) and the result is marked approximate.
#[test]
fn a_lost_half_of_a_two_word_resize_is_dropped_and_marks_the_result_approximate() {
    let [from, to] = wide_resize(900 * MIB, 1200 * MIB);
    // The second word lost: the next allocation word is the thread's own.
    let mut a = Allocations::new();
    a.consume(&words(&[from, Event::alloc(64), to]));
    assert!(a.is_approximate());
    assert_eq!(a.totals(), counts(1, 64, 0, 0, 0));
    // The first word lost.
    let mut b = Allocations::new();
    b.consume(&words(&[Event::alloc(64), to]));
    assert!(b.is_approximate());
    assert_eq!(b.totals(), counts(1, 64, 0, 0, 0));
    // A snapshot's copy taken between the two words leaves the resize out; the stream
    // itself still completes it.
    let mut live = Allocations::new();
    live.consume(&words(&[from]));
    let mut snapshot = Allocations::new();
    snapshot.merge(live.clone());
    assert!(snapshot.totals().is_empty() && !snapshot.is_approximate());
    live.consume(&words(&[to]));
    assert_eq!(live.totals(), counts(0, 300 * MIB, 1, 0, 0));
}

/// Live blocks by context, from the block words after each allocation word: made, freed,
/// resized (the block keeps the context it was made in), a free of a block made before the
/// stream (kept for a merge), at any chunking.
#[test]
fn live_blocks_follow_their_addresses() {
    use cabprof_analyses::LiveCounts;
    let (main, work) = (m(1), m(2));
    let w = words(&[
        Event::call(MethodId::ROOT, main),
        Event::alloc(100),
        Event::block(0x1000),
        Event::alloc(40),
        Event::block(0x2000),
        Event::call(main, work),
        Event::alloc(8),
        Event::block(0x3000),
        // Resized in `work`: still `main`'s block, now 64 bytes at 0x4000.
        Event::realloc(40, 64).unwrap(),
        Event::block(0x2000),
        Event::block(0x4000),
        // A block made before the stream.
        Event::dealloc(24),
        Event::block(0x9000),
        Event::ret(work),
        Event::dealloc(100),
        Event::block(0x1000),
        Event::ret(main),
    ]);
    for chunk in 1..=w.len() {
        let mut a = Allocations::new();
        for c in w.chunks(chunk) {
            a.consume(c);
        }
        let nodes = a.context_nodes();
        let live = |method: MethodId| {
            nodes
                .iter()
                .filter(|n| n.method == method)
                .map(|n| n.live)
                .next()
                .unwrap()
        };
        assert_eq!(
            live(main),
            LiveCounts {
                blocks: 1,
                bytes: 64
            },
            "chunk {chunk}"
        );
        assert_eq!(
            live(work),
            LiveCounts {
                blocks: 1,
                bytes: 8
            }
        );
        assert_eq!(a.root_live(), LiveCounts::default());
        assert!(!a.is_approximate());
    }
}

/// A block made on one thread and freed on another (two streams, two instances): after the
/// merge it is not live, in either order of merging.
#[test]
fn a_block_freed_by_another_thread_is_not_live_after_the_merge() {
    let main = m(1);
    let made = words(&[
        Event::call(MethodId::ROOT, main),
        Event::alloc(32),
        Event::block(0x5000),
        Event::alloc(16),
        Event::block(0x6000),
        Event::ret(main),
    ]);
    let freed = words(&[Event::dealloc(32), Event::block(0x5000)]);
    for made_first in [true, false] {
        let (mut a, mut b) = (Allocations::new(), Allocations::new());
        a.consume(&made);
        b.consume(&freed);
        if !made_first {
            std::mem::swap(&mut a, &mut b);
        }
        a.merge(b);
        let live: u64 = a.context_nodes().iter().map(|n| n.live.bytes).sum();
        assert_eq!(live, 16, "made first: {made_first}");
    }
}
