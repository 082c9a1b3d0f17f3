//! Reading saved reports back: what `ReportData::from_json` accepts and how it says no.

use cabprof::report::{ReportData, ReportError, SCHEMA};

#[test]
fn a_report_round_trips_and_errors_name_what_failed() {
    let data = ReportData {
        schema: SCHEMA.into(),
        ..ReportData::default()
    };
    assert_eq!(ReportData::from_json(&data.json()).unwrap(), data);

    let e = ReportData::from_json("{ \"schema\": ").unwrap_err();
    assert!(matches!(e, ReportError::NotAReport(_)), "{e:?}");
    assert!(e.to_string().starts_with("not a cabprof report: "), "{e}");
    assert!(std::error::Error::source(&e).is_some());

    let other = data.json().replace(SCHEMA, "cabprof-report/99");
    match ReportData::from_json(&other).unwrap_err() {
        ReportError::UnsupportedSchema { found } => assert_eq!(found, "cabprof-report/99"),
        e => panic!("{e:?}"),
    }
}

/// A report as the previous JSON library wrote it (`examples/hot_functions` with every analysis,
/// each list cut to two entries): it still reads, field for field, and what it reads writes
/// back to the same data.
#[test]
fn a_report_written_before_still_reads() {
    let text = include_str!("../data/report_written_by_serde_json.json");
    let data = ReportData::from_json(text).unwrap();
    assert_eq!(data.session.mode, "exhaustive");
    assert_eq!(data.session.chunk_bytes, 196_608);
    assert_eq!(data.totals.events, 1_538_618);
    assert_eq!(data.totals.blocked_s, 0.186841743);
    assert_eq!(data.name(1), "hot_functions::run");
    let paths = data.paths.as_ref().unwrap();
    assert_eq!(
        paths[0].steps.as_ref().unwrap()[1],
        "line 47: `i < bytes.len()` is true"
    );
    assert_eq!(data.cache.as_ref().unwrap().levels.len(), 2);
    assert!(data.reuse_distance.is_some() && data.call_tree.is_some());
    assert_eq!(ReportData::from_json(&data.json()).unwrap(), data);

    // Written before `session.rate_effective` existed: it reads as 0.0.
    let older = text.replace("\"rate_effective\": 1.0,", "");
    assert_ne!(older, text);
    let data = ReportData::from_json(&older).unwrap();
    assert_eq!(data.session.rate_effective, 0.0);

    // A missing field that is not optional is named as such.
    let broken = text.replace("\"chunk_bytes\": 196608,", "");
    let e = ReportData::from_json(&broken).unwrap_err();
    assert!(
        matches!(
            e,
            ReportError::NotAReport(cabprof::report::NotAReport::BadFields)
        ),
        "{e:?}"
    );
}

#[test]
fn a_context_list_that_is_no_tree_is_named_with_its_entry() {
    use cabprof::report::{CallTreeData, ContextEntry, ContextFault, NotAReport};
    let node = |id, parent| ContextEntry {
        id,
        parent,
        method: 1,
        count: 1,
        estimated: None,
    };
    for (contexts, field_index, fault) in [
        // A cycle: 1's parent is 2, listed after it.
        (
            vec![node(1, 2), node(2, 1)],
            0,
            ContextFault::ParentNotBefore { id: 1, parent: 2 },
        ),
        (
            vec![node(1, 0), node(1, 0)],
            1,
            ContextFault::DuplicateId { id: 1 },
        ),
        (vec![node(0, 0)], 0, ContextFault::RootId),
    ] {
        let data = ReportData {
            call_tree: Some(CallTreeData {
                approximate: false,
                patterns: Vec::new(),
                contexts,
                overlong: None,
            }),
            schema: cabprof::report::SCHEMA.to_owned(),
            ..ReportData::default()
        };
        let e = ReportData::from_json(&data.json()).unwrap_err();
        assert!(
            matches!(
                &e,
                ReportError::NotAReport(NotAReport::BadContext { field: "call_tree.contexts", index, fault: f })
                    if *index == field_index && *f == fault
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("call_tree.contexts["), "{e}");
    }
}

#[cabprof::profile]
fn ring_filler(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_add(1)
}

/// The report says how large the rings grew: a thread making a million calls grows its ring
/// from the starting size, and the totals and the text say so.
#[test]
fn the_report_says_how_large_the_rings_grew() {
    let _g = crate::support::serial();
    let s = cabprof::Session::builder()
        .analyses(&[cabprof::Analysis::MethodCount])
        .pin(false)
        .start()
        .unwrap();
    std::thread::spawn(|| (0..1_000_000u64).fold(0, |a, _| ring_filler(a)))
        .join()
        .unwrap();
    let r = s.finish();
    let t = &r.data.totals;
    let (small, large) = t.ring_bytes.expect("ring sizes");
    assert!(small >= 16 << 10 && large >= small, "{small} {large}");
    assert!(t.ring_resizes.is_some());
    let text = r.text(5);
    assert!(text.contains("rings ") && text.contains("resize"), "{text}");
    // Read back as written; a report without the fields still reads (older files).
    let back = ReportData::from_json(&r.data.json()).unwrap();
    assert_eq!(back.totals.ring_bytes, t.ring_bytes);
}

/// Rings whose budget cannot let them grow: the report says which threads the budget
/// refused, how often, and how long they then waited, and points at the setting.
#[test]
fn the_report_says_who_waited_for_ring_memory() {
    let _g = crate::support::serial();
    let s = cabprof::Session::builder()
        .analyses(&[cabprof::Analysis::MethodCount])
        .pin(false)
        .buffer_bytes(256 << 10)
        .chunk_bytes(4 << 10)
        .ring_memory(256 << 10)
        .start()
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(|| (0..2_000_000u64).fold(0, |a, _| ring_filler(a))))
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let r = s.finish();
    let t = &r.data.totals;
    assert_eq!(t.dropped, 0, "exhaustive: nothing lost");
    let w = t
        .ring_memory_wait
        .as_ref()
        .expect("four threads outpacing one analyzer want more than 256 KiB of rings");
    assert!(
        (1..=4).contains(&w.threads) && w.refusals >= w.threads,
        "{w:?}"
    );
    assert!(w.blocked_s <= t.blocked_s + 1e-9, "{w:?} {}", t.blocked_s);
    let per_thread: u64 = r
        .data
        .threads
        .iter()
        .filter_map(|c| c.ring_memory_wait.as_ref().map(|w| w.refusals))
        .sum();
    assert_eq!(per_thread, w.refusals);
    let text = r.text(5);
    assert!(
        text.contains("refused a larger ring") && text.contains("CABPROF_RING_MEMORY"),
        "{text}"
    );
    // Seconds are written to the nanosecond.
    let back = ReportData::from_json(&r.data.json()).unwrap();
    let b = back.totals.ring_memory_wait.expect("read back");
    assert_eq!((b.threads, b.refusals), (w.threads, w.refusals));
    assert!((b.blocked_s - w.blocked_s).abs() < 1e-9, "{b:?} {w:?}");
}
