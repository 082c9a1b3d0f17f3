//! pprof's `profile.proto`, gzipped: the format of `go tool pprof` and of continuous-profiling
//! backends (Grafana Pyroscope, Parca, Polar Signals).
//!
//! The messages below are the subset of `perftools.profiles` cabprof writes, declared by hand
//! with `prost`'s derive (field numbers as in pprof's `proto/profile.proto`), so building needs
//! no `protoc`.
//!
//! What a profile holds:
//! - **Sample types**: `calls` (count) when calls were counted (calling contexts or method
//!   counts), then `l1_misses`, `l2_misses`, … (count) per simulated cache level.
//! - **Calls**: one sample per calling context, its stack of locations leaf first, valued with
//!   the calls made in exactly that context; so a function's *flat* value is its calls and its
//!   *cumulative* value the calls made in its whole subtree. Without the calling-context tree,
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

use crate::model::{Frame, MethodNames, ReportData, ELIDED_FRAME};
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

    fn pprof_message(&self, labels: &[(&str, &str)], earlier: Option<&ReportData>) -> Profile {
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

        let has_calls = self.call_tree.is_some() || self.method_count.is_some();
        let levels = self.cache.as_ref().map_or(0, |c| c.levels.len());
        let width = has_calls as usize + levels;
        if has_calls {
            let t = b.value_type("calls", "count");
            b.profile.sample_type.push(t);
        }
        for k in 0..levels {
            let t = b.value_type(&format!("l{}_misses", k + 1), "count");
            b.profile.sample_type.push(t);
        }
        if has_calls {
            b.profile.default_sample_type = b.strings.get("calls");
        }

        // Calls: one sample per calling context (leaf first), or per method.
        let mut call_samples = call_counts(self);
        let mut misses = miss_counts(self);
        if let Some(earlier) = earlier {
            for (stack, count) in call_counts(earlier) {
                if let Some(c) = call_samples.get_mut(&stack) {
                    *c = c.saturating_sub(count);
                }
            }
            for (key, count) in miss_counts(earlier) {
                if let Some(c) = misses.get_mut(&key) {
                    *c = c.saturating_sub(count);
                }
            }
            call_samples.retain(|_, c| *c > 0);
            misses.retain(|_, c| *c > 0);
        }
        for (stack, count) in call_samples {
            let location_id = stack.iter().map(|&f| b.frame(f)).collect();
            let mut value = vec![0; width];
            value[0] = scale(count);
            b.profile.sample.push(Sample {
                location_id,
                value,
                label: labels.clone(),
            });
        }

        // Misses: one single-frame sample per function, one value per level.
        if self.cache.is_some() {
            let mut by_method: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
            for ((method, level), count) in misses {
                let slot = has_calls as usize + level as usize;
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
        let since = earlier.map_or(0.0, |e| e.session.elapsed_s);
        b.profile.duration_nanos = ((s.elapsed_s - since).max(0.0) * 1e9) as i64;
        if has_calls {
            b.profile.period_type = Some(b.value_type("calls", "count"));
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

fn gzip(bytes: Vec<u8>) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&bytes).expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
}

/// Calls per calling context, the stack leaf first (per method without the context tree).
/// Deep stacks are elided as in flame graphs ([`ReportData::flame_stacks`]), so that the
/// profile grows linearly with the number of contexts.
fn call_counts(data: &ReportData) -> BTreeMap<Vec<Frame>, u64> {
    let mut out: BTreeMap<Vec<Frame>, u64> = BTreeMap::new();
    if data.call_tree.is_some() {
        for (mut stack, count) in data.flame_stacks().stacks {
            stack.reverse();
            let c = out.entry(stack).or_default();
            *c = c.saturating_add(count);
        }
    } else if let Some(counts) = &data.method_count {
        for m in counts {
            let c = out.entry(vec![Frame::Method(m.method)]).or_default();
            *c = c.saturating_add(m.count);
        }
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
