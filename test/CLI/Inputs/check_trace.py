#!/usr/bin/python3
"""Checks an fsdp-run --trace file against its run: the JSON loads; each of
the N ranks has a compute and a communication track; every step has the
same slices on every rank (one per plan instruction); collectives lie on
the communication track with a unit and their bytes; on each track, slices
follow one another in time (a stream runs one instruction at a time); and
each metrics line has an exposed_comm_ms between 0 and its step_ms.

  check_trace.py TRACE.json METRICS.jsonl RANKS STEPS
"""
import collections
import json
import sys

trace_path, metrics_path, ranks, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
events = json.load(open(trace_path))["traceEvents"]
problems = []

tracks = collections.defaultdict(set)
for e in events:
    if e["ph"] == "M" and e["name"] == "thread_name":
        tracks[e["pid"]].add((e["tid"], e["args"]["name"]))
for rank in range(ranks):
    if tracks[rank] != {(0, "compute"), (1, "communication")}:
        problems.append("rank %d has tracks %s" % (rank, sorted(tracks[rank])))

slices = [e for e in events if e["ph"] in ("X", "i")]
per_step = collections.Counter((e["pid"], e["args"]["step"]) for e in slices)
counts = set(per_step.values())
if sorted(per_step) != [(r, s) for r in range(ranks) for s in range(steps)] or len(counts) != 1:
    problems.append("slices per (rank, step): %s" % dict(per_step))
collectives = [e for e in slices if e["name"] in ("all_gather", "reduce_scatter", "all_reduce")]
if not collectives:
    problems.append("no collectives in the trace")
for e in collectives:
    if e["tid"] != 1 or e["cat"] != "communication" or "unit" not in e["args"] or e["args"]["bytes"] <= 0:
        problems.append("collective slice off its track or without unit and bytes: %s" % e)
        break
by_track = collections.defaultdict(list)
for e in slices:
    if e["ph"] == "X":
        by_track[(e["pid"], e["tid"])].append(e)
for track, items in by_track.items():
    items.sort(key=lambda e: (e["args"]["step"], e["ts"]))
    for a, b in zip(items, items[1:]):
        if b["ts"] + 1e-3 < a["ts"] + a["dur"]:
            problems.append("overlapping slices on rank %d track %d: %s then %s" % (track[0], track[1], a, b))
            break

metrics = [json.loads(line) for line in open(metrics_path)]
steps_seen = [m for m in metrics if "loss" in m]
if len(steps_seen) != steps or not all(0 <= m["exposed_comm_ms"] <= m["step_ms"] for m in steps_seen):
    problems.append("exposed_comm_ms missing or outside [0, step_ms]: %s" % steps_seen)

print("%d ranks, %d steps, %d slices per rank and step, %d collectives" % (
    ranks, steps, counts.pop() if len(counts) == 1 else -1, len(collectives)))
for p in problems:
    print("problem:", p)
print("RESULT:", "FAIL" if problems else "PASS")
sys.exit(1 if problems else 0)
