//! The timeline's unit tests.

use super::*;
use cabprof_cab::event::Event;

fn id(n: u32) -> MethodId {
    MethodId::new(n).unwrap()
}

fn call(a: u32, b: u32) -> u64 {
    Event::call(id(a), id(b)).word()
}

fn timed_ret(m: u32, ticks: u64) -> u64 {
    Event::timed_return(id(m), ticks).word()
}

fn time(t: u64) -> u64 {
    Event::time(t).word()
}

/// A lock wait inside a call is a slice one deeper, from its stamps, high bits and all; a
/// hold is none.
#[test]
fn a_wait_is_a_slice_inside_its_caller() {
    let base = 5 << 48;
    let [from, to] = Event::wait_span(base + 120, base + 180);
    let [hold_from, hold_to] = Event::wait_span(base + 181, base + 182);
    let words = vec![
        Event::thread_mark(7).word(),
        call(0, 1),
        call(1, 2),
        time(base + 110),
        timed_ret(2, 5),
        Event::wait(WaitKind::Lock, 1, 9).word(),
        Event::wait_ns(60).word(),
        from.word(),
        to.word(),
        // A hold's stamps would not come; if they did, there is no wait to draw.
        Event::wait(WaitKind::Hold, 2, 9).word(),
        Event::wait_ns(1).word(),
        hold_from.word(),
        hold_to.word(),
        time(base + 200),
        timed_ret(1, 100),
    ];
    let mut t = Timeline::new(16);
    t.consume(&words);
    let th = t.threads();
    let slices = &th[0].slices;
    let waits: Vec<&Slice> = slices.iter().filter(|s| s.wait.is_some()).collect();
    assert_eq!(waits.len(), 1, "{slices:?}");
    let w = waits[0];
    assert_eq!(
        (w.method, w.depth, w.wait, w.task, w.start, w.ticks),
        (id(1), 1, Some(WaitKind::Lock), Some(9), base + 120, 60)
    );
    let outer = slices
        .iter()
        .find(|s| s.method == id(1) && s.wait.is_none())
        .unwrap();
    assert!(outer.start <= w.start && w.start + w.ticks <= outer.start + outer.ticks);
    assert_eq!(SLICE_BYTES, 32);
}

/// outer(1) from 100 to 200 calls inner(2) twice: 110..130 and 150..170.
fn nested() -> Vec<u64> {
    vec![
        Event::thread_mark(7).word(),
        call(0, 1),
        call(1, 2),
        time(130),
        timed_ret(2, 20),
        call(1, 2),
        time(170),
        timed_ret(2, 20),
        time(200),
        timed_ret(1, 100),
    ]
}

#[test]
fn timed_calls_become_nested_slices_from_their_exit_stamps() {
    let mut t = Timeline::default();
    t.consume(&nested());
    let threads = t.threads();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0].thread, Some(7));
    let s: Vec<_> = threads[0]
        .slices
        .iter()
        .map(|s| (s.method.get(), s.depth, s.start, s.ticks))
        .collect();
    assert_eq!(s, [(2, 1, 110, 20), (2, 1, 150, 20), (1, 0, 100, 100)]);
}

#[test]
fn a_parent_whose_truncated_duration_starts_after_its_child_is_widened_to_hold_it() {
    // outer's true start is 100; its word says it took 95 ticks (truncated), inner 101..130.
    let mut t = Timeline::default();
    t.consume(&[call(0, 1), call(1, 2), time(130), timed_ret(2, 29)]);
    t.consume(&[time(200), timed_ret(1, 95)]);
    let s: Vec<_> = t.threads()[0]
        .slices
        .iter()
        .map(|s| (s.method.get(), s.start, s.ticks))
        .collect();
    assert_eq!(s, [(2, 101, 29), (1, 101, 99)]);
}

#[test]
fn without_exit_stamps_nothing_is_on_the_timeline() {
    let mut t = Timeline::default();
    t.consume(&[
        call(0, 1),
        timed_ret(1, 50),
        call(0, 1),
        Event::ret(id(1)).word(),
    ]);
    assert!(t.threads().is_empty());
    assert_eq!(t.unmatched(), 0);
}

