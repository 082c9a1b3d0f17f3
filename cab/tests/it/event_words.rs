//! Event words round-trip and can never be a ring sentinel.

use cabprof_cab::event::{
    as_long_return, as_return, as_timed_return, decode, Event, EventKind, MethodId, CLEAR,
    EXACT_DURATION, LONG_EXACT_DURATION, MAGIC, MAX_ACCESS_SIZE, MAX_ADDRESS, MAX_DURATION,
    MAX_LONG_DURATION, MAX_METHOD_ID, MAX_PATH_NUMBER, MAX_PAYLOAD, MAX_POLL_NUMBER,
    MAX_REALLOC_SIZE, MAX_TASK_ID, MAX_WIDE_REALLOC_SIZE,
};
use proptest::prelude::*;

fn method() -> impl Strategy<Value = MethodId> {
    (0..=MAX_METHOD_ID).prop_map(|id| MethodId::new(id).unwrap())
}

fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        (method(), method()).prop_map(|(caller, callee)| EventKind::Call { caller, callee }),
        method().prop_map(|callee| EventKind::Return { callee }),
        (method(), 0..=MAX_PATH_NUMBER).prop_map(|(method, path)| EventKind::Path { method, path }),
        (0..=MAX_ADDRESS, 0u32..8, any::<bool>()).prop_map(|(addr, log, store)| EventKind::Mem {
            addr,
            size: 1 << log,
            store
        }),
        (0..=MAX_PAYLOAD).prop_map(|id| EventKind::Thread { id }),
        (0..=MAX_PAYLOAD).prop_map(|value| EventKind::Marker { value }),
        (method(), 0..=MAX_TASK_ID, any::<bool>()).prop_map(|(method, task, first)| {
            EventKind::Poll {
                method,
                task,
                first,
            }
        }),
        (0..=MAX_TASK_ID, 0..=MAX_POLL_NUMBER, any::<bool>())
            .prop_map(|(task, poll, done)| EventKind::PollEnd { task, poll, done }),
        (0..=MAX_PAYLOAD).prop_map(|ticks| EventKind::Time { ticks }),
        (method(), 0..EXACT_DURATION)
            .prop_map(|(callee, ticks)| EventKind::TimedReturn { callee, ticks }),
        // Long durations: 25 significant bits.
        (method(), 0u64..1 << 24, 5u32..=36).prop_map(|(callee, m, shift)| {
            EventKind::TimedReturn {
                callee,
                ticks: (m | 1 << 24) << shift,
            }
        }),
        (method(), 1..LONG_EXACT_DURATION, any::<bool>()).prop_map(|(callee, ticks, timed)| {
            EventKind::LongReturn {
                callee,
                ticks,
                timed,
            }
        }),
        // Long durations past the exact ones: 24 significant bits.
        (method(), 0u64..1 << 23, 5u32..=36, any::<bool>()).prop_map(
            |(callee, m, shift, timed)| EventKind::LongReturn {
                callee,
                ticks: (m | 1 << 23) << shift,
                timed,
            }
        ),
        (0..=MAX_PAYLOAD).prop_map(|size| EventKind::Alloc { size }),
        (0..=MAX_PAYLOAD).prop_map(|size| EventKind::Dealloc { size }),
        (0..=MAX_REALLOC_SIZE, 0..=MAX_REALLOC_SIZE)
            .prop_map(|(old, new)| EventKind::Realloc { old, new }),
        (0..=MAX_WIDE_REALLOC_SIZE).prop_map(|old| EventKind::ReallocFrom { old }),
        (0..=MAX_WIDE_REALLOC_SIZE).prop_map(|new| EventKind::ReallocTo { new }),
    ]
}

proptest! {
    #[test]
    fn every_kind_round_trips_and_never_hits_a_sentinel(k in kind()) {
        let e = k.encode().unwrap();
        prop_assert_ne!(e.word(), CLEAR);
        prop_assert_ne!(e.word(), MAGIC);
        prop_assert_eq!(e.kind(), k);
        prop_assert_eq!(decode(e.word()), Some(k));
        prop_assert_eq!(Event::from_word(e.word()), Some(e));
    }

    #[test]
    fn arbitrary_words_decode_only_to_reencodable_events(w in any::<u64>()) {
        if let Some(k) = decode(w) {
            prop_assert_eq!(k.encode().unwrap().word(), w);
        }
    }
}

