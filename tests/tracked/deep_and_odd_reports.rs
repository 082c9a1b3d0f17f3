//! Reports that stay bounded and readable on inputs at the edges: a 100,000-deep recursion
//! that allocates at every level, with the call-tree, time and allocation analyses (contexts
//! are nodes, not copied stacks; deep flame-graph stacks are elided), counts of
//! `u64::MAX` read from a file (sums do not wrap), and method names holding the folded
//! format's separators (escaped).

use crate::deep;
use cabprof::report::{
    context_depths, folded_frame, AllocCountsEntry, CacheData, CallTreeData, LevelEntry,
    MethodCountEntry, MethodEntry, Weight, ELIDED_FRAME,
};
use cabprof::ReportData;

/// A figure of `/proc/self/status` in bytes: `VmHWM` (the peak resident set) or `VmRSS`.
fn status(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

fn peak_rss() -> u64 {
    status("VmHWM:")
}

/// Reset the peak to the current resident set (Linux's `clear_refs` 5); returns the current
/// resident set.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    status("VmRSS:")
}

/// What [`deep_recursion`] measured.
struct Deep {
    /// How far the peak RSS rose above the resident set right after the recursion returned,
    /// through `finish()` and every format written (each output dropped once checked).
    peak: u64,
    /// The same, after the JSON file was read back too (its text and the report it makes).
    peak_read_back: u64,
    /// Bytes of the JSON report.
    json: usize,
}