#[test]
fn the_flight_recorder_keeps_the_last_slices_and_counts_the_rest() {
    let mut t = Timeline::new(2);
    t.consume(&nested());
    let th = &t.threads()[0];
    assert_eq!(th.overwritten, 1);
    let starts: Vec<_> = th.slices.iter().map(|s| s.start).collect();
    assert_eq!(starts, [150, 100]);
}

#[test]
fn polls_are_slices_and_a_futures_call_is_not_left_open() {
    let poll = |first, task| Event::poll(id(3), task, first).word();
    let end = |task, n, done| Event::poll_end(task, n, done).word();
    let mut t = Timeline::default();
    t.consume(&[
        call(0, 3),
        poll(true, 9),
        time(10),
        time(15),
        end(9, 0, false),
        call(0, 1),
        time(40),
        timed_ret(1, 10),
        poll(false, 9),
        time(50),
        time(58),
        Event::ret(id(3)).word(),
        end(9, 1, true),
    ]);
    let s = placed(&t);
    assert_eq!(
        s,
        [
            (3, 0, true, 10, 5),
            (1, 0, false, 30, 10),
            (3, 0, true, 50, 8)
        ]
    );
    let tasks: Vec<_> = t.threads()[0].slices.iter().map(|s| s.task).collect();
    assert_eq!(tasks, [Some(9), None, Some(9)]);
    assert_eq!(t.unmatched(), 0);
}

#[test]
fn only_a_long_enough_call_of_the_watched_function_fires_the_trigger() {
    use std::sync::Mutex;
    let fired = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (f, a) = (fired.clone(), asked.clone());
    let trigger = |watch: u32, min_ticks| Trigger {
        watched: Arc::new({
            let a = a.clone();
            move |m: MethodId| {
                a.lock().unwrap().push(m.get());
                m.get() == watch
            }
        }),
        min_ticks,
        fire: Arc::new({
            let f = f.clone();
            move |x| f.lock().unwrap().push(x)
        }),
    };
    // outer (1) lasts 100 ticks, each inner (2) 20.
    let mut t = Timeline::default().with_trigger(trigger(1, 90));
    t.consume(&nested());
    t.consume(&nested());
    let outer = Fired {
        method: id(1),
        thread: Some(7),
        start: 100,
        ticks: 100,
    };
    assert_eq!(*fired.lock().unwrap(), [outer, outer]);
    // The short inner calls are never looked up; outer once.
    assert_eq!(*asked.lock().unwrap(), [1]);
    // Watched but too short; long enough but not watched.
    for (watch, min) in [(2, 21), (2, 101), (3, 1)] {
        fired.lock().unwrap().clear();
        let mut t = Timeline::default().with_trigger(trigger(watch, min));
        t.consume(&nested());
        assert!(fired.lock().unwrap().is_empty(), "{watch} {min}");
    }
}

#[test]
fn merged_streams_of_one_thread_are_one_entry() {
    let mut a = Timeline::default();
    a.consume(&nested());
    let mut b = Timeline::default();
    b.consume(&[
        Event::thread_mark(7).word(),
        call(0, 1),
        time(400),
        timed_ret(1, 50),
    ]);
    let mut c = Timeline::default();
    c.consume(&[
        Event::thread_mark(2).word(),
        call(0, 1),
        time(9),
        timed_ret(1, 4),
    ]);
    let mut all = Timeline::default();
    all.merge(b);
    all.merge(c);
    all.merge(a);
    let threads = all.threads();
    assert_eq!(
        threads.iter().map(|t| t.thread).collect::<Vec<_>>(),
        [Some(2), Some(7)]
    );
    assert_eq!(threads[1].slices.len(), 4);
    assert_eq!(threads[1].slices.back().unwrap().start, 350);
}

