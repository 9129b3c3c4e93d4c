#!/usr/bin/python3
"""Periodic checkpoints survive kill -9: trains a plan for --max-steps 50 on
N ranks with --save-every 10 --keep-last 2, kills the whole launch with
SIGKILL while step 37 runs, and runs the same command again with --resume
auto. The rerun must resume from step 30 (the newest complete checkpoint;
only step-20 and step-30 kept), and end with every step's loss and the final
parameters bit-identical to an uninterrupted run.

  kill_resume.py PLAN --work DIR --ranks N [--data DIR]

Needs fsdp-run and mpirun on PATH, /usr/bin/python3 with numpy.
"""
import argparse
import os
import signal
import subprocess
import sys

from torch_reference import read_safetensors, read_steps

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]
TOTAL, EVERY, KEEP, KILL_DURING = 50, 10, 2, 37


def descendants(pid):
    """Every process under `pid`, from /proc (mpirun may put its ranks in
    sessions of their own, out of reach of killpg)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_launch(pid):
    """SIGKILL to the launcher and every rank at once, as a node failure or
    `kill -9` of the job does."""
    for victim in descendants(pid) + [pid]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plan")
    parser.add_argument("--work", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    launch = MPIRUN + ["-np", str(args.ranks)]
    ckpt = os.path.join(args.work, "ckpt")

    def command(name):
        return launch + ["fsdp-run", args.plan, "--max-steps", str(TOTAL), "--save-sharded", ckpt, "--save-every",
                         str(EVERY), "--keep-last", str(KEEP), "--resume", "auto",
                         "--metrics-json", os.path.join(args.work, name + ".jsonl"),
                         "--save", os.path.join(args.work, name + ".safetensors")]

    # The uninterrupted run, checkpointing as the others do.
    full_ckpt = os.path.join(args.work, "full-ckpt")
    full = subprocess.run([a if a != ckpt else full_ckpt for a in command("full")], capture_output=True, text=True)
    if full.returncode != 0:
        sys.exit("the uninterrupted run failed:\n" + full.stdout[-2000:] + full.stderr[-2000:])

    # The killed run: SIGKILL to the whole launch once step 36 has finished.
    killed = subprocess.Popen(command("killed"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    last_seen = -1
    for line in killed.stdout:
        if line.startswith("step "):
            last_seen = int(line.split()[1])
            if last_seen >= KILL_DURING - 1:
                kill_launch(killed.pid)
                break
    killed.wait()
    complete = sorted(int(d[5:]) for d in os.listdir(ckpt)
                      if d.startswith("step-") and os.path.exists(os.path.join(ckpt, d, "manifest.json")))
    print("killed with SIGKILL after step %d finished; complete checkpoints: %s" % (last_seen, complete))

    # The same command again.
    rerun = subprocess.run(command("resumed"), capture_output=True, text=True)
    print("\n".join(l for l in rerun.stdout.splitlines() if "resuming" in l or "saved a sharded" in l))
    if rerun.returncode != 0:
        sys.exit("the resumed run failed:\n" + rerun.stdout[-2000:] + rerun.stderr[-2000:])

    after = sorted(int(d[5:]) for d in os.listdir(ckpt)
                   if d.startswith("step-") and os.path.exists(os.path.join(ckpt, d, "manifest.json")))
    print("complete checkpoints after the rerun: %s" % after)
    failures = 0
    if after != [40, 50]:
        print("--keep-last %d should have left [40, 50]" % KEEP)
        failures += 1
    if complete != [20, 30]:
        print("expected the complete checkpoints [20, 30] after the kill, found %s" % complete)
        failures += 1
    if "resuming after step 30" not in rerun.stdout:
        print("the rerun did not resume after step 30")
        failures += 1
    want, got = read_steps(os.path.join(args.work, "full.jsonl")), read_steps(os.path.join(args.work, "resumed.jsonl"))
    if sorted(got) != list(range(30, TOTAL)) or any(got[s] != want[s] for s in got):
        print("resumed steps %s differ from the uninterrupted run's" % sorted(got))
        failures += 1
    else:
        print("steps 30-%d: losses bit-identical to the uninterrupted run" % (TOTAL - 1))
    a = read_safetensors(os.path.join(args.work, "full.safetensors"))
    b = read_safetensors(os.path.join(args.work, "resumed.safetensors"))
    same = sorted(a) == sorted(b) and all((a[k] == b[k]).all() for k in a)
    print("final parameters: %s" % ("bit-identical (%d tensors)" % len(a) if same else "DIFFER"))
    failures += not same
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