/// Profile a `depth`-deep recursion (call tree, call graph, time, allocations) on a thread with a stack
/// big enough for it, render every format, and check what they say; returns the JSON's size
/// and how far the peak RSS rose above the resident set right after the recursion returned
/// (whose deep stack, in a debug build, is itself tens of megabytes): the memory of
/// `finish()` and of the reports.
fn deep_recursion(depth: u32) -> Deep {
    let _g = crate::serial();
    let run = move || {
        let session = deep::session();
        assert_eq!(deep::recurse(depth), depth as u64);
        let base = reset_peak();
        (base, session.finish().data)
    };
    let (base, d) = std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
    eprintln!(
        "{depth}-deep recursion: {} MB resident after it, peak {} MB after finish()",
        base >> 20,
        peak_rss() >> 20
    );
    let ct = d.call_tree.as_ref().unwrap();
    assert_eq!(ct.contexts.len(), depth as usize, "one context per depth");
    let parents = ct.parent_indices();
    assert_eq!(
        CallTreeData::depths(&parents).iter().max(),
        Some(&(depth as usize))
    );

    let t = d.time.as_ref().unwrap();
    assert_eq!(
        t.contexts.len(),
        depth as usize,
        "one time context per depth"
    );
    assert_eq!(
        context_depths(&t.parent_indices()).iter().max(),
        Some(&(depth as usize))
    );
    assert!(t.contexts.iter().all(|c| c.calls == 1 && c.timed == 1));

    // One allocation context per depth, each with its one block made and freed.
    let a = d.allocations.as_ref().unwrap();
    let block = AllocCountsEntry {
        allocs: 1,
        bytes: 4,
        reallocs: 0,
        frees: 1,
        freed_bytes: 4,
    };
    assert_eq!(
        a.contexts.len(),
        depth as usize,
        "one allocation context per depth"
    );
    assert!(a.contexts.iter().all(|c| c.calls == 1 && c.counts == block));
    assert_eq!(
        context_depths(&a.parent_indices()).iter().max(),
        Some(&(depth as usize))
    );
    let f = a.functions.iter().find(|f| f.method != 0).unwrap();
    assert_eq!(
        (f.self_.allocs, f.inclusive.allocs),
        (depth as u64, depth as u64),
        "the recursion's blocks count once inclusively"
    );

    // Every context has one call: rows in context order, the deepest last.
    let top = if depth <= 10_000 { usize::MAX } else { 5 };
    let text = d.text(top);
    let (calls_part, time_part) = text.split_once("\ntime ").unwrap();
    let (time_part, alloc_part) = time_part.split_once("\nallocations").unwrap();
    let name = d.name(ct.contexts[0].method);
    if top > 5 {
        let row = calls_part.lines().rfind(|l| l.contains("(depth ")).unwrap();
        assert!(
            row.ends_with(&format!(
                "frames… > {name} > {name} > {name} (depth {depth})"
            )),
            "{row}"
        );
    } else {
        assert!(calls_part.contains(&format!("calling contexts (top 5 of {depth})")));
        assert!(time_part.contains(&format!("time by calling context (top 5 of {depth})")));
    }
    // The time rows: the outermost context has the most inclusive time; a deep one is elided.
    let time_rows: Vec<&str> = time_part
        .lines()
        .filter(|l| l.contains("(depth "))
        .collect();
    assert_eq!(time_rows.len(), depth.min(top as u32) as usize);
    assert!(
        time_rows[0].ends_with(&format!("  {name} (depth 1)")),
        "{}",
        time_rows[0]
    );
    if top > 5 {
        assert!(
            time_rows
                .iter()
                .any(|r| r.contains(&format!("frames… > {name} > {name} > {name} (depth "))),
            "deep time rows are elided"
        );
    }
    // The allocation rows: one per context (every one allocated the same) and the root's
    // (the test harness's threads may allocate meanwhile), bounded.
    let alloc_rows: Vec<&str> = alloc_part
        .lines()
        .filter(|l| l.contains("(depth "))
        .collect();
    let root_row = alloc_part.lines().any(|l| l.ends_with("  root")) as usize;
    let rows = depth as usize + (a.root() != AllocCountsEntry::default()) as usize;
    assert_eq!(alloc_rows.len() + root_row, rows.min(top));
    if top > 5 {
        assert!(
            alloc_rows.iter().any(|r| r.contains(&format!(
                "frames… > {name} > {name} > {name} (depth {depth})"
            ))),
            "deep allocation rows are elided"
        );
    }
    assert!(text.lines().all(|l| l.len() < 400), "bounded rows");
    // Each output is dropped once checked, as a program writing it to a file would.
    drop(text);

    let folded = d.folded();
    let mut total = 0;
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        total += count.parse::<u64>().unwrap();
        assert!(
            stack.split(';').count() <= 1 + 65,
            "at most 65 frames below root"
        );
    }
    assert_eq!(total, depth as u64, "every call is in the flame graph");
    assert!(folded.contains(ELIDED_FRAME), "deep stacks are elided");
    assert!(
        folded.len() < 100_000,
        "folded output of {} bytes",
        folded.len()
    );
    drop(folded);

    // Weighted by time: the same bounds; the widths are the self times, which add up to
    // the outermost call's inclusive time.
    let folded = d.folded_by(Weight::Time);
    let mut total_ns = 0u64;
    for line in folded.lines() {
        let (stack, ns) = line.rsplit_once(' ').unwrap();
        total_ns += ns.parse::<u64>().unwrap();
        assert!(stack.split(';').count() <= 1 + 65);
    }
    assert!(folded.contains(ELIDED_FRAME), "deep time stacks are elided");
    assert!(
        folded.len() < 100_000,
        "time-weighted folded output of {} bytes",
        folded.len()
    );
    let outermost = t.contexts.iter().find(|c| c.parent == 0).unwrap();
    let rounding = depth as f64;
    assert!(
        (total_ns as f64 - outermost.inclusive_ns).abs()
            <= rounding + 1e-6 * outermost.inclusive_ns,
        "{total_ns} ns drawn, {} ns inclusive",
        outermost.inclusive_ns
    );
    #[cfg(feature = "flamegraph")]
    {
        let svg = d.svg_by(Weight::Time);
        assert!(svg.contains("ns") && svg.len() < 2_000_000);
    }
    drop(folded);

    // Weighted by bytes allocated: the same bounds; the widths add up to every block's
    // bytes and what the root (the test harness's other threads) allocated meanwhile.
    let folded = d.folded_by(Weight::AllocBytes);
    let mut total_bytes = 0u64;
    for line in folded.lines() {
        let (stack, bytes) = line.rsplit_once(' ').unwrap();
        total_bytes += bytes.parse::<u64>().unwrap();
        assert!(stack.split(';').count() <= 1 + 65);
    }
    assert!(
        folded.contains(ELIDED_FRAME),
        "deep allocation stacks are elided"
    );
    assert_eq!(total_bytes, 4 * depth as u64 + a.root().bytes);
    assert!(
        folded.len() < 100_000,
        "bytes-weighted folded output of {} bytes",
        folded.len()
    );
    #[cfg(feature = "flamegraph")]
    {
        let svg = d.svg_by(Weight::AllocBytes);
        assert!(svg.contains("bytes") && svg.len() < 2_000_000);
    }
    drop(folded);

    #[cfg(feature = "flamegraph")]
    {
        let svg = d.svg();
        // inferno groups digits by thousands.
        let grouped = format!("{},{:03} calls", depth / 1000, depth % 1000);
        assert!(svg.contains(&grouped), "the SVG totals every call");
        assert!(svg.len() < 2_000_000);
    }
    #[cfg(feature = "pprof")]
    {
        let pprof = d.pprof();
        assert!(pprof.len() < 1_000_000);
    }
    let callgrind = d.callgrind();
    // The recursive edge's inclusive calls: every call below the outermost `recurse`, once.
    assert!(
        callgrind.contains(&format!("calls={} ", depth - 1)),
        "{callgrind}"
    );
    assert!(callgrind.len() < 10_000);
    drop(callgrind);

    // The JSON report, written to a file as `Session::finish_and_write` writes it.
    let path =
        std::env::temp_dir().join(format!("cabprof-deep-{}-{depth}.json", std::process::id()));
    d.write_json(std::fs::File::create(&path).unwrap()).unwrap();
    let peak = peak_rss();
    eprintln!("peak {} MB after every format", peak >> 20);
    let json = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        json.len() < 800 * depth as usize,
        "JSON of {} bytes",
        json.len()
    );
    // Reading it back needs its text and the report it makes: not part of the figure.
    let back = ReportData::from_json(&json).unwrap();
    let json = json.len();
    assert_eq!(back.call_tree, d.call_tree, "the JSON reads back");
    assert_eq!(back.allocations, d.allocations);
    let bt = back.time.as_ref().unwrap();
    assert_eq!(bt.contexts.len(), t.contexts.len());
    for (x, y) in bt.contexts.iter().zip(&t.contexts) {
        // The JSON library's float text round-trips to within an ulp or so.
        assert_eq!(
            (x.id, x.parent, x.method, x.calls, x.timed),
            (y.id, y.parent, y.method, y.calls, y.timed)
        );
        assert!((x.inclusive_ns - y.inclusive_ns).abs() <= 1e-9 * y.inclusive_ns);
    }
    let peak_read_back = peak_rss();
    eprintln!(
        "peak {} MB after reading the JSON back",
        peak_read_back >> 20
    );
    Deep {
        peak: peak.saturating_sub(base),
        peak_read_back: peak_read_back.saturating_sub(base),
        json,
    }
}

