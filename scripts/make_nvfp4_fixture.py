#!/usr/bin/env python3
"""NVFP4 checkpoints of a Hugging Face llama (bf16 safetensors), numpy only, in the three layouts their tools write:

  ct      compressed-tensors "nvfp4-pack-quantized" (llm-compressor): <layer>.weight_packed U8 (two E2M1 codes a byte, the
          even column in the low nibble), <layer>.weight_scale F8_E4M3 (a scale a group of 16 columns), <layer>.weight_global_scale
          F32 [1] = 448 * 6 / amax(W), the group scale e4m3(amax_g / 6 * global); a value is e2m1 * (e4m3 / global). lm_head
          and the embedding stay bf16 (the recipe's ignore list).
  modelopt  NVIDIA ModelOpt's export: <layer>.weight U8, <layer>.weight_scale F8_E4M3, <layer>.weight_scale_2 F32 [] =
          amax(W) / (6 * 448), the group scale e4m3(amax_g / 6 / weight_scale_2); a value is e2m1 * (e4m3 * weight_scale_2);
          hf_quant_config.json {producer, quantization {quant_algo NVFP4, group_size 16, exclude_modules [lm_head]}}.
  mlx     mlx-lm's nvfp4 mode: <layer>.weight U32 (eight codes a word, the first lowest), <layer>.scales U8 (e4m3(amax_g / 6)),
          no biases and no tensor scale; every linear layer, the embedding and the head; config.json's "quantization"
          {group_size 16, bits 4, mode nvfp4}.

The codes are the nearest E2M1 value of w / scale (ties to the even code). Layouts and formulas as the formats' own
sources define them (compressed-tensors' NVFP4PackedCompressor and _dequantize, ModelOpt's NVFP4QTensor, MLX's
fp_quantize); not checked against those tools' output (none runs here). OUT_DIR.reference.safetensors holds, for two weights, the
values a reader must give (the formats' dequantization in fp32, then rounded to bf16) as F32.

Usage: make_nvfp4_fixture.py MODEL_DIR OUT_DIR ct|modelopt|mlx"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_np import bf16_bits, from_bf16, read_bf16, write  # noqa: E402

src, out, layout = sys.argv[1], sys.argv[2], sys.argv[3]
assert layout in ('ct', 'modelopt', 'mlx'), layout
os.makedirs(out, exist_ok=True)

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def e4m3_table():
    v = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        x = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[b] = -x if s else x
    v[0x7F] = v[0xFF] = np.nan
    return v


E4M3 = e4m3_table()
POS = np.arange(0, 0x7F)  # the finite non-negative codes, increasing


def e4m3_encode(x):
    """Nearest E4M3 code of non-negative x (ties to the even code), saturating at 448."""
    x = np.minimum(np.asarray(x, dtype=np.float32), 448.0)
    vals = E4M3[POS]
    i = np.clip(np.searchsorted(vals, x), 1, len(vals) - 1)
    lo, hi = vals[i - 1], vals[i]
    pick_hi = (x - lo > hi - x) | ((x - lo == hi - x) & (POS[i] % 2 == 0))
    return np.where(pick_hi, POS[i], POS[i - 1]).astype(np.uint8)


def e2m1_encode(y):
    """Nearest E2M1 code of y (ties to the even code; beyond 6 saturated)."""
    mags = E2M1[:8]
    a = np.minimum(np.abs(y), 6.0)
    i = np.clip(np.searchsorted(mags, a), 1, 7)
    lo, hi = mags[i - 1], mags[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    code = np.where(pick_hi, i, i - 1).astype(np.uint8)
    return code | np.where(np.signbit(y) & (code != 0), 8, 0).astype(np.uint8)


def quantize(w):
    """(codes (rows, cols) u8, group scale codes (rows, cols / 16) u8, tensor scale f32, divides), and the dequantized fp32."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // 16, 16)
    amax_g = np.abs(g).max(2).astype(np.float32)
    amax = np.float32(np.abs(w).max())
    if layout == 'ct':
        glob = np.float32(448.0 * 6.0) / amax
        sc = e4m3_encode(amax_g / np.float32(6.0) * glob)
        t = E4M3[sc] / glob  # fp32 division, as _dequantize
    elif layout == 'modelopt':
        glob = amax / np.float32(6.0 * 448.0)
        sc = e4m3_encode(amax_g / np.float32(6.0) / glob)
        t = E4M3[sc] * glob
    else:
        glob = np.float32(1.0)
        sc = e4m3_encode(amax_g / np.float32(6.0))
        t = E4M3[sc]
    t = t.astype(np.float32)
    safe = np.where(t == 0, np.float32(1.0), t)
    codes = e2m1_encode((g / safe[:, :, None]).astype(np.float32)).reshape(rows, cols)
    deq = (E2M1[codes].reshape(rows, cols // 16, 16) * t[:, :, None]).astype(np.float32).reshape(rows, cols)
    return codes, sc, np.float32(glob), deq


tensors, reference = {}, {}
for name, (shape, u16) in read_bf16(f'{src}/model.safetensors').items():
    quantized = len(shape) == 2 and name.endswith('.weight') and ('proj' in name or (
            layout == 'mlx' and ('embed_tokens' in name or name == 'lm_head.weight')))
    if not quantized:
        tensors[name] = ('BF16', u16)
        continue
    w = from_bf16(u16)
    codes, sc, glob, deq = quantize(w)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    base = name[:-len('weight')]
    if name in ('model.layers.0.self_attn.q_proj.weight', 'model.layers.2.mlp.down_proj.weight'):
        reference[name] = ('F32', from_bf16(bf16_bits(deq)))
    if layout == 'ct':
        tensors[base + 'weight_packed'] = ('U8', packed)
        tensors[base + 'weight_scale'] = ('F8_E4M3', sc)
        tensors[base + 'weight_global_scale'] = ('F32', np.array([glob], dtype='<f4'))
    elif layout == 'modelopt':
        tensors[base + 'weight'] = ('U8', packed)
        tensors[base + 'weight_scale'] = ('F8_E4M3', sc)
        tensors[base + 'weight_scale_2'] = ('F32', np.array(glob, dtype='<f4'))
    else:
        tensors[base + 'weight'] = ('U32', np.ascontiguousarray(packed).view('<u4'))
        tensors[base + 'scales'] = ('U8', sc)


write(f'{out}/model.safetensors', tensors)
write(f'{out}.reference.safetensors', reference)
cfg = json.load(open(f'{src}/config.json'))
if layout == 'ct':
    cfg['quantization_config'] = {
        'quant_method': 'compressed-tensors', 'format': 'nvfp4-pack-quantized', 'quantization_status': 'compressed',
        'config_groups': {'group_0': {'targets': ['Linear'], 'weights': {
            'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16, 'symmetric': True, 'dynamic': False},
            'input_activations': None}},
        'ignore': ['lm_head'], 'kv_cache_scheme': None}
elif layout == 'modelopt':
    json.dump({'producer': {'name': 'modelopt', 'version': '0.0.0 (scripts/make_nvfp4_fixture.py)'},
               'quantization': {'quant_algo': 'NVFP4', 'kv_cache_quant_algo': None, 'group_size': 16, 'exclude_modules': ['lm_head']}},
              open(f'{out}/hf_quant_config.json', 'w'), indent=1)
else:
    cfg['quantization'] = {'group_size': 16, 'bits': 4, 'mode': 'nvfp4'}
    cfg['quantization_config'] = {'group_size': 16, 'bits': 4, 'mode': 'nvfp4'}
json.dump(cfg, open(f'{out}/config.json', 'w'), indent=1)
for extra in ['generation_config.json']:
    if os.path.exists(f'{src}/{extra}'):
        shutil.copy(f'{src}/{extra}', f'{out}/{extra}')
print(out, os.path.getsize(f'{out}/model.safetensors'), 'bytes')
