//! `Poll`/`PollEnd` words: a future's events belong to its own context, whichever stream (thread)
//! polled it and in whatever order the streams are analyzed and merged.

use cabprof_analyses::{CallTreeProfile, CallingContextTree, EventAnalysis};
use cabprof_cab::event::{Event, MethodId};

fn m(id: u32) -> MethodId {
    MethodId::new(id).unwrap()
}

const H: u32 = 1; // async handle
const S: u32 = 2; // async step
const C: u32 = 3; // sync compute

fn words(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.word()).collect()
}

/// Two `handle` tasks (ids 10, 11), each awaiting one `step` (ids 20, 21) that suspends once;
/// task 10 runs wholly on stream A; task 11 starts on A, its step resumes on B, and it finishes
/// on C.
fn streams() -> [Vec<u64>; 3] {
    let (root, h, s, c) = (MethodId::ROOT, m(H), m(S), m(C));
    let a = words(&[
        Event::call(root, h),
        Event::poll(h, 10, true),
        Event::call(h, c),
        Event::ret(c),
        Event::call(h, s),
        Event::poll(s, 20, true),
        Event::call(s, c),
        Event::ret(c),
        Event::poll_end(20, 0, false),
        Event::poll_end(10, 0, false),
        // Task 11 interleaves before task 10 resumes.
        Event::call(root, h),
        Event::poll(h, 11, true),
        Event::call(h, s),
        Event::poll(s, 21, true),
        Event::poll_end(21, 0, false),
        Event::poll_end(11, 0, false),
        Event::poll(h, 10, false),
        Event::poll(s, 20, false),
        Event::call(s, c),
        Event::ret(c),
        Event::ret(s),
        Event::poll_end(20, 1, true),
        Event::ret(h),
        Event::poll_end(10, 1, true),
    ]);
    let b = words(&[
        Event::poll(h, 11, false),
        Event::poll(s, 21, false),
        Event::call(s, c),
        Event::ret(c),
        Event::call(s, c),
        Event::ret(c),
        Event::ret(s),
        Event::poll_end(21, 1, true),
        Event::poll_end(11, 1, false),
    ]);
    let c_ = words(&[
        Event::poll(h, 11, false),
        Event::call(h, c),
        Event::ret(c),
        Event::ret(h),
        Event::poll_end(11, 2, true),
    ]);
    [a, b, c_]
}

fn names(id: MethodId) -> String {
    ["root", "handle", "step", "compute"][id.get() as usize].to_string()
}

const FOLDED: &str =
    "root;handle 2\nroot;handle;compute 2\nroot;handle;step 2\nroot;handle;step;compute 4\n";

fn analyze<A: EventAnalysis + Default>(words: &[u64]) -> A {
    let mut a = A::default();
    for chunk in words.chunks(3) {
        a.consume(chunk);
    }
    a
}

fn check(tree: &CallingContextTree, profile: &CallTreeProfile) {
    assert_eq!(tree.folded(&names), FOLDED);
    assert_eq!(tree.total(), 10);
    assert!(!tree.is_approximate());
    assert_eq!(tree.pending_tasks(), 0);
    assert_eq!(
        profile.sorted(),
        vec![
            (m(H), vec![m(S), m(C)], 1),
            (m(H), vec![m(C), m(S)], 1),
            (m(S), vec![m(C), m(C)], 2),
            (m(C), vec![], 6),
        ]
    );
    assert!(!profile.is_approximate());
    assert_eq!(profile.pending_tasks(), 0);
}

#[test]
fn streams_merged_in_any_order_give_each_task_its_own_tree() {
    let s = streams();
    for order in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ] {
        let mut tree: CallingContextTree = analyze(&s[order[0]]);
        let mut profile: CallTreeProfile = analyze(&s[order[0]]);
        for &i in &order[1..] {
            tree.merge(analyze(&s[i]));
            profile.merge(analyze(&s[i]));
        }
        check(&tree, &profile);
    }
    // Merging pairs first, then the pair into the third.
    let mut tree: CallingContextTree = analyze(&s[1]);
    tree.merge(analyze(&s[2]));
    let mut all: CallingContextTree = analyze(&s[0]);
    all.merge(tree);
    let mut profile: CallTreeProfile = analyze(&s[1]);
    profile.merge(analyze(&s[2]));
    let mut all_p: CallTreeProfile = analyze(&s[0]);
    all_p.merge(profile);
    check(&all, &all_p);
}

#[test]
fn one_stream_multiplexing_threads_in_any_order() {
    // The same events in one stream, the later polls' threads first: they wait for the first
    // poll and are placed when it comes.
    let s = streams();
    let mut all = Vec::new();
    all.push(Event::thread(2).unwrap().word());
    all.extend(&s[1]);
    all.push(Event::thread(1).unwrap().word());
    all.extend(&s[0]);
    all.push(Event::thread(3).unwrap().word());
    all.extend(&s[2]);
    let tree: CallingContextTree = analyze(&all);
    let profile: CallTreeProfile = analyze(&all);
    check(&tree, &profile);
}

