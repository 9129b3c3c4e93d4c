#!/usr/bin/python3
"""Sharded saves survive kill -9 at any point: trains a plan on N ranks with
a sharded checkpoint after every step (--save-every 1 --keep-last 3
--resume auto), and SIGKILLs the whole launch at a random moment, ROUNDS
times; most kills land inside a save (the saves are most of a step). After
every kill, the next run must resume from the newest complete checkpoint,
and every step any run completes must have the loss of an uninterrupted
run, bit for bit: a checkpoint that mixed two saves, or lost a file, would
change them. The last run finishes the schedule.

  kill_saves.py PLAN --work DIR [--ranks N] [--rounds R] [--steps S] [--seed X]

Needs fsdp-run and mpirun on PATH, /usr/bin/python3 with numpy.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import time

from kill_resume import MPIRUN, kill_launch
from torch_reference import read_steps


def complete_checkpoints(ckpt):
    if not os.path.isdir(ckpt):
        return []
    return sorted(int(d[5:]) for d in os.listdir(ckpt)
                  if d.startswith("step-") and os.path.exists(os.path.join(ckpt, d, "manifest.json")))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plan")
    parser.add_argument("--work", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    for stale in ("full-ckpt", "ckpt"):  # --resume auto would pick up an old run's checkpoints
        shutil.rmtree(os.path.join(args.work, stale), ignore_errors=True)
    rng = random.Random(args.seed)
    launch = MPIRUN + ["-np", str(args.ranks)]

    def command(ckpt, metrics):
        return launch + ["fsdp-run", args.plan, "--max-steps", str(args.steps), "--save-sharded", ckpt,
                         "--save-every", "1", "--keep-last", "3", "--resume", "auto", "--log-every", "1",
                         "--metrics-json", metrics]

    full = subprocess.run(command(os.path.join(args.work, "full-ckpt"), os.path.join(args.work, "full.jsonl")),
                          capture_output=True, text=True)
    if full.returncode != 0:
        sys.exit("the uninterrupted run failed:\n" + full.stdout[-2000:] + full.stderr[-2000:])
    want = read_steps(os.path.join(args.work, "full.jsonl"))

    ckpt = os.path.join(args.work, "ckpt")
    failures, kills, resumed_from, checked = 0, 0, [], 0
    for round in range(args.rounds + 1):
        metrics = os.path.join(args.work, "run-%d.jsonl" % round)
        before = complete_checkpoints(ckpt)
        run = subprocess.Popen(command(ckpt, metrics), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
        if round < args.rounds:
            # Wait for the first step line, then kill at a random moment of
            # the next few steps (each a step and a save).
            for line in run.stdout:
                if line.startswith("step "):
                    break
            time.sleep(rng.uniform(0.0, 0.3))
            kill_launch(run.pid)
            run.wait()
            kills += 1
        else:
            output = run.communicate()[0]
            if run.returncode != 0:
                print("the last run failed:\n" + output[-2000:])
                failures += 1
        # Where this run started: the newest complete checkpoint before it.
        resumed_from.append(before[-1] if before else 0)
        if os.path.exists(metrics):
            got = {}
            try:
                got = read_steps(metrics)
            except ValueError:  # a line cut short by the kill
                lines = open(metrics).read().splitlines()[:-1]
                open(metrics, "w").write("\n".join(lines) + "\n")
                got = read_steps(metrics)
            for step, loss in got.items():
                checked += 1
                if want.get(step) != loss:
                    print("round %d: step %d has loss %r, the uninterrupted run %r" % (round, step, loss, want.get(step)))
                    failures += 1
    after = complete_checkpoints(ckpt)
    print("%d kills; runs resumed after steps %s" % (kills, resumed_from))
    print("every completed step (%d of them over all runs) has the uninterrupted run's loss: %s"
          % (checked, "yes" if failures == 0 else "NO"))
    if not after or after[-1] != args.steps:
        print("the last run did not finish: complete checkpoints %s" % after)
        failures += 1
    else:
        print("the last run finished step %d; complete checkpoints %s" % (args.steps, after))
    leftovers = [f for d, _, files in os.walk(ckpt) for f in files if ".tmp." in f]
    print("temporary files left: %d" % len(leftovers))
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
