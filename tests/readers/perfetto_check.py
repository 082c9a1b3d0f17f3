"""Decode a Perfetto trace with Perfetto's own schema (PyPI `perfetto`), check it, and print
its slices as JSON: per thread track its name and slices (name, ts and dur in microseconds,
parent's index, flow ids).

Checks: every track is declared before an event uses it; begins and ends balance on every
track; timestamps never go back; every name resolves through the interned names.

python3 perfetto_check.py TRACE.pftrace
"""
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

tracks = {}  # uuid -> thread name (or None for the process)
names = {}
open_slices = {}  # uuid -> stack of indices into slices
slices = {}  # uuid -> list of slices
last_ts = 0
for packet in trace.packet:
    if packet.HasField("track_descriptor"):
        d = packet.track_descriptor
        tracks[d.uuid] = d.thread.thread_name if d.HasField("thread") else None
        continue
    if packet.HasField("interned_data"):
        for e in packet.interned_data.event_names:
            names[e.iid] = e.name
    if not packet.HasField("track_event"):
        continue
    e = packet.track_event
    assert e.track_uuid in tracks, f"track {e.track_uuid} used before it is declared"
    assert packet.timestamp >= last_ts, f"time goes back: {packet.timestamp} < {last_ts}"
    last_ts = packet.timestamp
    stack = open_slices.setdefault(e.track_uuid, [])
    mine = slices.setdefault(e.track_uuid, [])
    if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        assert e.name_iid in names, f"name {e.name_iid} not interned"
        mine.append({
            "name": names[e.name_iid],
            "ts": packet.timestamp / 1e3,
            "dur": None,
            "parent": stack[-1] if stack else None,
            "flows": list(e.flow_ids),
        })
        stack.append(len(mine) - 1)
    elif e.type == pb.TrackEvent.TYPE_SLICE_END:
        assert stack, f"an end with no open slice on track {e.track_uuid}"
        s = mine[stack.pop()]
        s["dur"] = packet.timestamp / 1e3 - s["ts"]
    else:
        raise AssertionError(f"unexpected event type {e.type}")
for uuid, stack in open_slices.items():
    assert not stack, f"{len(stack)} slices left open on track {uuid}"
out = [{"name": tracks[u], "slices": s} for u, s in slices.items()]
print(json.dumps(out))
