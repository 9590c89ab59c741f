#!/usr/bin/env python3
"""Test vectors for Spindle's ggml block decoder (model.gguf.GgmlBlocks): random blocks of each type Spindle reads, and
their values as gguf-py (llama.cpp's Python package, numpy only) dequantizes them.

Usage: make_ggml_vectors.py GGUF_PY_DIR OUT_DIR
  GGUF_PY_DIR: llama.cpp's gguf-py folder (git archive of llama.cpp at the commit named in ../shared/docs/DEVICE.md)
Writes OUT_DIR/<type>.blocks (raw blocks, little-endian) and OUT_DIR/<type>.f32 (their values, float32 little-endian).
The f16 scale fields are set to finite random values (|x| in [2^-12, 2^-2], either sign); every other byte is random."""
import sys
import numpy as np

sys.path.insert(0, sys.argv[1])
import gguf  # noqa: E402
from gguf import quants  # noqa: E402

out = sys.argv[2]
rng = np.random.default_rng(20261207)
# block bytes and where each block's f16 fields are
LAYOUT = {
    'Q4_0': [0], 'Q4_1': [0, 2], 'Q5_0': [0], 'Q5_1': [0, 2], 'Q8_0': [0], 'Q2_K': [80, 82], 'Q3_K': [108],
    'Q4_K': [0, 2], 'Q5_K': [0, 2], 'Q6_K': [208], 'IQ4_NL': [0], 'IQ4_XS': [0],
}
for name, halves in LAYOUT.items():
    qtype = gguf.GGMLQuantizationType[name]
    elements, size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = 8 if elements == 256 else 64
    raw = rng.integers(0, 256, size=(blocks, size), dtype=np.uint8)
    for b in range(blocks):
        for at in halves:
            v = np.float16(rng.choice([-1, 1]) * 2.0 ** rng.uniform(-12, -2))
            raw[b, at:at + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    values = quants.dequantize(raw, qtype).astype('<f4').reshape(-1)
    assert values.size == blocks * elements and np.all(np.isfinite(values)), name
    raw.tofile(f'{out}/{name}.blocks')
    values.tofile(f'{out}/{name}.f32')
    print(name, blocks, 'blocks of', elements, 'elements,', size, 'bytes')
