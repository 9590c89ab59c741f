#!/usr/bin/env python3
"""An MLX affine-quantized checkpoint of a Hugging Face llama (bf16 safetensors), numpy only, written as mlx-lm saves one
(mlx.core.quantize's documented scheme): every linear layer and the embedding (and an untied head) as `weight` U32 (each
row's codes one little-endian bit stream, `bits` a code, the first code lowest), `scales` and `biases` bf16 per group of
`group_size` columns, w ~ scale * q + bias with scale = (max - min) / (2^bits - 1), bias = min, q = round((w - bias) /
scale) clamped; norms as they were; config.json gains "quantization" and "quantization_config" {group_size, bits}.
Checked against MLX's documentation of quantize / dequantize (not against MLX itself, which needs Apple silicon).

With "mixed" after the bits, the per-module entries mlx-lm writes for a mixed recipe (its quant predicates): every
down_proj at 8 bits, the head at 6, and layer 1's q_proj left unquantized (false).

Usage: make_mlx_fixture.py MODEL_DIR OUT_DIR group_size bits [mixed]"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_np import bf16_bits, from_bf16, read_bf16, write  # noqa: E402

src, out, gs, base_bits = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
mixed = len(sys.argv) > 5 and sys.argv[5] == 'mixed'
overrides = {}
os.makedirs(out, exist_ok=True)
tensors = {}
for name, (shape, u16) in read_bf16(f'{src}/model.safetensors').items():
    module = name[:-len('.weight')]
    bits = base_bits
    if mixed and 'down_proj' in name:
        bits = overrides.setdefault(module, {'group_size': gs, 'bits': 8})['bits']
    elif mixed and name == 'lm_head.weight':
        bits = overrides.setdefault(module, {'group_size': gs, 'bits': 6})['bits']
    elif mixed and name == 'model.layers.1.self_attn.q_proj.weight':
        overrides[module] = False
        bits = None
    if bits and len(shape) == 2 and name.endswith('.weight') and ('proj' in name or 'embed_tokens' in name or name == 'lm_head.weight'):
        w = from_bf16(u16).astype(np.float64)
        rows, cols = w.shape
        g = w.reshape(rows, cols // gs, gs)
        lo, hi = g.min(2), g.max(2)
        scale = (hi - lo) / (2 ** bits - 1)
        scale[scale == 0] = 1.0
        scale_b, bias_b = bf16_bits(scale), bf16_bits(lo)
        s, z = from_bf16(scale_b).astype(np.float64)[:, :, None], from_bf16(bias_b).astype(np.float64)[:, :, None]
        q = np.clip(np.rint((g - z) / s), 0, 2 ** bits - 1).astype(np.uint64).reshape(rows, cols)
        words = np.zeros((rows, cols * bits // 32), dtype=np.uint64)
        for j in range(cols):
            bit = j * bits
            words[:, bit // 32] |= (q[:, j] << (bit % 32)) & 0xFFFFFFFF
            if bit % 32 + bits > 32:
                words[:, bit // 32 + 1] |= q[:, j] >> (32 - bit % 32)
        base = name[:-len('.weight')]
        tensors[name] = ('U32', words.astype('<u4'))
        tensors[base + '.scales'] = ('BF16', scale_b)
        tensors[base + '.biases'] = ('BF16', bias_b)
    else:
        tensors[name] = ('BF16', u16)
write(f'{out}/model.safetensors', tensors)
cfg = json.load(open(f'{src}/config.json'))
cfg['quantization'] = {'group_size': gs, 'bits': base_bits, **overrides}
cfg['quantization_config'] = {'group_size': gs, 'bits': base_bits, **overrides}
json.dump(cfg, open(f'{out}/config.json', 'w'), indent=1)
for extra in ['generation_config.json']:
    if os.path.exists(f'{src}/{extra}'):
        shutil.copy(f'{src}/{extra}', f'{out}/{extra}')
print(out, os.path.getsize(f'{out}/model.safetensors'), 'bytes')
