#!/usr/bin/python3
"""Trains the Optimum BERT token classifier (test/e2e/Inputs/optimum,
padding labelled -100) with `fsdpc --loss-mean global` on 1 and 2 ranks,
with and without gradient accumulation, and compares every step's loss with
the trajectory torch computed in one process on the whole batch
(manifest.json's `losses`): the step's mean over all its counted labels,
which transformers' Trainer computes by dividing each micro-batch's summed
loss by the labels counted over the step (`num_items_in_batch`, across
devices). With the default `--loss-mean local` two ranks follow torch with
two replicas instead (`losses_by_ranks`), each rank's own mean; that
trajectory differs from the single-process one by 3.6e-3, so a global mean
that fell back to the local one fails here.

  /usr/bin/python3 test/e2e/loss_mean.py --work DIR
"""
import argparse
import json
import os
import sys

from torch_reference import HEADROOM, print_loss_comparison, read_losses, run

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "Inputs", "optimum")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    manifest = json.load(open(os.path.join(FIXTURES, "manifest.json")))
    training = manifest["training"]
    model = manifest["models"]["hf-bert-tokens"]
    export = model["exports"][0]
    failures = 0
    # (ranks, micro-batches, --loss-mean, the trajectory it must follow)
    runs = [(1, 1, "global", model["losses"]), (1, 2, "global", model["losses"]),
            (2, 1, "global", model["losses"]), (2, 2, "global", model["losses"]),
            (2, 2, "local", None)]
    for ranks, micro, mean, reference in runs:
        tag = "--loss-mean %s on %d rank(s), %d micro-batch(es)" % (mean, ranks, micro)
        plan = os.path.join(args.work, "bert-tokens-%s-%d-%d.bin" % (mean, ranks, micro))
        metrics = plan.replace(".bin", ".jsonl")
        run(["fsdpc", os.path.join(FIXTURES, export["file"]), "-o", plan,
             "--batch-size", str(training["batch"] // micro), "--grad-accum", str(micro),
             "--world-size", str(ranks), "--optimizer", training["optimizer"], "--lr", repr(training["lr"]),
             "--weight-decay", repr(training["weight_decay"]), "--loss-mean", mean] + export["fsdpc_flags"])
        launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
        run(launch + ["fsdp-run", plan, "--steps", str(training["steps"]), "--data",
                      os.path.join(FIXTURES, model["data"]), "--metrics-json", metrics])
        print("== " + tag)
        if reference is None:
            # Local means over two micro-batches of two ranks: no torch
            # trajectory recorded; it must differ from the global one.
            ours = read_losses(metrics)
            apart = max(abs(a - b) / abs(b) for a, b in zip(ours, model["losses"]))
            good = apart > 1e-3
            print("differs from the step's token mean by %.2e (must exceed 1e-3)" % apart)
        else:
            good = print_loss_comparison(read_losses(metrics), reference, 1e-4, training["steps"],
                                         "torch " + manifest["torch"].split("+")[0]) == 0
        failures += not good
        print("%s: %s" % (tag, "ok" if good else "FAIL"))
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