/// A poll parks the frames of its poller: what it calls is as deep as the frames open on the
/// thread, parked ones included.
#[test]
fn a_polls_calls_are_deeper_than_the_frames_it_parked() {
    let mut t = Timeline::default();
    t.consume(&[
        call(0, 1),
        call(1, 6),
        Event::poll(id(6), 4, true).word(),
        time(5),
        call(6, 2),
        time(20),
        timed_ret(2, 5),
        time(25),
        Event::poll_end(4, 0, false).word(),
        call(1, 3),
        time(40),
        timed_ret(3, 4),
    ]);
    let s = placed(&t);
    assert_eq!(
        s,
        [
            (2, 2, false, 15, 5),
            (6, 1, true, 5, 20),
            (3, 1, false, 36, 4)
        ]
    );
    assert_eq!(t.unmatched(), 0);
}

/// Lost words resynchronise as in the other stack analyses: a `Return` of a frame below the
/// top closes the frames above it unrecorded (they lost their `Return`s), and a `Return` no
/// frame matches is counted.
#[test]
fn a_return_below_the_top_closes_the_frames_above_it() {
    let mut t = Timeline::default();
    t.consume(&[
        call(0, 1),
        call(1, 2),
        // The `Return` of 2 was lost: 3 opens above it.
        call(1, 3),
        time(30),
        timed_ret(3, 10),
        time(40),
        timed_ret(1, 40),
        Event::ret(id(9)).word(),
        call(0, 4),
        time(60),
        timed_ret(4, 5),
    ]);
    let s: Vec<_> = t.threads()[0]
        .slices
        .iter()
        .map(|s| (s.method.get(), s.depth, s.start))
        .collect();
    assert_eq!(s, [(3, 2, 20), (1, 0, 0), (4, 0, 55)]);
    assert_eq!(t.unmatched(), 1);
}

/// The first thread's slices as (function, depth, poll, start, ticks).
fn placed(t: &Timeline) -> Vec<(u32, u16, bool, u64, u64)> {
    t.threads()[0]
        .slices
        .iter()
        .map(|s| (s.method.get(), s.depth, s.poll, s.start, s.ticks))
        .collect()
}

/// A lost `PollEnd` of an inner poll: the outer poll's `PollEnd` ends both, the outer one
/// with its slice (named by its own task), and what follows is back at depth 0.
#[test]
fn a_lost_inner_poll_end_is_ended_by_the_outer_one() {
    let mut t = Timeline::default();
    t.consume(&[
        Event::poll(id(5), 8, false).word(),
        time(10),
        Event::poll(id(6), 9, false).word(),
        time(20),
        time(30),
        // PollEnd(9) lost.
        time(40),
        Event::poll_end(8, 0, false).word(),
        call(0, 1),
        time(60),
        timed_ret(1, 5),
    ]);
    let s: Vec<_> = t.threads()[0]
        .slices
        .iter()
        .map(|s| (s.method.get(), s.depth, s.task))
        .collect();
    assert_eq!(s, [(5, 0, Some(8)), (1, 0, None)]);
}

/// No word sequence panics the timeline or the time analysis: random calls, returns, stamps,
/// polls, poll ends and thread switches, one word at a time.
#[test]
fn random_words_never_panic() {
    use crate::TimeProfile;
    for seed in 0..3000u64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut words = Vec::new();
        for _ in 0..(next() % 300) {
            let r = next();
            let a = (r >> 8) as u32 % 5 + 1;
            let b = (r >> 16) as u32 % 5;
            let tk = (r >> 24) as u32 % 3;
            words.push(match r % 12 {
                0 | 1 => call(b, a),
                2 | 3 => Event::ret(id(a)).word(),
                4 => timed_ret(a, (r >> 32) % 50),
                5 | 6 => time((r >> 32) % 1000),
                7 => Event::poll(id(a), tk, r & (1 << 40) != 0).word(),
                8 => Event::poll_end(tk, (r >> 40) as u32 % 3, r & (1 << 50) != 0).word(),
                9 => Event::thread(r % 3).unwrap().word(),
                10 => Event::long_return(id(a), (r >> 32) % 5000, r & (1 << 45) != 0).word(),
                _ => time(next() % 1000),
            });
        }
        let mut tl = Timeline::default();
        let mut tp = TimeProfile::default();
        for w in &words {
            tl.consume(std::slice::from_ref(w));
            tp.consume(std::slice::from_ref(w));
        }
        let _ = tl.threads();
    }
}
