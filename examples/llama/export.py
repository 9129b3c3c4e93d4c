#!/usr/bin/python3
"""Exports the example LLaMA-style model (model.py) with torch.onnx.export:
input `input_ids` [batch, context] int64 (batch symbolic), output `logits`.
It trains on the same character data as the GPT example
(examples/gpt/prepare_data.py).

  /usr/bin/python3 examples/llama/export.py --out llama.onnx --data-dir DIR [--opset 13|17] [--no-constant-folding]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import build  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--data-dir", required=True, help="where prepare_data.py wrote vocab.json")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--no-constant-folding", action="store_true")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--static-batch", action="store_true",
                        help="export the plain way, without dynamic_axes: the batch is --batch in the graph "
                             "(fsdpc re-derives it for any --batch-size and world size)")
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    vocab = len(json.load(open(os.path.join(args.data_dir, "vocab.json"))))
    torch.manual_seed(args.seed)
    model = build(vocab, args.context, layers=args.layers).eval()
    ids = torch.zeros(args.batch, args.context, dtype=torch.long)
    torch.onnx.export(model, (ids,), args.out, input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes=None if args.static_batch else {"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=args.opset, do_constant_folding=not args.no_constant_folding)
    print("wrote %s (opset %d%s)" % (args.out, args.opset, ", no constant folding" if args.no_constant_folding else ""))


if __name__ == "__main__":
    main()
