#!/usr/bin/python3
"""Exports the example GPT (model.py) to ONNX the way users do, with
torch.onnx.export: input `input_ids` [batch, context] int64 (batch
symbolic, or fixed with --static-batch), output `logits` [batch, context, vocab].

  /usr/bin/python3 examples/gpt/export.py --out gpt.onnx [--opset 13|17] [--no-constant-folding] [--static-batch]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import GPT  # noqa: E402  (the defaults below match model.build)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--no-constant-folding", action="store_true")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--static-batch", action="store_true",
                        help="export the plain way, without dynamic_axes: the batch is --batch in the graph "
                             "(fsdpc re-derives it for any --batch-size and world size)")
    parser.add_argument("--vocab", type=int, default=0, help="default: the size of --data-dir's vocab.json")
    parser.add_argument("--data-dir", help="where prepare_data.py wrote vocab.json")
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--dim", type=int, default=48)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.vocab:
        if not args.data_dir:
            sys.exit("pass --vocab N or --data-dir DIR (from prepare_data.py)")
        args.vocab = len(json.load(open(os.path.join(args.data_dir, "vocab.json"))))
    torch.manual_seed(args.seed)
    model = GPT(args.vocab, args.context, args.dim, args.heads, args.layers).eval()
    ids = torch.zeros(args.batch, args.context, dtype=torch.long)
    # A symbolic batch, so the same file compiles for any world size (fsdpc
    # --batch-size B takes the global batch and gives each rank B / N).
    torch.onnx.export(model, (ids,), args.out, input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes=None if args.static_batch else {"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=args.opset, do_constant_folding=not args.no_constant_folding)
    print("wrote %s (opset %d%s)" % (args.out, args.opset, ", no constant folding" if args.no_constant_folding else ""))


if __name__ == "__main__":
    main()
