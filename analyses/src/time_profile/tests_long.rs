//! Tests of the long calls (`LongReturn` words): measured in full, added to the estimates as
//! they are, and apart from the timed sample of the other calls.

use super::*;
use cabprof_cab::event::Event;

fn m(i: u32) -> MethodId {
    MethodId::new(i).unwrap()
}

fn words(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.word()).collect()
}

/// main (timed, 10,000 ticks) calls a 100 times: 50 timed calls of 10 and 30 ticks in turn,
/// 49 untimed, and one untimed long call of 5,000 ticks among them.
fn one_long_among_many() -> Vec<u64> {
    let (main, a) = (m(1), m(2));
    let mut ev = vec![Event::call(MethodId::ROOT, main)];
    for i in 0..100u64 {
        ev.push(Event::call(main, a));
        ev.push(match i {
            37 => Event::long_return(a, 5000, false),
            i if i % 2 == 0 => Event::timed_return(a, if i % 4 == 0 { 10 } else { 30 }),
            _ => Event::ret(a),
        });
    }
    ev.push(Event::timed_return(main, 10_000));
    words(&ev)
}

fn function(p: &TimeProfile, id: MethodId) -> FunctionTime {
    p.functions()
        .into_iter()
        .find(|(m, _)| *m == id)
        .expect("the function was called")
        .1
}

#[test]
fn a_long_call_is_added_whole_and_the_others_scaled_from_the_sample() {
    let mut p = TimeProfile::new();
    p.consume(&one_long_among_many());
    let a = m(2);
    let f = function(&p, a);
    assert_eq!(
        (f.calls, f.timed, f.long.calls, f.long.timed),
        (100, 50, 1, 0)
    );
    assert_eq!(f.long.ticks, 5000);
    let e = p.estimate(a);
    // 5,000 as it is, and the 99 others from the 50 timed ones (mean 20).
    assert_eq!(e.inclusive, 5000.0 + 20.0 * 99.0);
    assert_eq!(e.raw_inclusive, 5000.0 + 20.0 * 99.0);
    // The interval is the sample's alone: 99 calls, 50 timed, standard deviation 10.
    let want = 1.96 * 99.0 * f.histogram.stdev() / 50f64.sqrt() * (1.0 - 50.0 / 99.0f64).sqrt();
    assert!((f.histogram.stdev() - 10.0).abs() < 1e-9);
    assert!(
        (e.inclusive_ci - want).abs() < 1e-9,
        "{} {want}",
        e.inclusive_ci
    );
    assert_eq!(e.long_untimed, 1);
    assert_eq!(p.estimate(m(1)).exclusive, 10_000.0 - 6980.0);
    // The same in the context and along the edge.
    let ctx = p.context_nodes();
    let at_a = ctx.iter().find(|c| c.method == a).unwrap();
    assert_eq!(at_a.time.estimate_with(&at_a.long), 6980.0);
    assert_eq!(
        (at_a.time.calls, at_a.time.timed, at_a.long.calls),
        (100, 50, 1)
    );
    let edge = p.edges().into_iter().find(|(k, _)| k.1 == a).unwrap().1;
    let long = p.long_edges();
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].0, (m(1), a));
    assert_eq!(edge.estimate_with(&long[0].1), 6980.0);
    // Without its long call, the edge's estimate is the sample's alone.
    assert_eq!(edge.estimate(), 20.0 * 100.0);
    // The long call is the longest, and weighs as one call among 100: the timed ones each
    // stand for 99/50 calls, so the median is a 30-tick call and the top 1% the long one.
    assert!(f.max().abs_diff(5000) <= 50, "{}", f.max());
    assert_eq!(f.value_at_quantile(0.25), 10);
    assert_eq!(f.value_at_quantile(0.5), 30);
    assert!(f.value_at_quantile(0.999).abs_diff(5000) <= 50);
    assert_eq!(f.value_at_quantile(0.98), 30);
}

#[test]
fn without_the_long_word_the_long_call_is_missed() {
    // The same stream with the long call's exit a plain `Return` (a producer that does not
    // tell long calls apart): the estimate is the sample's alone, and far below.
    let w: Vec<u64> = one_long_among_many()
        .into_iter()
        .map(|w| match cabprof_cab::event::as_long_return(w) {
            Some((callee, _, _)) => Event::ret(m(callee)).word(),
            None => w,
        })
        .collect();
    let mut p = TimeProfile::new();
    p.consume(&w);
    assert_eq!(p.estimate(m(2)).inclusive, 20.0 * 100.0);
    assert_eq!(p.estimate(m(2)).long_untimed, 0);
}

