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
//!   the context was innermost, and `inuse_objects` and `inuse_space`, those of them not
//!   freed at the end (blocks matched to their frees by address); then `l1_misses`, `l2_misses`, … (count) per simulated cache
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

use super::leaf_stacks::{method_tree, LeafStacks, NodeTree, Samples};
use crate::model::{Frame, MethodNames, ReportData, WaitProfile, ELIDED_FRAME};
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
        self.pprof_encoded(labels, None, 0)
    }

    /// What happened between the snapshot `earlier` and this one, of the same session, as a
    /// labelled pprof profile: the counts of this report minus those of `earlier`, and the
    /// time between them as the duration. Snapshots are cumulative; continuous-profiling
    /// backends add up the profiles they receive, so a service uploading one profile per
    /// interval sends these.
    pub fn pprof_since(&self, earlier: &ReportData, labels: &[(&str, &str)]) -> Vec<u8> {
        self.pprof_encoded(labels, Some(earlier), 0)
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
        self.pprof_encoded(labels, earlier, time_nanos)
    }

    /// The allocations alone, as Go's `/debug/pprof/allocs` and `/debug/pprof/heap` serve
    /// them: `alloc_objects`, `alloc_space`, and where live blocks were matched
    /// `inuse_objects` and `inuse_space`, per calling context, `default` the default sample
    /// type (`alloc_space` for `allocs`, `inuse_space` for `heap`, as Go's); `None` without
    /// the allocations analysis.
    #[cfg(feature = "serve")]
    pub(crate) fn pprof_allocations(
        &self,
        labels: &[(&str, &str)],
        time_nanos: i64,
        default: &str,
    ) -> Option<Vec<u8>> {
        self.allocations.as_ref()?;
        let only = ReportData {
            method_count: None,
            call_tree: None,
            time: None,
            cache: None,
            ..self.clone()
        };
        Some(only.pprof_default(labels, None, time_nanos, Some(default), None))
    }

    /// The waits as Go's `mutex` or `block` profile (`/debug/pprof/mutex`, `/debug/pprof/block`):
    /// `contentions` (count) and `delay` (nanoseconds) per calling context, `delay` the
    /// default. The block profile's contexts are the waiters' (lock waits, blocked sends and
    /// receives), the mutex profile's the holders' at a contended release, each hold's delay
    /// once per waiter. `None` without the waits analysis.
    pub fn pprof_waits(&self, profile: WaitProfile, labels: &[(&str, &str)]) -> Option<Vec<u8>> {
        self.waits.as_ref()?;
        Some(self.pprof_default(labels, None, 0, Some("delay"), Some(profile)))
    }

    /// [`pprof_waits`](Self::pprof_waits) of the window since `earlier` (or the whole session),
    /// stamped with `time_nanos`.
    #[cfg(feature = "serve")]
    pub(crate) fn pprof_waits_at(
        &self,
        profile: WaitProfile,
        earlier: Option<&ReportData>,
        labels: &[(&str, &str)],
        time_nanos: i64,
    ) -> Option<Vec<u8>> {
        self.waits.as_ref()?;
        Some(self.pprof_default(labels, earlier, time_nanos, Some("delay"), Some(profile)))
    }

    /// The gzipped profile. Its samples, one per stack, are the bulk: rather than a message
    /// holding them all, they are walked twice in the columns' merged order, once to number
    /// the locations (and strings) they use in the order of first use, once to encode each
    /// straight into the gzip stream between the fields before and after them. A message
    /// field's entries may be written apart like this: the encoding is the same.
    fn pprof_encoded(
        &self,
        labels: &[(&str, &str)],
        earlier: Option<&ReportData>,
        time_nanos: i64,
    ) -> Vec<u8> {
        self.pprof_default(labels, earlier, time_nanos, None, None)
    }

    /// [`pprof_encoded`](Self::pprof_encoded) with `default` as the default sample type
    /// (`None`: the first column's).
    ///
    /// Long, on purpose: the columns borrow the context trees made at its top, and one walk
    /// over them numbers the locations that the streaming encoding at its end then writes,
    /// so the phases share those borrows rather than passing them through helpers.
    fn pprof_default(
        &self,
        labels: &[(&str, &str)],
        earlier: Option<&ReportData>,
        time_nanos: i64,
        default: Option<&str>,
        waits: Option<WaitProfile>,
    ) -> Vec<u8> {
        if let Some(earlier) = earlier {
            return self
                .since(earlier)
                .pprof_default(labels, None, time_nanos, default, waits);
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

        // One column per sample type, stacks from whichever analysis holds them: calls from
        // the call tree, else the time analysis, else one single-frame stack per method.
        let call_tree = self
            .call_tree
            .as_ref()
            .map(|ct| NodeTree::new(&ct.contexts));
        let time_tree = self.time.as_ref().map(|t| NodeTree::new(&t.contexts));
        let alloc_tree = self
            .allocations
            .as_ref()
            .map(|a| NodeTree::new(&a.contexts));
        let methods = match (&self.call_tree, &self.time) {
            (None, None) => method_tree(self),
            _ => None,
        };
        let wait_tree = match (waits, &self.waits) {
            (Some(_), Some(w)) => Some(NodeTree::new(&w.contexts)),
            _ => None,
        };
        let mut columns: Vec<(&str, &str, LeafStacks<'_>)> = Vec::new();
        // A wait profile holds its two columns, as Go's, and nothing else.
        if let (Some(profile), Some(w), Some(tree)) = (waits, &self.waits, &wait_tree) {
            let root = w.root.of(profile);
            let count = LeafStacks::new(tree, root.count, move |i| {
                w.contexts[i].counts.of(profile).count
            });
            columns.push(("contentions", "count", count));
            let delay =
                LeafStacks::new(tree, root.ns, move |i| w.contexts[i].counts.of(profile).ns);
            columns.push(("delay", "nanoseconds", delay));
        } else if waits.is_some() {
            // A wait profile of a report without waits: no column.
        } else if let (Some(ct), Some(tree)) = (&self.call_tree, &call_tree) {
            let calls = LeafStacks::new(tree, 0, |i| ct.contexts[i].count);
            columns.push(("calls", "count", calls));
        } else if let (Some(t), Some(tree)) = (&self.time, &time_tree) {
            let calls = LeafStacks::new(tree, 0, |i| t.contexts[i].calls);
            columns.push(("calls", "count", calls));
        } else if let Some((tree, counts)) = &methods {
            columns.push(("calls", "count", LeafStacks::unshifted(tree, counts)));
        }
        if let (None, Some(t), Some(tree)) = (waits, &self.time, &time_tree) {
            let wall = LeafStacks::new(tree, 0, |i| t.contexts[i].exclusive_ns.round() as u64);
            columns.push(("wall", "nanoseconds", wall));
        }
        if let (None, Some(a), Some(tree)) = (waits, &self.allocations, &alloc_tree) {
            let root = a.root();
            let objects = LeafStacks::new(tree, root.allocs, |i| a.contexts[i].counts.allocs);
            columns.push(("alloc_objects", "count", objects));
            let bytes = LeafStacks::new(tree, root.bytes, |i| a.contexts[i].counts.bytes);
            columns.push(("alloc_space", "bytes", bytes));
            // Live blocks where the report has them (matched by address).
            if let Some(root) = a.root_live {
                let live = |i: usize| a.contexts[i].live.unwrap_or_default();
                let objects = LeafStacks::new(tree, root.blocks, move |i| live(i).blocks);
                columns.push(("inuse_objects", "count", objects));
                let bytes = LeafStacks::new(tree, root.bytes, move |i| live(i).bytes);
                columns.push(("inuse_space", "bytes", bytes));
            }
        }
        let has_calls = !columns.is_empty();
        let stack_columns = columns.len();
        let levels = match waits {
            Some(_) => 0,
            None => self.cache.as_ref().map_or(0, |c| c.levels.len()),
        };
        let width = stack_columns + levels;
        for (kind, unit, _) in &columns {
            let t = b.value_type(kind, unit);
            b.profile.sample_type.push(t);
        }
        for k in 0..levels {
            let t = b.value_type(&format!("l{}_misses", k + 1), "count");
            b.profile.sample_type.push(t);
        }
        let chosen = default.filter(|d| columns.iter().any(|(kind, _, _)| kind == d));
        if let Some(kind) = chosen.or(columns.first().map(|(kind, _, _)| *kind)) {
            b.profile.default_sample_type = b.strings.get(kind);
        }

        // One sample per stack (leaf first), its value in each column that has it; those
        // with no value are left out. This walk numbers their locations.
        let columns: Vec<LeafStacks<'_>> = columns.into_iter().map(|(_, _, s)| s).collect();
        let samples = Samples::new(&columns, width);
        samples.for_each(&scale, |col, i, value| {
            if value.iter().any(|&v| v != 0) {
                for f in columns[col].frames(i) {
                    b.frame(f);
                }
            }
        });
        let misses = miss_counts(self);

        // Misses: one single-frame sample per function, one value per level.
        let mut miss_samples = Vec::new();
        if self.cache.is_some() && waits.is_none() {
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
                miss_samples.push(Sample {
                    location_id,
                    value,
                    label,
                });
            }
        }

        let comments = self.pprof_comments(rate);
        b.profile.comment = comments.iter().map(|c| b.strings.get(c)).collect();
        b.profile.duration_nanos = (self.session.elapsed_s.max(0.0) * 1e9) as i64;
        b.profile.time_nanos = time_nanos;
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

        // The encoding: the sample types (field 1), each sample (field 2), the rest.
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        let mut piece = Vec::new();
        let head = Profile {
            sample_type: std::mem::take(&mut b.profile.sample_type),
            ..Profile::default()
        };
        let mut put = |message: &Profile, piece: &mut Vec<u8>| {
            piece.clear();
            message.encode(piece).expect("a Vec grows as needed");
            gz.write_all(piece).expect("writing to a Vec cannot fail");
        };
        put(&head, &mut piece);
        let mut one = Profile {
            sample: vec![Sample {
                location_id: Vec::new(),
                value: Vec::new(),
                label: labels.clone(),
            }],
            ..Profile::default()
        };
        samples.for_each(&scale, |col, i, value| {
            if value.iter().all(|&v| v == 0) {
                return;
            }
            let sample = &mut one.sample[0];
            sample.location_id.clear();
            sample
                .location_id
                .extend(columns[col].frames(i).map(|f| b.locations[&f]));
            sample.value.clear();
            sample.value.extend_from_slice(value);
            put(&one, &mut piece);
        });
        for sample in miss_samples {
            one.sample[0] = sample;
            put(&one, &mut piece);
        }
        put(&b.profile, &mut piece);
        gz.finish().expect("writing to a Vec cannot fail")
    }

    /// The profile's comments: the session's mode and rates, exact or estimated, the
    /// simulated caches.
    fn pprof_comments(&self, rate: f64) -> Vec<String> {
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
        comments
    }
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
