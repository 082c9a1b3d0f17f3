//! pprof's `profile.proto`, gzipped: the format of `go tool pprof` and of continuous-profiling
//! backends (Grafana Pyroscope, Parca, Polar Signals).
//!
//! The messages below are the subset of `perftools.profiles` cabprof writes, declared by hand
//! with `prost`'s derive (field numbers as in pprof's `proto/profile.proto`), so building needs
//! no `protoc`.
//!
//! What a profile holds:
//! - **Sample types**: `calls` (count) when calls were counted (call tree, time, method
//!   counts); `wall` (nanoseconds) with the time analysis, each calling context's self time
//!   (so a function's cumulative value is its inclusive time); `alloc_objects` (count) and
//!   `alloc_space` (bytes) with the allocations analysis, the blocks and bytes allocated while
//!   the context was innermost; then `l1_misses`, `l2_misses`, … (count) per simulated cache
//!   level. `calls` is the default when present.
//! - **Stacks**: one sample per calling context, its stack of locations leaf first, with a
//!   value in every column that has the context; so a function's *flat* value is what
//!   happened in it and its *cumulative* value what happened in its whole subtree. The
//!   contexts come from whichever analysis holds them: the call tree, the time analysis, the
//!   allocation analysis (whose contexts are those that allocated); with method counts alone,
//!   one single-frame sample per method. A stack deeper than 64 frames keeps its outermost 24
//!   and innermost 40 frames around a `[deep stack: frames elided]` function, as in the flame
//!   graph, so the profile grows linearly with the number of contexts.
//! - **Misses**: the cache simulator attributes misses to the innermost open function, not to
//!   a calling context, so each function's misses are one single-frame sample (flat = the
//!   function's own misses) labelled `attribution=function`. Misses outside every profiled
//!   function belong to the function `root`.
//! - **Functions**: one per method, with its name, source file and line from the report's
//!   method table; one location per function.
//! - **Session**: the mode and rates as comments (`pprof -comments`), the elapsed time as the
//!   duration. Counts from a sampled session are stored as estimates (analyzed count divided
//!   by the fraction of events analyzed, rounded), pprof's "unsampled form"; exact otherwise.
//! - **Labels**: optional `key=value` labels on every sample (a service and host name for a
//!   continuous-profiling backend).

use crate::model::{FlameStacks, Frame, MethodNames, ReportData, ELIDED_FRAME};
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
    #[prost(int64, tag = "5")]
    start_line: i64,
}

/// The string table: index 0 is `""`, each string stored once.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, text: &str) -> i64 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(text.to_string());
        self.index.insert(text.to_string(), i);
        i
    }
}

/// Builds the profile: strings, and one function and location per method id on first use.
struct Builder<'a> {
    names: MethodNames<'a>,
    strings: Strings,
    /// Method id → location id (= function id).
    locations: HashMap<Frame, u64>,
    profile: Profile,
}

impl Builder<'_> {
    fn location(&mut self, method: u32) -> u64 {
        self.frame(Frame::Method(method))
    }

    /// The location of a frame (the elided middle of a deep stack is a function of its own).
    fn frame(&mut self, frame: Frame) -> u64 {
        if let Some(&id) = self.locations.get(&frame) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        let (entry, name) = match frame {
            Frame::Method(m) => (self.names.entry(m), self.names.name(m)),
            Frame::Elided => (None, ELIDED_FRAME.to_string()),
        };
        let name = self.strings.get(&name);
        let (file, line) = entry.map_or((0, 0), |m| (self.strings.get(&m.file), m.line as i64));
        self.profile.function.push(Function {
            id,
            name,
            system_name: name,
            filename: file,
            start_line: line,
        });
        self.profile.location.push(Location {
            id,
            mapping_id: 1,
            line: vec![Line {
                function_id: id,
                line,
            }],
        });
        self.locations.insert(frame, id);
        id
    }

    fn value_type(&mut self, kind: &str, unit: &str) -> ValueType {
        ValueType {
            r#type: self.strings.get(kind),
            unit: self.strings.get(unit),
        }
    }
}

impl ReportData {
    /// The profile in pprof's format (gzipped `profile.proto`), for `go tool pprof` and
    /// continuous-profiling backends; see `src/report/pprof.rs` for what it holds.
    ///
    /// This and the other `pprof` methods need cabprof's `pprof` feature (off by default: it
    /// builds prost and flate2).
    pub fn pprof(&self) -> Vec<u8> {
        self.pprof_labeled(&[])
    }