/// A future `b` first polled inside a later poll of another future `a` (so, in that stream,
/// below `a`'s detached node), then polled on two more streams; `a`'s first poll on a fourth.
/// Merged in any order and grouping, what `b` called is under root → a → b.
#[test]
fn a_future_first_polled_inside_a_moved_future_is_placed_in_any_merge_order() {
    let (root, a, b, c) = (MethodId::ROOT, m(H), m(S), m(C));
    let streams = [
        words(&[
            Event::call(root, a),
            Event::poll(a, 1, true),
            Event::poll_end(1, 0, false),
        ]),
        words(&[
            Event::poll(a, 1, false),
            Event::call(a, b),
            Event::poll(b, 2, true),
            Event::call(b, c),
            Event::ret(c),
            Event::poll_end(2, 0, false),
            Event::ret(a),
            Event::poll_end(1, 1, true),
        ]),
        words(&[
            Event::poll(b, 2, false),
            Event::call(b, c),
            Event::ret(c),
            Event::poll_end(2, 1, false),
        ]),
        words(&[
            Event::poll(b, 2, false),
            Event::call(b, c),
            Event::ret(c),
            Event::ret(b),
            Event::poll_end(2, 2, true),
        ]),
    ];
    let one = |i: usize| -> CallingContextTree { analyze(&streams[i]) };
    for p in 0..4 {
        for q in (0..4).filter(|&q| q != p) {
            for r in (0..4).filter(|&r| r != p && r != q) {
                let s = 6 - p - q - r;
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
                    assert_eq!(x.count(&[a]), 1, "{at}");
                    assert_eq!(x.count(&[a, b]), 1, "{at}");
                    assert_eq!(x.count(&[a, b, c]), 3, "{at}");
                    assert_eq!(x.total(), 5, "{at}");
                    assert_eq!(x.pending_tasks(), 0, "{at}");
                }
                let mut profile: CallTreeProfile = analyze(&streams[p]);
                for i in [q, r, s] {
                    profile.merge(analyze(&streams[i]));
                }
                assert_eq!(
                    profile.sorted(),
                    vec![(a, vec![b], 1), (b, vec![c, c, c], 1), (c, vec![], 3)],
                    "profile of {:?}",
                    [p, q, r, s]
                );
                assert_eq!(profile.pending_tasks(), 0);
            }
        }
    }
}

/// An `async fn` main loop (`handle`, task 7) that calls `compute` many times per poll over
/// many polls: its pieces stop at MAX_CALLEES calls in all, and the invocation is counted as
/// overlong when it completes, whichever polls made it long.
#[test]
fn an_async_loop_with_too_many_calls_is_counted_not_kept() {
    use cabprof_analyses::call_tree::MAX_CALLEES;
    let (root, h, c) = (MethodId::ROOT, m(H), m(C));
    let per_poll = MAX_CALLEES / 4 + 1;
    let mut p = CallTreeProfile::new();
    p.consume(&words(&[Event::call(root, h)]));
    for poll in 0..8u32 {
        p.consume(&words(&[Event::poll(h, 7, poll == 0)]));
        for _ in 0..per_poll {
            p.consume(&words(&[Event::call(h, c), Event::ret(c)]));
        }
        let last = poll == 7;
        if last {
            p.consume(&words(&[Event::ret(h)]));
        }
        p.consume(&words(&[Event::poll_end(7, poll, last)]));
        // Bounded while it runs: at most MAX_CALLEES ids held for it.
        let held = format!("{:?}", p.clone()).len();
        assert!(
            held < 20 * MAX_CALLEES,
            "poll {poll}: {held} bytes of debug output"
        );
    }
    assert_eq!(p.overlong(), 1);
    assert!(
        p.sorted().iter().all(|(f, _, _)| *f != h),
        "handle is not a pattern"
    );
    // A short async invocation is still recorded whole.
    let mut q = CallTreeProfile::new();
    q.consume(&words(&[
        Event::call(root, h),
        Event::poll(h, 8, true),
        Event::call(h, c),
        Event::ret(c),
        Event::ret(h),
        Event::poll_end(8, 0, true),
    ]));
    assert_eq!(q.overlong(), 0);
    assert!(q.sorted().contains(&(h, vec![c], 1)));
}

/// The futures waiting for their next poll are pending, with their contexts, until their last
/// poll is seen in whichever stream: task 11 (`handle`) and its step, task 21, after stream A.
#[test]
fn pending_futures_are_those_whose_last_poll_is_not_seen() {
    let [a, b, c_] = streams();
    let (h, s) = (m(H), m(S));
    let mut tree: CallingContextTree = analyze(&a);
    assert_eq!(
        tree.pending_futures(),
        vec![(h, 11, vec![h]), (s, 21, vec![h, s])]
    );
    assert_eq!(tree.open_stacks(), Vec::<Vec<MethodId>>::new());
    tree.merge(analyze(&b));
    assert_eq!(tree.pending_futures(), vec![(h, 11, vec![h])]);
    tree.merge(analyze(&c_));
    assert_eq!(tree.pending_futures(), vec![]);
}