/// A 10,000-deep recursion: copying each context's stack (the call tree's, then the time
/// analysis') made 50 million stack entries (200 MB) at `finish()`.
#[test]
fn deep_recursion_stays_small() {
    let peak = deep_recursion(10_000).peak;
    assert!(
        peak < 100 << 20,
        "finish() and the reports took {} MB",
        peak >> 20
    );
}

/// Twice as deep, twice the report: the JSON grows with the number of contexts, not with the
/// sum of their depths (which quadruples).
#[test]
fn report_grows_linearly_with_depth() {
    let (one, two) = (deep_recursion(1_000).json, deep_recursion(2_000).json);
    let ratio = two as f64 / one as f64;
    assert!(
        ratio < 2.5,
        "JSON of {one} bytes at depth 1,000, {two} at 2,000 (×{ratio:.2})"
    );
}

/// The 100,000-deep case (run it with `--ignored`; prints the peak RSS): 30 to 35 MB in
/// release and debug builds alike. The JSON text alone is 56 MB: written to its file
/// through `write_json`, it is never held whole until it is read back (the read-back check
/// holds it, the report it makes and the report: printed, not part of the bound). The
/// figures are the process' RSS: run it alone (`--ignored`), not beside the other tests.
#[test]
#[ignore = "heavy: 100,000-deep recursion"]
fn deeper_recursion_stays_small() {
    let start = std::time::Instant::now();
    let deep = deep_recursion(100_000);
    eprintln!(
        "100,000-deep recursion: finish() and the reports took {} MB ({} MB with the JSON \
         read back), {:.2} s",
        deep.peak >> 20,
        deep.peak_read_back >> 20,
        start.elapsed().as_secs_f64()
    );
    assert!(
        deep.peak < 70 << 20,
        "finish() and the reports took {} MB",
        deep.peak >> 20
    );
}