    /// [`pprof`](Self::pprof) with `key=value` labels on every sample (for example
    /// `service` and `host`, which continuous-profiling backends group by).
    pub fn pprof_labeled(&self, labels: &[(&str, &str)]) -> Vec<u8> {
        gzip(self.pprof_message(labels, None).encode_to_vec())
    }

    /// What happened between the snapshot `earlier` and this one, of the same session, as a
    /// labelled pprof profile: the counts of this report minus those of `earlier`, and the
    /// time between them as the duration. Snapshots are cumulative; continuous-profiling
    /// backends add up the profiles they receive, so a service uploading one profile per
    /// interval sends these.
    pub fn pprof_since(&self, earlier: &ReportData, labels: &[(&str, &str)]) -> Vec<u8> {
        gzip(self.pprof_message(labels, Some(earlier)).encode_to_vec())
    }

    /// [`pprof_since`](Self::pprof_since) (or with no `earlier`,
    /// [`pprof_labeled`](Self::pprof_labeled)) stamped with the time the profile's window
    /// began, in nanoseconds since the Unix epoch (pprof's `time_nanos`).
    #[cfg(feature = "serve")]
    pub(crate) fn pprof_at(
        &self,
        earlier: Option<&ReportData>,
        labels: &[(&str, &str)],
        time_nanos: i64,
    ) -> Vec<u8> {
        let mut p = self.pprof_message(labels, earlier);
        p.time_nanos = time_nanos;
        gzip(p.encode_to_vec())
    }

    fn pprof_message(&self, labels: &[(&str, &str)], earlier: Option<&ReportData>) -> Profile {
        if let Some(earlier) = earlier {
            return self.since(earlier).pprof_message(labels, None);
        }
        let mut b = Builder {
            names: self.method_names(),
            strings: Strings::new(),
            locations: HashMap::new(),
            profile: Profile::default(),
        };
        let rate = self.estimate_rate();
        let scale = |count: u64| -> i64 {
            if self.is_sampled() {
                (count as f64 / rate).round() as i64
            } else {
                i64::try_from(count).unwrap_or(i64::MAX)
            }
        };
        let labels: Vec<Label> = labels
            .iter()
            .map(|(k, v)| Label {
                key: b.strings.get(k),
                str: b.strings.get(v),
            })
            .collect();

        // One column per sample type, stacks from whichever analysis holds them.
        let mut columns: Vec<(&str, &str, Stacks)> = Vec::new();
        if let Some(calls) = call_counts(self) {
            columns.push(("calls", "count", calls));
        }
        if let Some(t) = &self.time {
            let stacks = FlameStacks::from_nodes(&t.contexts, |c| c.exclusive_ns.round() as u64);
            columns.push(("wall", "nanoseconds", leaf_first(stacks)));
        }
        if let Some(a) = &self.allocations {
            let root = a.root();
            let objects =
                FlameStacks::from_nodes_and_root(&a.contexts, root.allocs, |c| c.counts.allocs);
            let bytes =
                FlameStacks::from_nodes_and_root(&a.contexts, root.bytes, |c| c.counts.bytes);
            columns.push(("alloc_objects", "count", leaf_first(objects)));
            columns.push(("alloc_space", "bytes", leaf_first(bytes)));
        }
        let has_calls = !columns.is_empty();
        let stack_columns = columns.len();
        let levels = self.cache.as_ref().map_or(0, |c| c.levels.len());
        let width = stack_columns + levels;
        for (kind, unit, _) in &columns {
            let t = b.value_type(kind, unit);
            b.profile.sample_type.push(t);
        }
        for k in 0..levels {
            let t = b.value_type(&format!("l{}_misses", k + 1), "count");
            b.profile.sample_type.push(t);
        }
        if let Some((kind, _, _)) = columns.first() {
            b.profile.default_sample_type = b.strings.get(kind);
        }

        // One sample per stack (leaf first), its value in each column that has it.
        let mut samples: BTreeMap<Vec<Frame>, Vec<i64>> = BTreeMap::new();
        for (k, (_, _, stacks)) in columns.into_iter().enumerate() {
            for (stack, count) in stacks {
                samples.entry(stack).or_insert_with(|| vec![0; width])[k] = scale(count);
            }
        }
        for (stack, value) in samples {
            if value.iter().all(|&v| v == 0) {
                continue;
            }
            let location_id = stack.iter().map(|&f| b.frame(f)).collect();
            b.profile.sample.push(Sample {
                location_id,
                value,
                label: labels.clone(),
            });
        }
        let misses = miss_counts(self);

        // Misses: one single-frame sample per function, one value per level.
        if self.cache.is_some() {
            let mut by_method: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
            for ((method, level), count) in misses {
                let slot = stack_columns + level as usize;
                if slot < width {
                    let v = &mut by_method.entry(method).or_insert_with(|| vec![0; width])[slot];
                    *v = v.saturating_add(scale(count));
                }
            }
            let attribution = Label {
                key: b.strings.get("attribution"),
                str: b.strings.get("function"),
            };
            for (method, value) in by_method {
                let location_id = vec![b.location(method)];
                let mut label = labels.clone();
                label.push(attribution.clone());
                b.profile.sample.push(Sample {
                    location_id,
                    value,
                    label,
                });
            }
        }

        let s = &self.session;
        let mut comments = vec![format!(
            "cabprof {} mode={} sampling_rate={} rate_used={} rate_effective={}",
            crate::model::SCHEMA,
            s.mode,
            s.sampling_rate,
            s.rate_used,
            s.rate_effective
        )];
        if self.is_sampled() {
            comments.push(format!(
                "sampled: counts are estimates, analyzed count / {rate} (the fraction of events \
                 analyzed), rounded"
            ));
        } else {
            comments.push("exact: every event was analyzed".into());
        }
        if let Some(cache) = &self.cache {
            for (k, l) in cache.levels.iter().enumerate() {
                comments.push(format!(
                    "l{} simulated: {} B, {} ways, {} B lines, {}",
                    k + 1,
                    l.size_bytes,
                    l.ways,
                    l.line_bytes,
                    l.policy
                ));
            }
        }
        b.profile.comment = comments.iter().map(|c| b.strings.get(c)).collect();
        b.profile.duration_nanos = (s.elapsed_s.max(0.0) * 1e9) as i64;
        if has_calls {
            b.profile.period_type = Some(b.profile.sample_type[0].clone());
            b.profile.period = 1;
        }
        let filename = b.strings.get("cabprof");
        b.profile.mapping.push(Mapping {
            id: 1,
            filename,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
        });
        b.profile.string_table = std::mem::take(&mut b.strings.table);
        b.profile
    }
}

