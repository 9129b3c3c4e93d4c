#!/usr/bin/python3
"""Trains the committed torch 2.x exports (test/e2e/Inputs/torch2, made by
its generate.py; or Hugging Face Optimum's, Inputs/optimum) with fsdpc on 1
and 2 ranks and compares every step's loss with the trajectory torch 2.x
computed training the same module, which generate.py recorded in
manifest.json. CI needs no torch 2.x for this.

  /usr/bin/python3 test/e2e/torch2_exports.py --work DIR [--fixtures DIR] [--models gpt ...] [--ranks 1 2]
"""
import argparse
import json
import os
import re
import subprocess
import sys

from torch_reference import HEADROOM, print_loss_comparison, read_losses, run

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--fixtures", default=os.path.join(HERE, "Inputs", "torch2"),
                        help="a folder of exports with their manifest.json")
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--ranks", nargs="*", type=int, default=[1, 2])
    parser.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    fixtures = args.fixtures
    manifest = json.load(open(os.path.join(fixtures, "manifest.json")))
    training = manifest["training"]
    failures = 0
    for name, model in manifest["models"].items():
        if args.models and name not in args.models:
            continue
        for export in model["exports"]:
            if "lossy" in export:
                # The exporter lost parameters: fsdpc must say which, and
                # still compile; there is no torch trajectory to match.
                tag = "%s (%s exporter%s, opset %d, %s batch)" % (
                    name, export["exporter"], "" if export.get("optimize", True) else " without its optimizer",
                    export["opset"], export["batch"])
                result = subprocess.run(["fsdpc", os.path.join(fixtures, export["file"]), "-o",
                                         os.path.join(args.work, export["file"] + ".bin"), "--batch-size",
                                         str(training["batch"]), "--world-size", str(max(args.ranks))] +
                                        export.get("fsdpc_flags", []),
                                        capture_output=True, text=True)
                warned = [line for line in result.stderr.splitlines() if "fsdpc: warning:" in line]
                print("== %s, lossy: %s" % (tag, export["lossy"]))
                for line in warned:
                    print(line.split(": ", 2)[-1])
                good = result.returncode == 0 and warned
                failures += not good
                print("%s: %s" % (tag, "%d warnings" % len(warned) if good else "FAIL"))
                continue
            for ranks in args.ranks:
                tag = "%s (%s exporter%s, opset %d, %s batch) on %d rank(s)" % (
                    name, export["exporter"], "" if export.get("optimize", True) else " without its optimizer",
                    export["opset"], export["batch"], ranks)
                plan = os.path.join(args.work, "%s-%d.bin" % (export["file"], ranks))
                metrics = os.path.join(args.work, "%s-%d.jsonl" % (export["file"], ranks))
                compiled = run(["fsdpc", os.path.join(fixtures, export["file"]), "-o", plan, "--batch-size",
                                str(training["batch"]), "--world-size", str(ranks), "--optimizer",
                                training["optimizer"], "--lr", repr(training["lr"]), "--weight-decay",
                                repr(training["weight_decay"]), "--strategy", "full_shard"] +
                               export.get("fsdpc_flags", []))
                # As many trainable parameters as torch's module has: a
                # constant the exporter folded (a rotary table, a mask) must
                # not train, nor a parameter go missing. A lossy export warns
                # instead (above).
                trained = re.search(r"(\d+) trainable parameters", compiled)
                trained = int(trained.group(1)) if trained else -1
                launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
                run(launch + ["fsdp-run", plan, "--steps", str(training["steps"]), "--data",
                              os.path.join(fixtures, model.get("data", "data")), "--metrics-json", metrics])
                print("== " + tag)
                if trained != model["parameters"]:
                    print("fsdpc trains %d parameters, torch's module has %d" % (trained, model["parameters"]))
                    failures += 1
                # A model trained with BatchNorm's batch statistics has one
                # trajectory per rank count (each rank normalises its slice).
                reference = model.get("losses_by_ranks", {}).get(str(ranks), model["losses"])
                bad = print_loss_comparison(read_losses(metrics), reference, args.rtol, training["steps"],
                                            "torch " + manifest["torch"].split("+")[0])
                failures += bad
                print("%s: %s" % (tag, "ok" if bad == 0 and trained == model["parameters"] else "FAIL"))
    HEADROOM.print()
    print("RESULT:", "PASS" if failures == 0 else "FAIL (%d)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