fn method(id: u32, name: &str) -> MethodEntry {
    MethodEntry {
        id,
        name: name.into(),
        module: "app".into(),
        file: "src/main.rs".into(),
        line: id,
    }
}

/// Regression: a crafted report with `u64::MAX` counts wrapped (release) or panicked (debug)
/// in the table and the flame graph.
#[test]
fn counts_of_u64_max_do_not_wrap() {
    let max = u64::MAX;
    let d = ReportData {
        schema: cabprof::report::SCHEMA.into(),
        methods: vec![method(1, "main"), method(2, "work")],
        method_count: Some(vec![
            MethodCountEntry {
                method: 1,
                count: max,
                estimated: None,
            },
            MethodCountEntry {
                method: 2,
                count: max,
                estimated: None,
            },
        ]),
        call_tree: Some(CallTreeData {
            approximate: false,
            patterns: Vec::new(),
            contexts: CallTreeData::contexts_from_stacks([
                (&[1][..], max),
                (&[1, 2][..], max),
                (&[2][..], max),
            ]),
            overlong: None,
        }),
        cache: Some(CacheData {
            levels: vec![LevelEntry {
                size_bytes: 32 << 10,
                ways: 8,
                line_bytes: 64,
                policy: "lru".into(),
                load_hits: max,
                load_misses: max,
                store_hits: max,
                store_misses: max,
            }],
            by_method: Vec::new(),
        }),
        ..ReportData::default()
    };
    let d = ReportData::from_json(&d.json()).unwrap();
    let text = d.text(10);
    let four = 4 * (max as u128);
    assert!(
        text.contains(&format!("{four} accesses, miss rate 50.00%")),
        "{text}"
    );
    let two = 2 * (max as u128);
    assert!(text.contains(&format!("loads {max}/{two} miss")), "{text}");
    assert_eq!(
        text.matches(" 50.00%  ").count(),
        2,
        "each method is half: {text}"
    );

    // Three counts of 2^64 - 1 do not add up in a u64: scaled by 2^2 (their sum is < 2^66).
    let flame = d.flame_stacks();
    assert_eq!(flame.shift, 2);
    let folded = d.folded();
    let counts: Vec<u64> = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(counts, vec![max >> 2; 3], "{folded}");
    assert!(counts
        .iter()
        .try_fold(0u64, |a, &c| a.checked_add(c))
        .is_some());
    #[cfg(feature = "flamegraph")]
    assert!(
        d.svg().contains("divided by 2^2"),
        "the SVG says it is scaled"
    );
    #[cfg(feature = "pprof")]
    assert!(!d.pprof().is_empty());
    assert!(d.callgrind().contains(&format!("totals: {max}")));
}

/// Regression: a name with `;` or a line break split the folded line into frames or lines,
/// and the SVG drew other frames than the report has.
#[test]
fn names_with_separators_are_escaped() {
    let names = [
        "a;b",
        "line\nbreak",
        "tab\there",
        "ends with 12",
        "back\\slash",
        "<T as Display>::fmt",
    ];
    // Listed out of id order: lookups must not depend on it.
    let methods: Vec<MethodEntry> = names
        .iter()
        .enumerate()
        .rev()
        .map(|(i, n)| method(i as u32 + 1, n))
        .collect();
    let stacks: Vec<Vec<u32>> = (1..=names.len() as u32).map(|m| vec![m]).collect();
    let d = ReportData {
        schema: cabprof::report::SCHEMA.into(),
        methods,
        call_tree: Some(CallTreeData {
            approximate: false,
            patterns: Vec::new(),
            contexts: CallTreeData::contexts_from_stacks(
                stacks.iter().zip(1..).map(|(s, c)| (&s[..], c)),
            ),
            overlong: None,
        }),
        ..ReportData::default()
    };
    let lookup = d.method_names();
    for (i, n) in names.iter().enumerate() {
        assert_eq!(d.name(i as u32 + 1), *n);
        assert_eq!(lookup.name(i as u32 + 1), *n);
    }
    assert_eq!(lookup.name(99), "function#99");

    let folded = d.folded();
    assert_eq!(folded.lines().count(), names.len(), "{folded}");
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        count.parse::<u64>().unwrap();
        assert_eq!(stack.split(';').count(), 2, "root and one frame: {line}");
        // inferno reads a second number before the count as a differential count.
        let before = stack.rsplit_once(' ').map_or("", |(_, t)| t);
        assert!(before.parse::<f64>().is_err(), "{line}");
    }
    assert_eq!(folded_frame("a;b"), "a\\u{3b}b");
    assert_eq!(folded_frame("line\nbreak"), "line\\nbreak");
    assert_eq!(folded_frame("ends with 12"), "ends with\\u{20}12");
    assert_eq!(folded_frame("<T as Display>::fmt"), "<T as Display>::fmt");
    #[cfg(feature = "flamegraph")]
    {
        let svg = d.svg();
        assert!(svg.contains("21 calls"), "inferno read every line");
        assert!(svg.contains("line\\nbreak"));
        assert!(svg.contains("&lt;T as Display&gt;::fmt"));
    }
}