/// Values by stack, leaf first.
type Stacks = BTreeMap<Vec<Frame>, u64>;

fn gzip(bytes: Vec<u8>) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&bytes).expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
}

/// Calls per calling context, the stack leaf first, from the first analysis that has
/// contexts (the call tree, else the time analysis), else per method; `None` when no analysis
/// counted calls. Deep stacks are elided as in flame graphs ([`ReportData::flame_stacks`]), so
/// that the profile grows linearly with the number of contexts.
fn call_counts(data: &ReportData) -> Option<BTreeMap<Vec<Frame>, u64>> {
    if data.call_tree.is_some() {
        return Some(leaf_first(data.flame_stacks()));
    }
    if let Some(t) = &data.time {
        return Some(leaf_first(FlameStacks::from_nodes(&t.contexts, |c| {
            c.calls
        })));
    }
    let counts = data.method_count.as_ref()?;
    let mut out: BTreeMap<Vec<Frame>, u64> = BTreeMap::new();
    for m in counts {
        let c = out.entry(vec![Frame::Method(m.method)]).or_default();
        *c = c.saturating_add(m.count);
    }
    Some(out)
}

/// Flame-graph stacks (outermost first) as pprof's, leaf first.
fn leaf_first(stacks: FlameStacks) -> BTreeMap<Vec<Frame>, u64> {
    let mut out: BTreeMap<Vec<Frame>, u64> = BTreeMap::new();
    for (mut stack, count) in stacks.stacks {
        stack.reverse();
        let c = out.entry(stack).or_default();
        *c = c.saturating_add(count);
    }
    out
}

/// Misses per (method, level).
fn miss_counts(data: &ReportData) -> BTreeMap<(u32, u32), u64> {
    let mut out = BTreeMap::new();
    if let Some(cache) = &data.cache {
        for e in &cache.by_method {
            let c: &mut u64 = out.entry((e.method, e.level)).or_default();
            *c = c
                .saturating_add(e.load_misses)
                .saturating_add(e.store_misses);
        }
    }
    out
}
