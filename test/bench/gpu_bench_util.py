"""What the GPU benchmarks (gpu_vs_torch.py, moe_gpu.py) share: their
two-half command line (prepare here, where MLIR is; run there, where the
GPU is) and timing a torch call by CUDA events."""
import argparse


def cuda_ms(torch, fn, repeats=20, warmup=3):
    """fn's mean time per call in ms over `repeats` calls after `warmup`,
    measured by CUDA events around the whole run."""
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def prepare_or_run(doc, prepare, run, default_work):
    """`prepare --fsdpc BIN --out DIR` calls prepare(fsdpc, out) and returns
    0; `run --fsdp-run BIN --plans DIR [--work DIR]` returns
    run(fsdp_run, plans, work)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--fsdpc", required=True)
    p.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--fsdp-run", required=True)
    r.add_argument("--plans", required=True)
    r.add_argument("--work", default=default_work)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.fsdpc, args.out)
        return 0
    return run(args.fsdp_run, args.plans, args.work)
