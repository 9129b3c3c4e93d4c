#!/usr/bin/python3
"""Checks that two fsdp-run --metrics-json files report the same losses for
the steps they share: bit-identical (a resumed run against an uninterrupted
one), or with --rtol R within R relative (two ways of computing one step).

  compare_losses.py FULL.jsonl OTHER.jsonl [--rtol R]
"""
import argparse
import sys

from torch_reference import read_steps

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("full")
parser.add_argument("other")
parser.add_argument("--rtol", type=float, default=0.0)
args = parser.parse_args()
full, other = read_steps(args.full), read_steps(args.other)
shared = sorted(set(full) & set(other))
if not shared or len(shared) != len(other):
    sys.exit("the second run's steps %s are not all in the first run's %s" % (sorted(other), sorted(full)))


def differs(step):
    if args.rtol == 0:
        return full[step] != other[step]
    return not abs(full[step] - other[step]) <= args.rtol * max(abs(full[step]), 1e-12)


different = [s for s in shared if differs(s)]
for s in shared:
    print("step %d: %.9g %.9g%s" % (s, full[s], other[s], "  <-- differs" if s in different else ""))
if args.rtol == 0:
    print("RESULT:", "FAIL" if different else "PASS (%d steps identical)" % len(shared))
else:
    worst = max(abs(full[s] - other[s]) / max(abs(full[s]), 1e-12) for s in shared)
    print("worst relative difference %.2e (<= %g)" % (worst, args.rtol))
    print("RESULT:", "FAIL" if different else "PASS (%d steps within %g)" % (len(shared), args.rtol))
sys.exit(1 if different else 0)
