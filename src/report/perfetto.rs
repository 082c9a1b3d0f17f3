//! The timeline as a Perfetto trace: protobuf `TracePacket`s (Perfetto's `trace.proto`) that
//! the Perfetto UI and `trace_processor` open.
//!
//! One sequence: a packet declaring the process's track, one per thread declaring its track
//! (a child of the process's, with the thread's name), one holding the interned slice names
//! (`InternedData.event_names`: functions, `cabprof`, waits by kind and site), then a `TrackEvent` per slice
//! start (`TYPE_SLICE_BEGIN`, the name by its interned id) and end (`TYPE_SLICE_END`), every
//! track declared before its first event; a future's polls carry its task id as a flow id
//! (`TrackEvent.flow_ids`), which ties them. Timestamps are nanoseconds from the timeline's
//! origin, in order over the whole file; on each track a slice's end comes before the next
//! slice at its depth or above begins, so begins and ends pair as the calls nest. Written by
//! hand (a few varints and lengths): no protobuf crate is needed for so few fields.

use super::chrome_trace::slice_label;
use super::ReportData;
use crate::model::TimelineSlice;

// Field numbers of Perfetto's protos (protos/perfetto/trace/...).
const TRACE_PACKET: u32 = 1;
const PACKET_TIMESTAMP: u32 = 8;
const PACKET_SEQUENCE_ID: u32 = 10;
const PACKET_TRACK_EVENT: u32 = 11;
const PACKET_INTERNED_DATA: u32 = 12;
const PACKET_SEQUENCE_FLAGS: u32 = 13;
const PACKET_TRACK_DESCRIPTOR: u32 = 60;
const TRACK_UUID: u32 = 1;
const TRACK_NAME: u32 = 2;
const TRACK_PROCESS: u32 = 3;
const TRACK_THREAD: u32 = 4;
const TRACK_PARENT_UUID: u32 = 5;
const PROCESS_PID: u32 = 1;
const PROCESS_NAME: u32 = 6;
const THREAD_PID: u32 = 1;
const THREAD_TID: u32 = 2;
const THREAD_NAME: u32 = 5;
const EVENT_TYPE: u32 = 9;
const EVENT_NAME_IID: u32 = 10;
const EVENT_TRACK_UUID: u32 = 11;
const EVENT_FLOW_IDS: u32 = 47;
const INTERNED_EVENT_NAMES: u32 = 2;
const EVENT_NAME_IID_FIELD: u32 = 1;
const EVENT_NAME_NAME: u32 = 2;
const SLICE_BEGIN: u64 = 1;
const SLICE_END: u64 = 2;
/// `SEQ_INCREMENTAL_STATE_CLEARED`, and `SEQ_NEEDS_INCREMENTAL_STATE` (interned names).
const STATE_CLEARED: u64 = 1;
const NEEDS_STATE: u64 = 2;
const SEQUENCE: u64 = 1;
const PID: u64 = 1;
const PROCESS_TRACK: u64 = 1;

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    /// A `fixed64` field.
    fn fixed64(&mut self, field: u32, v: u64) -> &mut Self {
        self.varint(u64::from(field) << 3 | 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        self.varint(u64::from(field) << 3);
        self.varint(v);
        self
    }

    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.varint(u64::from(field) << 3 | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn message(&mut self, field: u32, m: Message) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

fn message(f: impl FnOnce(&mut Message)) -> Message {
    let mut m = Message::default();
    f(&mut m);
    m
}

impl ReportData {
    /// The timeline as a Perfetto protobuf trace; `None` if the report has no timeline. See
    /// `src/report/perfetto.rs` for what it holds.
    pub fn perfetto_trace(&self) -> Option<Vec<u8>> {
        let t = self.timeline.as_ref()?;
        let names = self.method_names();
        let mut trace = Message::default();
        let mut packet = |p: Message| {
            trace.message(TRACE_PACKET, p);
        };
        packet(message(|p| {
            p.uint(PACKET_SEQUENCE_ID, SEQUENCE).message(
                PACKET_TRACK_DESCRIPTOR,
                message(|d| {
                    d.uint(TRACK_UUID, PROCESS_TRACK).message(
                        TRACK_PROCESS,
                        message(|pr| {
                            pr.uint(PROCESS_PID, PID).bytes(PROCESS_NAME, b"cabprof");
                        }),
                    );
                }),
            );
        }));
        for (i, th) in t.threads.iter().enumerate() {
            packet(message(|p| {
                p.uint(PACKET_SEQUENCE_ID, SEQUENCE).message(
                    PACKET_TRACK_DESCRIPTOR,
                    message(|d| {
                        d.uint(TRACK_UUID, PROCESS_TRACK + 1 + i as u64)
                            .uint(TRACK_PARENT_UUID, PROCESS_TRACK)
                            .bytes(TRACK_NAME, th.thread.as_bytes())
                            .message(
                                TRACK_THREAD,
                                message(|td| {
                                    td.uint(THREAD_PID, PID)
                                        .uint(THREAD_TID, i as u64 + 1)
                                        .bytes(THREAD_NAME, th.thread.as_bytes());
                                }),
                            );
                    }),
                );
            }));
        }
        // Every slice name interned once (functions, `cabprof`, waits), ids from 1 in name
        // order.
        let labels: std::collections::BTreeMap<String, u64> = t
            .threads
            .iter()
            .flat_map(|th| th.slices.iter().map(|s| slice_label(&names, s)))
            .collect::<std::collections::BTreeSet<String>>()
            .into_iter()
            .zip(1..)
            .collect();
        packet(message(|p| {
            p.uint(PACKET_SEQUENCE_ID, SEQUENCE)
                .uint(PACKET_SEQUENCE_FLAGS, STATE_CLEARED)
                .message(
                    PACKET_INTERNED_DATA,
                    message(|d| {
                        for (label, &iid) in &labels {
                            d.message(
                                INTERNED_EVENT_NAMES,
                                message(|e| {
                                    e.uint(EVENT_NAME_IID_FIELD, iid)
                                        .bytes(EVENT_NAME_NAME, label.as_bytes());
                                }),
                            );
                        }
                    }),
                );
        }));
        // Each track's begins and ends in nesting order, then all merged by time (a stable
        // sort keeps each track's order among equal times).
        let mut events: Vec<(u64, u64, u64, u64, Option<u32>)> = Vec::new();
        for (i, th) in t.threads.iter().enumerate() {
            let iid = |s: &TimelineSlice| labels[&slice_label(&names, s)];
            track_events(&th.slices, PROCESS_TRACK + 1 + i as u64, iid, &mut events);
        }
        events.sort_by_key(|e| e.0);
        for (ts, kind, track, iid, task) in events {
            packet(message(|p| {
                p.uint(PACKET_TIMESTAMP, ts)
                    .uint(PACKET_SEQUENCE_ID, SEQUENCE)
                    .uint(PACKET_SEQUENCE_FLAGS, NEEDS_STATE)
                    .message(
                        PACKET_TRACK_EVENT,
                        message(|e| {
                            e.uint(EVENT_TYPE, kind).uint(EVENT_TRACK_UUID, track);
                            if kind == SLICE_BEGIN {
                                e.uint(EVENT_NAME_IID, iid);
                                // A future's polls share a flow: its task id + 1 (0 is
                                // no flow to some readers).
                                if let Some(task) = task {
                                    e.fixed64(EVENT_FLOW_IDS, u64::from(task) + 1);
                                }
                            }
                        }),
                    );
            }));
        }
        Some(trace.0)
    }
}

/// One track's slices as (time, begin or end, track, interned name, a poll's task), in
/// nesting order: a slice begins after every slice at its depth or deeper has ended.
fn track_events(
    slices: &[TimelineSlice],
    track: u64,
    iid: impl Fn(&TimelineSlice) -> u64,
    out: &mut Vec<(u64, u64, u64, u64, Option<u32>)>,
) {
    let mut sorted: Vec<&TimelineSlice> = slices.iter().collect();
    sorted.sort_by(|a, b| {
        a.start_ns
            .total_cmp(&b.start_ns)
            .then(a.depth.cmp(&b.depth))
    });
    // Open slices: (end, depth, interned name).
    let mut open: Vec<(u64, u32, u64)> = Vec::new();
    for s in sorted {
        let start = s.start_ns.max(0.0).round() as u64;
        let end = ((s.start_ns + s.duration_ns).max(0.0).round() as u64).max(start);
        while let Some(&(e, d, m)) = open.last() {
            if d < s.depth && e > start {
                break;
            }
            // Never before the last time written on this track.
            let at = e.max(out.last().filter(|x| x.2 == track).map_or(0, |x| x.0));
            out.push((at, SLICE_END, track, m, None));
            open.pop();
        }
        let at = start.max(out.last().filter(|x| x.2 == track).map_or(0, |x| x.0));
        // Inside its parent: no later than the parent's end.
        let end = match open.last() {
            Some(&(pe, _, _)) => end.min(pe).max(at),
            None => end.max(at),
        };
        out.push((at, SLICE_BEGIN, track, iid(s), s.task.filter(|_| s.poll)));
        open.push((end, s.depth, iid(s)));
    }
    while let Some((e, _, m)) = open.pop() {
        let at = e.max(out.last().filter(|x| x.2 == track).map_or(0, |x| x.0));
        out.push((at, SLICE_END, track, m, None));
    }
}