proptest! {
    /// A duration too long to be exact keeps 25 significant bits: never more than the true
    /// value, short of it by less than 2^-24 of it; past the maximum it saturates.
    #[test]
    fn long_durations_keep_25_significant_bits(ticks in EXACT_DURATION..=u64::MAX) {
        let m = MethodId::new(7).unwrap();
        let (callee, kept) = as_timed_return(Event::timed_return(m, ticks).word()).unwrap();
        prop_assert_eq!(callee, 7);
        let want = ticks.min(MAX_DURATION);
        prop_assert!(kept <= want, "{} > {}", kept, want);
        prop_assert!((want - kept) as f64 <= want as f64 / (1u64 << 24) as f64);
    }
}

#[test]
fn short_durations_are_exact() {
    let m = MethodId::new(3).unwrap();
    for ticks in [0, 1, 12_345, EXACT_DURATION - 1] {
        assert_eq!(
            decode(Event::timed_return(m, ticks).word()),
            Some(EventKind::TimedReturn { callee: m, ticks })
        );
    }
    // Not representable: refused by the checked encoder, naming the field.
    let e = EventKind::TimedReturn {
        callee: m,
        ticks: EXACT_DURATION + 1,
    }
    .encode()
    .unwrap_err();
    assert!(e.to_string().contains("duration"), "{e}");
}

#[test]
fn sentinels_are_not_events() {
    assert_eq!(Event::from_word(CLEAR), None);
    assert_eq!(Event::from_word(MAGIC), None);
    assert_eq!(decode(CLEAR), None);
    assert_eq!(decode(MAGIC), None);
}

#[test]
fn extreme_fields_stay_clear_of_sentinels() {
    let max = MethodId::new(MAX_METHOD_ID).unwrap();
    for e in [
        Event::call(max, max),
        Event::call(MethodId::ROOT, MethodId::ROOT),
        Event::ret(MethodId::ROOT),
        Event::path(max, MAX_PATH_NUMBER).unwrap(),
        Event::mem(MAX_ADDRESS, MAX_ACCESS_SIZE, true).unwrap(),
        Event::mem(0, 1, false).unwrap(),
        Event::thread(MAX_PAYLOAD).unwrap(),
        Event::marker(0).unwrap(),
        Event::alloc(usize::MAX),
        Event::dealloc(0),
        Event::realloc(MAX_REALLOC_SIZE as usize, 0).unwrap(),
        Event::realloc(usize::MAX, usize::MAX).unwrap_err()[0],
        Event::realloc(usize::MAX, usize::MAX).unwrap_err()[1],
        Event::realloc(0, MAX_REALLOC_SIZE as usize + 1).unwrap_err()[0],
    ] {
        assert_ne!(e.word(), CLEAR);
        assert_ne!(e.word(), MAGIC);
    }
}

#[test]
fn out_of_range_fields_are_named_errors() {
    let err = MethodId::new(MAX_METHOD_ID + 1).unwrap_err();
    assert_eq!(err.field, "function id");
    assert!(err.to_string().contains("allowed 0..=1073741823"), "{err}");
    let err = Event::path(MethodId::ROOT, MAX_PATH_NUMBER + 1).unwrap_err();
    assert_eq!(err.field, "path number");
    assert_eq!(
        Event::mem(MAX_ADDRESS + 1, 8, false).unwrap_err().field,
        "address"
    );
    assert!(Event::mem(0, 3, false)
        .unwrap_err()
        .field
        .starts_with("access size"));
    assert!(Event::mem(0, 0, false).is_err());
    assert!(Event::mem(0, 256, false).is_err());
    assert_eq!(
        Event::thread(MAX_PAYLOAD + 1).unwrap_err().field,
        "thread id"
    );
    assert_eq!(Event::marker(u64::MAX).unwrap_err().field, "marker value");
}

