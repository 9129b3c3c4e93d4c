#!/usr/bin/python3
"""Writes one token stream (the example GPT's corpus, by its vocab.json) in
every layout fsdp-run --data reads as a token file, and the same windows as
a .npy directory, so that a test can check they train identically:

  make_token_files.py CORPUS VOCAB.json CONTEXT OUT_DIR

OUT_DIR/tokens.npy (int64), tokens-u16.npy (uint16), tokens.bin (llm.c:
256-int32 header with magic 20240520, version 1, count; then uint16),
tokens-raw.bin (nanoGPT: raw uint16), and windows/ with input_ids.npy and
labels.npy: window i is tokens [i T, i T + T), its labels shifted by one.
"""
import json
import os
import sys

import numpy as np

corpus, vocab_path, context, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
vocab = json.load(open(vocab_path))
index = {c: i for i, c in enumerate(vocab)}
tokens = np.array([index[c] for c in open(corpus, encoding="utf-8").read()], np.int64)
os.makedirs(os.path.join(out, "windows"), exist_ok=True)
np.save(os.path.join(out, "tokens.npy"), tokens)
np.save(os.path.join(out, "tokens-u16.npy"), tokens.astype(np.uint16))
header = np.zeros(256, np.int32)
header[:3] = [20240520, 1, len(tokens)]
with open(os.path.join(out, "tokens.bin"), "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.astype(np.uint16).tobytes())
tokens.astype(np.uint16).tofile(os.path.join(out, "tokens-raw.bin"))
windows = (len(tokens) - 1) // context
np.save(os.path.join(out, "windows", "input_ids.npy"),
        np.stack([tokens[i * context:i * context + context] for i in range(windows)]))
np.save(os.path.join(out, "windows", "labels.npy"),
        np.stack([tokens[i * context + 1:i * context + context + 1] for i in range(windows)]))
print("%d tokens, %d windows of %d" % (len(tokens), windows, context))
