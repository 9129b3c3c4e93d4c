#!/usr/bin/python3
"""Checks that two fsdp-run --metrics-json files report bit-identical losses
for the steps they share (a resumed run against an uninterrupted one)."""
import sys

from torch_reference import read_steps

full, resumed = read_steps(sys.argv[1]), read_steps(sys.argv[2])
shared = sorted(set(full) & set(resumed))
if not shared or len(shared) != len(resumed):
    sys.exit("the resumed run's steps %s are not all in the full run's %s" % (sorted(resumed), sorted(full)))
different = [s for s in shared if full[s] != resumed[s]]
for s in shared:
    print("step %d: %.9g %.9g%s" % (s, full[s], resumed[s], "  <-- differs" if s in different else ""))
print("RESULT:", "FAIL" if different else "PASS (%d steps identical)" % len(shared))
sys.exit(1 if different else 0)
