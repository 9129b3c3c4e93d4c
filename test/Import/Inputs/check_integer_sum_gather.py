#!/usr/bin/python3
"""Compares fsdp-run's outputs of integer-sum-gather.mlir's model with numpy.

  check_integer_sum_gather.py INPUT_DIR OUTPUT_DIR
"""
import os
import sys

import numpy as np


def main():
    inputs, outputs = sys.argv[1], sys.argv[2]
    ids, grid, picks = (np.load(os.path.join(inputs, n + ".npy")) for n in ("ids", "grid", "picks"))
    got = {n: np.load(os.path.join(outputs, n + ".npy")) for n in ("start", "sums", "picked")}
    last = (ids != 1).sum(axis=1) - 1
    want = {"start": np.take_along_axis(ids, last[:, None], axis=1),
            "sums": grid.sum(axis=(0, 2), keepdims=True),
            "picked": np.take_along_axis(ids, np.where(picks < 0, picks + ids.shape[1], picks), axis=1)}
    for name in ("start", "sums", "picked"):
        ok = got[name].dtype == np.int64 and got[name].shape == want[name].shape and (got[name] == want[name]).all()
        label = "start %s" % got[name].ravel() if name == "start" else name
        print("%s: %s" % (label, "PASS" if ok else "FAIL (want %s)" % want[name].ravel()))


if __name__ == "__main__":
    main()