/// The start of a report file written before contexts were nodes (and before
/// `rate_effective` and `events_in_flight`): the session, the counters and methods `main` (1),
/// `work` (2) and `leaf` (3). The analyses' fields follow.
const OLD_REPORT_START: &str = r#"{"schema":"cabprof-report/1",
      "session":{"mode":"exhaustive","sampling_rate":1.0,"rate_used":1.0,"buffer_bytes":0,
                 "chunk_bytes":0,"elapsed_s":0.5},
      "totals":{"thread":"(all)","threads":1,"events":18,"analyzed":18,"producer_blocks":0,
                "blocked_s":0.0,"dropped":0,"chunks_lapped":0,"events_lapped":0,"rate":1.0},
      "threads":[],"analyzer_failures":[],"unmerged_threads":0,
      "methods":[{"id":2,"name":"work","module":"app","file":"a.rs","line":2},
                 {"id":1,"name":"main","module":"app","file":"a.rs","line":1},
                 {"id":3,"name":"leaf","module":"app","file":"a.rs","line":3}],
      "paths":null,"cache":null,"reuse_distance":null,"#;

/// Files written before contexts were nodes list whole stacks: they read into nodes.
#[test]
fn reports_with_whole_stacks_still_read() {
    let old = format!(
        r#"{OLD_REPORT_START}
      "method_count":null,"call_graph":null,
      "call_tree":{{"approximate":false,"patterns":[],
                   "contexts":[{{"stack":[1,2,2],"count":5,"estimated":null}},
                               {{"stack":[1],"count":1,"estimated":null}},
                               {{"stack":[1,2],"count":3,"estimated":null}}]}}}}"#
    );
    let d = ReportData::from_json(&old).unwrap();
    let ct = d.call_tree.as_ref().unwrap();
    let mut stacks = ct.stacks();
    stacks.sort();
    assert_eq!(
        stacks,
        vec![(vec![1], 1), (vec![1, 2], 3), (vec![1, 2, 2], 5)]
    );
    assert_eq!(
        d.folded(),
        "root;main 1\nroot;main;work 3\nroot;main;work;work 5\n"
    );
    // A node whose parent is not an earlier context is refused.
    let bad = d.json().replace("\"parent\": 0", "\"parent\": 7");
    assert!(ReportData::from_json(&bad).is_err());
}

/// Files written before time contexts were nodes list whole stacks: they read into nodes (a
/// prefix no entry lists gets zeros), and render as before.
#[test]
fn time_reports_with_whole_stacks_still_read() {
    let old = format!(
        r#"{OLD_REPORT_START}
      "method_count":null,"call_graph":null,"call_tree":null,
      "time":{{"clock":"rdtsc","ticks_per_ns":1.0,"calibration":"test","sample_period":1,
              "approximate":false,"functions":[],"edges":[],
              "contexts":[
                {{"stack":[1],"calls":1,"timed":1,"inclusive_ns":100.0,"exclusive_ns":40.0}},
                {{"stack":[1,2],"calls":3,"timed":3,"inclusive_ns":60.0,"exclusive_ns":50.0}},
                {{"stack":[1,2,2,3],"calls":2,"timed":2,"inclusive_ns":10.0,"exclusive_ns":10.0}}]}}}}"#
    );
    let d = ReportData::from_json(&old).unwrap();
    let t = d.time.as_ref().unwrap();
    let parents = t.parent_indices();
    let mut nodes: Vec<(Vec<u32>, u64, u64, f64, f64)> = (0..t.contexts.len())
        .map(|i| {
            let c = &t.contexts[i];
            (
                cabprof::report::context_stack(&t.contexts, &parents, i),
                c.calls,
                c.timed,
                c.inclusive_ns,
                c.exclusive_ns,
            )
        })
        .collect();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        nodes,
        vec![
            (vec![1], 1, 1, 100.0, 40.0),
            (vec![1, 2], 3, 3, 60.0, 50.0),
            (vec![1, 2, 2], 0, 0, 0.0, 0.0),
            (vec![1, 2, 2, 3], 2, 2, 10.0, 10.0),
        ]
    );
    assert_eq!(
        d.folded_by(Weight::Time),
        "root;main 40\nroot;main;work 50\nroot;main;work;work;leaf 10\n"
    );
    assert!(d.text(10).contains("main > work > work > leaf (depth 4)"));
    // Written again, it is nodes; a node whose parent is not an earlier context is refused.
    let again = d.json();
    assert!(!again.contains("\"stack\""));
    assert_eq!(ReportData::from_json(&again).unwrap(), d);
    let bad = again.replace("\"parent\": 0", "\"parent\": 9");
    assert!(ReportData::from_json(&bad).is_err());
    // An old entry without its numbers is not a report.
    let missing = old.replace("\"calls\":3,", "");
    assert!(ReportData::from_json(&missing).is_err());
}

