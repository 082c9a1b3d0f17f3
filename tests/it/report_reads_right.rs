//! What the reports say, checked against hand counts: flame graphs total the calls they
//! show, "top N" tables hold the N largest, sampled counts carry their estimate, the header
//! describes the session as it ran, and trait methods read one way.

use cabprof::report::{CallTreeData, MethodEntry, PathEntry};
use cabprof::{profile, Analysis, ReportData, RunMode, Session};
use cabprof_cab::runtime::emit;
use cabprof_cab::{Event, MethodId};

use crate::support::SERIAL;

fn m(id: u32) -> MethodId {
    MethodId::new(id).unwrap()
}

fn call(caller: u32, callee: u32) {
    emit(Event::call(m_or_root(caller), m(callee)));
    emit(Event::ret(m(callee)));
}

fn m_or_root(id: u32) -> MethodId {
    if id == 0 {
        MethodId::ROOT
    } else {
        m(id)
    }
}

/// A hand-made report: `main` (1) calls `work` (2) 3 times, `work` calls `leaf` (3) 5 times
/// in all; `leaf` has two profiled paths. 9 calls in all.
fn hand_report() -> ReportData {
    let method = |id: u32, name: &str| MethodEntry {
        id,
        name: name.into(),
        module: "app".into(),
        file: "src/main.rs".into(),
        line: id,
    };
    let path = |path: u32, count: u64| PathEntry {
        method: 3,
        path,
        count,
        steps: None,
        estimated: None,
    };
    ReportData {
        schema: cabprof::report::SCHEMA.into(),
        methods: vec![method(1, "main"), method(2, "work"), method(3, "leaf")],
        call_tree: Some(CallTreeData {
            approximate: false,
            patterns: Vec::new(),
            contexts: CallTreeData::contexts_from_stacks([
                (&[1][..], 1),
                (&[1, 2][..], 3),
                (&[1, 2, 3][..], 5),
            ]),
            overlong: None,
        }),
        paths: Some(vec![path(0, 4), path(1, 1)]),
        ..ReportData::default()
    }
}

/// The width of each frame (the folded lines whose stacks pass through it).
fn frame_widths(folded: &str) -> Vec<(String, u64)> {
    let mut widths: Vec<(String, u64)> = Vec::new();
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("`stack count`");
        let count: u64 = count.parse().expect("a count");
        let frames: Vec<&str> = stack.split(';').collect();
        for depth in 1..=frames.len() {
            let prefix = frames[..depth].join(";");
            match widths.iter_mut().find(|(p, _)| *p == prefix) {
                Some((_, w)) => *w += count,
                None => widths.push((prefix, count)),
            }
        }
    }
    widths
}

/// Regression: path lines (`root;leaf;path#N`) were root-level frames: `leaf` appeared as
/// root's child and the total grew by the path counts.
#[test]
fn flame_graph_totals_are_the_calls_it_shows() {
    let d = hand_report();
    let widths = frame_widths(&d.folded());
    let width = |p: &str| widths.iter().find(|(q, _)| q == p).map(|(_, w)| *w);
    assert_eq!(width("root"), Some(9), "9 calls in all");
    assert_eq!(width("root;main"), Some(9));
    assert_eq!(width("root;main;work"), Some(8));
    assert_eq!(width("root;main;work;leaf"), Some(5));
    assert_eq!(width("root;leaf"), None, "leaf is never called from root");
    let roots: Vec<_> = widths
        .iter()
        .filter(|(p, _)| p.matches(';').count() == 1)
        .collect();
    assert_eq!(roots.len(), 1, "root's only child is main: {roots:?}");
    #[cfg(feature = "flamegraph")]
    assert!(d.svg().contains("9 calls"), "the SVG's total is 9 calls");
}

/// Regression: edges were sorted by id, so "top N" showed small edges and dropped large ones;
/// "top 60 of 3" now reads "all 3".
#[test]
fn top_n_tables_hold_the_largest_counts() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallGraph])
        .pin(false)
        .start()
        .unwrap();
    // Edge (1 -> 2) has the smallest ids and the fewest calls.
    for (callee, n) in [(2, 1), (3, 7), (4, 51), (5, 6)] {
        for _ in 0..n {
            call(1, callee);
        }
    }
    let d = session.finish().data;
    let edges = d.call_graph.as_ref().unwrap();
    let counts: Vec<u64> = edges.iter().map(|e| e.count).collect();
    assert_eq!(counts, [51, 7, 6, 1], "most calls first");
    let text = d.text(2);
    let section = text
        .split("call graph edges")
        .nth(1)
        .expect("a call-graph section");
    assert!(section.starts_with(" (top 2 of 4):"), "{section}");
    // (Ids may name functions another test registered: compare by the report's names.)
    let edge = |a: u32, b: u32| format!("{} -> {}\n", d.name(a), d.name(b));
    assert!(section.contains(&edge(1, 4)), "{section}");
    assert!(!section.contains(&edge(1, 2)), "{section}");
    assert!(d.text(60).contains("call graph edges (all 4):"));
    assert!(!d.text(60).contains("top 60"));
}