#[test]
fn allocation_sizes_saturate_or_split_instead_of_corrupting_the_tag() {
    assert_eq!(
        Event::alloc(usize::MAX).kind(),
        EventKind::Alloc { size: MAX_PAYLOAD }
    );
    assert_eq!(Event::dealloc(24).kind(), EventKind::Dealloc { size: 24 });
    assert_eq!(
        Event::realloc(32, 64).unwrap().kind(),
        EventKind::Realloc { old: 32, new: 64 }
    );
    assert_eq!(
        Event::realloc(MAX_REALLOC_SIZE as usize, 1).unwrap().kind(),
        EventKind::Realloc {
            old: MAX_REALLOC_SIZE,
            new: 1
        }
    );
    // Past one word: two exact words, never a free and an allocation (which counted the old
    // block twice and the resize not at all).
    let big = MAX_REALLOC_SIZE as usize + 1;
    let [from, to] = Event::realloc(16, big).unwrap_err();
    assert_eq!(from.kind(), EventKind::ReallocFrom { old: 16 });
    assert_eq!(to.kind(), EventKind::ReallocTo { new: big as u64 });
    const MIB: u64 = 1 << 20;
    let [from, to] = Event::realloc(900 << 20, 1200 << 20).unwrap_err();
    assert_eq!(
        (from.kind(), to.kind()),
        (
            EventKind::ReallocFrom { old: 900 * MIB },
            EventKind::ReallocTo { new: 1200 * MIB }
        )
    );
    // Sizes no block can have saturate rather than corrupt the word.
    let [from, to] = Event::realloc(usize::MAX, 7).unwrap_err();
    assert_eq!(
        (from.kind(), to.kind()),
        (
            EventKind::ReallocFrom {
                old: MAX_WIDE_REALLOC_SIZE
            },
            EventKind::ReallocTo { new: 7 }
        )
    );
    let err = EventKind::Realloc {
        old: big as u64,
        new: 1,
    }
    .encode()
    .unwrap_err();
    assert_eq!(err.field, "reallocation size");
    assert_eq!(err.max, MAX_REALLOC_SIZE);
    let err = EventKind::ReallocTo {
        new: MAX_WIDE_REALLOC_SIZE + 1,
    }
    .encode()
    .unwrap_err();
    assert_eq!(err.field, "reallocation size (two words)");
    assert_eq!(err.max, MAX_WIDE_REALLOC_SIZE);
}

proptest! {
    /// A long call's duration: exact below `LONG_EXACT_DURATION`, else 24 significant bits
    /// (never more than the true value, short of it by less than 2^-23 of it), saturating
    /// past the maximum; never read as a plain `Return`.
    #[test]
    fn long_returns_keep_24_significant_bits(ticks in 1..=u64::MAX, timed in any::<bool>()) {
        let m = MethodId::new(9).unwrap();
        let w = Event::long_return(m, ticks, timed).word();
        prop_assert_eq!(as_return(w), None);
        prop_assert_eq!(as_timed_return(w), None);
        let (callee, kept, was_timed) = as_long_return(w).unwrap();
        prop_assert_eq!((callee, was_timed), (9, timed));
        let want = ticks.min(MAX_LONG_DURATION);
        if want < LONG_EXACT_DURATION {
            prop_assert_eq!(kept, want);
        }
        prop_assert!(kept <= want, "{} > {}", kept, want);
        prop_assert!((want - kept) as f64 <= want as f64 / (1u64 << 23) as f64);
    }
}

#[test]
fn a_long_return_is_never_a_plain_return() {
    let m = MethodId::new(5).unwrap();
    // An untimed call of no ticks is carried as one, so that its word differs from `Return`.
    assert_eq!(
        Event::long_return(m, 0, false).kind(),
        EventKind::LongReturn {
            callee: m,
            ticks: 1,
            timed: false
        }
    );
    assert_eq!(
        Event::long_return(m, 0, true).kind(),
        EventKind::LongReturn {
            callee: m,
            ticks: 0,
            timed: true
        }
    );
    assert_eq!(as_return(Event::ret(m).word()), Some(5));
    assert_eq!(as_long_return(Event::ret(m).word()), None);
    let e = EventKind::LongReturn {
        callee: m,
        ticks: 0,
        timed: false,
    }
    .encode()
    .unwrap_err();
    assert!(e.to_string().contains("long duration"), "{e}");
    let e = EventKind::LongReturn {
        callee: m,
        ticks: LONG_EXACT_DURATION + 1,
        timed: true,
    }
    .encode()
    .unwrap_err();
    assert_eq!(e.max, MAX_LONG_DURATION);
}