/// Files written before allocation contexts were nodes list whole stacks, the root's own
/// counts as an empty one: they read into nodes (a prefix no entry lists gets zeros; the
/// root's counts are method 0's self counts), and render as before.
#[test]
fn allocation_reports_with_whole_stacks_still_read() {
    let counts = |allocs: u64, bytes: u64| {
        format!(r#"{{"allocs":{allocs},"bytes":{bytes},"reallocs":0,"frees":0,"freed_bytes":0}}"#)
    };
    let (c0, c1, c2, c3) = (counts(1, 8), counts(1, 100), counts(2, 48), counts(3, 156));
    let old = format!(
        r#"{OLD_REPORT_START}
      "method_count":null,"call_graph":null,"call_tree":null,
      "allocations":{{"approximate":false,"tracked":true,"totals":{c3},"live_bytes":0,
        "peak_bytes":156,"runtime":{c0},
        "functions":[{{"method":0,"self":{c0},"inclusive":{c3}}},
                     {{"method":1,"self":{c1},"inclusive":{c3}}},
                     {{"method":3,"self":{c2},"inclusive":{c2}}}],
        "contexts":[{{"stack":[1],"calls":1,"counts":{c1}}},
                    {{"stack":[1,2,3],"calls":2,"counts":{c2}}},
                    {{"stack":[],"calls":0,"counts":{c0}}}]}}}}"#
    );
    let d = ReportData::from_json(&old).unwrap();
    let a = d.allocations.as_ref().unwrap();
    let parents = a.parent_indices();
    let mut nodes: Vec<(Vec<u32>, u64, u64, u64)> = (0..a.contexts.len())
        .map(|i| {
            let c = &a.contexts[i];
            (
                cabprof::report::context_stack(&a.contexts, &parents, i),
                c.calls,
                c.counts.allocs,
                c.counts.bytes,
            )
        })
        .collect();
    nodes.sort();
    assert_eq!(
        nodes,
        vec![
            (vec![1], 1, 1, 100),
            (vec![1, 2], 0, 0, 0),
            (vec![1, 2, 3], 2, 2, 48)
        ]
    );
    assert_eq!((a.root().allocs, a.root().bytes), (1, 8));
    assert_eq!(
        d.folded_by(Weight::AllocBytes),
        "root 8\nroot;main 100\nroot;main;work;leaf 48\n"
    );
    let text = d.text(10);
    assert!(text.contains("main > work > leaf (depth 3)"), "{text}");
    assert!(text.contains("by calling context (all 3)"), "{text}");
    // Written again, it is nodes; a node whose parent is not an earlier context is refused.
    let again = d.json();
    assert!(!again.contains("\"stack\""));
    assert_eq!(ReportData::from_json(&again).unwrap(), d);
    let bad = again.replace("\"parent\": 0", "\"parent\": 9");
    assert!(ReportData::from_json(&bad).is_err());
    // An old entry without its counts is not a report.
    let missing = old.replace(&format!(r#""calls":2,"counts":{c2}"#), r#""calls":2"#);
    assert_ne!(missing, old);
    assert!(ReportData::from_json(&missing).is_err());
}