#[profile]
fn short_name() -> u64 {
    std::hint::black_box(1)
}

#[profile]
fn a_function_whose_name_is_longer_than_the_forty_columns_it_was_given() -> u64 {
    std::hint::black_box(2)
}

/// Regression: the method table's name column was 40 characters wide, so a longer name pushed
/// its location out of line with the others.
#[test]
fn method_locations_line_up_whatever_the_names() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .pin(false)
        .start()
        .unwrap();
    for _ in 0..3 {
        short_name();
    }
    a_function_whose_name_is_longer_than_the_forty_columns_it_was_given();
    let text = session.finish().data.text(10);
    let section = text
        .split("calls per function")
        .nth(1)
        .expect("a method section");
    let column = |needle: &str| {
        let line = section
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {section}"));
        line.find("tests/it/report_reads_right.rs")
            .unwrap_or_else(|| panic!("a location in {line}"))
    };
    assert_eq!(
        column("short_name"),
        column("longer_than_the_forty"),
        "{section}"
    );
}

/// Regression: sampled counts were raw samples in the JSON, the header spoke of "rate used"
/// while dividing by the fraction analyzed. Now each count has its estimate next to it; the
/// events emitted are exact for threads that have exited.
#[test]
fn sampled_reports_carry_estimates_and_exact_totals() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const PER_THREAD: u64 = 250_000;
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount])
        .sampling(0.25)
        .buffer_bytes(64 << 10)
        .chunk_bytes(4 << 10)
        .pin(false)
        .start()
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..PER_THREAD / 2 {
                    call(0, 7);
                }
            });
        }
    });
    let d = session.finish().data;
    assert_eq!(
        d.totals.events,
        4 * PER_THREAD,
        "every event emitted, counted"
    );
    let mc = d.method_count.as_ref().unwrap();
    let e = mc.iter().find(|e| e.method == 7).expect("method 7 sampled");
    let rate = d.estimate_rate();
    assert!(rate > 0.0 && rate < 1.0, "a sample: {rate}");
    assert_eq!(e.estimated, Some((e.count as f64 / rate).round() as u64));
    let json = d.json();
    assert!(
        json.contains("\"estimated\""),
        "the JSON names the estimate"
    );
    let text = d.text(5);
    assert!(
        text.contains("count in the sample / fraction of events analyzed"),
        "{text}"
    );
    // Old files (no `estimated`) still read.
    let old = json.replace(&format!(",\"estimated\":{}", e.estimated.unwrap()), "");
    let back = ReportData::from_json(&old).expect("a file without estimates reads");
    assert_eq!(back.method_count.unwrap()[0].count, mc[0].count);
}

/// Regression: a sequential report printed a ring size it never used.
#[test]
fn sequential_reports_print_no_ring() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = Session::builder()
        .mode(RunMode::Sequential)
        .analyses(&[Analysis::MethodCount])
        .start()
        .unwrap();
    call(0, 7);
    let d = session.finish().data;
    let text = d.text(5);
    let header = text.lines().next().unwrap();
    assert!(!header.contains("KB"), "{header}");
    assert!(header.contains("no ring"), "{header}");
    assert_eq!(d.session.buffer_bytes, 0);
    assert!(
        text.ends_with('\n') && !text.ends_with("\n\n"),
        "one trailing newline"
    );
}

/// Regression: deep contexts that differ only in their middle frames printed as identical rows.
#[test]
fn elided_contexts_stay_distinguishable() {
    let mut d = hand_report();
    let ct = d.call_tree.as_mut().unwrap();
    ct.contexts = CallTreeData::contexts_from_stacks([
        (&[1, 2, 2, 3, 2, 2, 2, 3][..], 2),
        (&[1, 2, 3, 2, 2, 2, 2, 3][..], 1),
    ]);
    let text = d.text(10);
    let rows: Vec<&str> = text
        .split("calling contexts")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take(2)
        .map(|l| l.trim_start().split_once("  ").unwrap().1)
        .collect();
    assert_ne!(rows[0], rows[1], "{rows:?}");
}

struct Shown(u8);

#[profile]
impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

// `all`: an empty `drop` is small enough to be left alone otherwise.
#[profile(all)]
impl Drop for Shown {
    fn drop(&mut self) {}
}

/// Regression: names mixed `<impl Display for T>::fmt` and `<T as Drop>::drop`, and the SVG
/// showed `_as_`.
#[test]
fn trait_methods_read_one_way() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let session = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::CallTree])
        .pin(false)
        .start()
        .unwrap();
    let _ = Shown(3).to_string();
    let d = session.finish().data;
    let names: Vec<&str> = d.methods.iter().map(|m| m.name.as_str()).collect();
    assert!(names.contains(&"<Shown as Display>::fmt"), "{names:?}");
    assert!(names.contains(&"<Shown as Drop>::drop"), "{names:?}");
    #[cfg(feature = "flamegraph")]
    {
        let svg = d.svg();
        assert!(!svg.contains("_as_"), "the SVG keeps the spaces");
        assert!(svg.contains("&lt;Shown as Display&gt;::fmt"));
    }
}
