#!/usr/bin/python3
"""Turns corpus.txt into training data for the example GPT, character by
character: vocab.txt (one character per line, by id), and input_ids.npy /
labels.npy of shape [num_samples, context] int64, where labels are the
inputs shifted by one character (next-character prediction). With
--eval-dir, the last --eval-fraction of the text is held out: its windows
go to the eval directory, the training windows come from the rest.

  /usr/bin/python3 examples/gpt/prepare_data.py --out-dir DIR [--context 32] [--stride 3]
      [--eval-dir DIR [--eval-fraction 0.1]]
"""
import argparse
import json
import os

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--corpus", default=os.path.join(here, "corpus.txt"))
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--stride", type=int, default=3)
    parser.add_argument("--eval-dir", help="where the held-out windows go (default: none held out)")
    parser.add_argument("--eval-fraction", type=float, default=0.1)
    args = parser.parse_args()
    text = open(args.corpus, encoding="utf-8").read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text], np.int64)
    held_out = int(len(ids) * args.eval_fraction) if args.eval_dir else 0

    def write(out_dir, part):
        starts = range(0, len(part) - args.context - 1, args.stride)
        inputs = np.stack([part[s:s + args.context] for s in starts])
        labels = np.stack([part[s + 1:s + args.context + 1] for s in starts])
        # A fixed shuffle, so consecutive batches are not neighbouring windows.
        order = np.random.default_rng(0).permutation(len(inputs))
        os.makedirs(out_dir, exist_ok=True)
        np.save(os.path.join(out_dir, "input_ids.npy"), inputs[order])
        np.save(os.path.join(out_dir, "labels.npy"), labels[order])
        with open(os.path.join(out_dir, "vocab.json"), "w") as f:
            json.dump(vocab, f)
        return len(inputs)

    samples = write(args.out_dir, ids[:len(ids) - held_out])
    print("%d characters, vocabulary %d, %d samples of %d" % (len(ids), len(vocab), samples, args.context))
    if args.eval_dir:
        print("held out the last %d characters: %d eval samples in %s" % (
            held_out, write(args.eval_dir, ids[len(ids) - held_out:]), args.eval_dir))


if __name__ == "__main__":
    main()