#[test]
fn a_timed_long_call_counts_as_long_not_in_the_sample() {
    let (main, a) = (m(1), m(2));
    let mut ev = vec![Event::call(MethodId::ROOT, main)];
    for r in [
        Event::timed_return(a, 10),
        Event::long_return(a, 4000, true),
        Event::ret(a),
        Event::timed_return(a, 30),
    ] {
        ev.push(Event::call(main, a));
        ev.push(r);
    }
    ev.push(Event::ret(main));
    let mut p = TimeProfile::new();
    p.consume(&words(&ev));
    let f = function(&p, a);
    assert_eq!((f.calls, f.timed, f.long.calls, f.long.timed), (4, 2, 1, 1));
    assert_eq!(p.estimate(a).inclusive, 4000.0 + 20.0 * 3.0);
    assert_eq!(p.estimate(a).long_untimed, 0);
}

#[test]
fn nested_long_calls_subtract_consistently() {
    // outer (untimed, long: 1,000) calls inner (untimed, long: 600), then c twice (one timed
    // call of 50, one untimed); outer's self time is what its callees' estimates leave.
    let (outer, inner, c) = (m(1), m(2), m(3));
    let ev = [
        Event::call(MethodId::ROOT, outer),
        Event::call(outer, inner),
        Event::long_return(inner, 600, false),
        Event::call(outer, c),
        Event::timed_return(c, 50),
        Event::call(outer, c),
        Event::ret(c),
        Event::long_return(outer, 1000, false),
    ];
    let mut p = TimeProfile::new();
    p.consume(&words(&ev));
    assert_eq!(p.estimate(outer).inclusive, 1000.0);
    assert_eq!(p.estimate(outer).exclusive, 1000.0 - 600.0 - 100.0);
    assert_eq!(p.estimate(inner).inclusive, 600.0);
    assert_eq!(p.estimate(inner).exclusive, 600.0);
    assert_eq!(p.estimate(c).inclusive, 100.0);
    let ctx = p.context_nodes();
    let at_outer = ctx.iter().find(|n| n.method == outer).unwrap();
    assert_eq!(at_outer.exclusive, 300.0);
}

#[test]
fn a_recursive_long_call_counts_its_outermost_activation_once() {
    // r (long, 900) calls r (long, 500): inclusive 900, every activation's sum 1,400.
    let r = m(1);
    let ev = [
        Event::call(MethodId::ROOT, r),
        Event::call(r, r),
        Event::long_return(r, 500, false),
        Event::long_return(r, 900, false),
    ];
    let mut p = TimeProfile::new();
    p.consume(&words(&ev));
    let f = function(&p, r);
    assert_eq!((f.long.calls, f.outer_long.calls), (2, 1));
    assert_eq!((f.long.ticks, f.outer_long.ticks), (1400, 900));
    assert_eq!(p.estimate(r).inclusive, 900.0);
    // Self time: every activation's (1,400) less the calls it made (the nested one, 500).
    assert_eq!(p.estimate(r).exclusive, 900.0);
}

#[test]
fn long_calls_merge_as_one_stream() {
    let w = one_long_among_many();
    let mut one = TimeProfile::new();
    one.consume(&w);
    one.consume(&w);
    let mut a = TimeProfile::new();
    a.consume(&w);
    let mut b = TimeProfile::new();
    b.consume(&w);
    a.merge(b);
    assert_eq!(a.estimates(), one.estimates());
    assert_eq!(a.edges(), one.edges());
    assert_eq!(a.long_edges(), one.long_edges());
    assert_eq!(a.context_nodes(), one.context_nodes());
    let (fa, fo) = (function(&a, m(2)), function(&one, m(2)));
    assert_eq!((fa.long, fa.outer_long), (fo.long, fo.outer_long));
    assert_eq!(fa.long.calls, 2);
    assert_eq!(fa.max(), fo.max());
    assert_eq!(fa.value_at_quantile(0.999), fo.value_at_quantile(0.999));
}

#[test]
fn an_untimed_long_call_loses_no_probe_inside_it() {
    // Compensated: the long call's own time loses the calls made inside it, but not a timed
    // probe's inside part; a timed long call loses that too.
    let (main, a, b) = (m(1), m(2), m(3));
    let ev = |timed: bool| {
        words(&[
            Event::call(MethodId::ROOT, main),
            Event::call(main, a),
            Event::call(a, b),
            Event::ret(b),
            Event::long_return(a, 1000, timed),
            Event::ret(main),
        ])
    };
    for timed in [false, true] {
        let mut p = TimeProfile::new();
        p.set_compensation(Compensation {
            inside: 2.0,
            timed: 10.0,
            untimed: 4.0,
            poll: 0.0,
        });
        p.consume(&ev(timed));
        let want = 1000.0 - 4.0 - if timed { 2.0 } else { 0.0 };
        assert_eq!(function(&p, a).long.comp, want, "timed {timed}");
        assert_eq!(function(&p, a).long.ticks, 1000);
    }
}
