#!/usr/bin/python3
"""Turns corpus.txt into training data for the example GPT, character by
character: vocab.txt (one character per line, by id), and input_ids.npy /
labels.npy of shape [num_samples, context] int64, where labels are the
inputs shifted by one character (next-character prediction).

  /usr/bin/python3 examples/gpt/prepare_data.py --out-dir DIR [--context 32] [--stride 3]
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
    args = parser.parse_args()
    text = open(args.corpus, encoding="utf-8").read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text], np.int64)
    starts = range(0, len(ids) - args.context - 1, args.stride)
    inputs = np.stack([ids[s:s + args.context] for s in starts])
    labels = np.stack([ids[s + 1:s + args.context + 1] for s in starts])
    # A fixed shuffle, so consecutive batches are not neighbouring windows.
    order = np.random.default_rng(0).permutation(len(inputs))
    os.makedirs(args.out_dir, exist_ok=True)
    np.save(os.path.join(args.out_dir, "input_ids.npy"), inputs[order])
    np.save(os.path.join(args.out_dir, "labels.npy"), labels[order])
    with open(os.path.join(args.out_dir, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    print("%d characters, vocabulary %d, %d samples of %d" % (len(ids), len(vocab), len(inputs), args.context))


if __name__ == "__main__":
    main()
