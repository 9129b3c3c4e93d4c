#!/usr/bin/python3
"""Helpers for the state-dict tests.

  state_dicts.py random MODEL.onnx OUT.safetensors   random values for every
                                                     float initializer
  state_dicts.py same A.safetensors B.safetensors    fails unless A and B hold
                                                     the same names, shapes
                                                     and bit-identical values
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from torch_reference import read_safetensors, write_safetensors

if sys.argv[1] == "random":
    model = onnx.load(sys.argv[2])
    rng = np.random.default_rng(5)
    arrays = {i.name: rng.standard_normal(numpy_helper.to_array(i).shape).astype(np.float32)
              for i in model.graph.initializer if numpy_helper.to_array(i).dtype.kind == "f"}
    write_safetensors(sys.argv[3], arrays)
    print("wrote %d tensors" % len(arrays))
elif sys.argv[1] == "same":
    a, b = read_safetensors(sys.argv[2]), read_safetensors(sys.argv[3])
    problems = [n for n in sorted(set(a) | set(b))
                if n not in a or n not in b or a[n].shape != b[n].shape or not np.array_equal(a[n], b[n])]
    for name in problems:
        print("differs: %s" % name)
    print("RESULT:", "FAIL" if problems else "PASS (%d tensors identical)" % len(a))
    sys.exit(1 if problems else 0)
