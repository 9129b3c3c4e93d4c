#!/usr/bin/python3
"""Runs the end-to-end torch comparisons several times and prints, for each
kind of check, the worst figure seen against its limit.

It runs the `%python` RUN lines of each test in test/e2e (the same commands
lit runs, without the FileCheck pipes) and collects the `headroom CHECK:
worst X, limit Y` lines the comparison scripts print. A check whose worst
figure comes within 2x of its limit is flagged: rounding that lands
differently on another processor could fail it.

    PATH=build/bin:$PATH /usr/bin/python3 test/e2e/headroom.py --runs 3

Needs what the e2e tests need: /usr/bin/python3 (torch, onnx, numpy), and
fsdpc, fsdp-run and mpirun on PATH.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
# The scripts that print headroom lines; tests without one (resume.test:
# bit-identical or not) have nothing to measure.
COMPARISONS = ("compare_with_torch.py", "sharded_equality.py", "gpt_vs_torch.py", "gradient_check.py")
HEADROOM_LINE = re.compile(r"^headroom (.+): worst (\S+), limit ([^ ]+) ")


def python_run_lines(test_file):
    """The test's RUN lines that call a Python script, with lit's
    substitutions left in, and the FileCheck pipe removed."""
    lines = []
    for line in open(test_file):
        match = re.match(r"\s*RUN:\s*(%python .*)$", line)
        if match:
            lines.append(match.group(1).split(" | FileCheck")[0].strip())
    return lines


def substitute(command, temp):
    for key, value in (("%python", "/usr/bin/python3"), ("%fsdpc_src", ROOT), ("%S", HERE), ("%t", temp)):
        command = command.replace(key, value)
    return command


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tests", default="*.test", help="glob of test files in test/e2e")
    args = parser.parse_args()

    worst = {}  # (test, check) -> (ratio, value, limit)
    for run in range(args.runs):
        for test_file in sorted(glob.glob(os.path.join(HERE, args.tests))):
            test = os.path.basename(test_file)
            if not any(script in open(test_file).read() for script in COMPARISONS):
                continue
            temp = tempfile.mkdtemp(prefix="headroom-")
            try:
                for command in python_run_lines(test_file):
                    result = subprocess.run(substitute(command, temp), shell=True, capture_output=True, text=True)
                    if result.returncode != 0:
                        sys.exit("run %d, %s: failed: %s\n%s%s" % (run + 1, test, command, result.stdout,
                                                                   result.stderr))
                    for line in result.stdout.splitlines():
                        match = HEADROOM_LINE.match(line)
                        if match:
                            check, value, limit = match.group(1), float(match.group(2)), float(match.group(3))
                            ratio = value / limit
                            key = (test, check)
                            if key not in worst or ratio > worst[key][0]:
                                worst[key] = (ratio, value, limit)
            finally:
                shutil.rmtree(temp, ignore_errors=True)
        print("run %d of %d done" % (run + 1, args.runs), file=sys.stderr)

    print("%-22s %-24s %-10s %-10s %s" % ("test", "check", "worst", "limit", "headroom"))
    tight = 0
    for (test, check), (ratio, value, limit) in sorted(worst.items()):
        flag = "  <-- within 2x" if ratio > 0.5 else ""
        tight += bool(flag)
        print("%-22s %-24s %-10.2e %-10.2e %s%s" % (test, check, value, limit,
                                                    "%.1fx" % (1 / ratio) if ratio > 0 else "exact", flag))
    print("%d checks over %d runs, %d within 2x of their limit" % (len(worst), args.runs, tight))


if __name__ == "__main__":
    main()
