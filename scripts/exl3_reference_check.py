#!/usr/bin/env python3
"""On the GPU machine: decode every trellis of EXL3 checkpoints with exllamav3's own reconstruct kernel and compare with this
project's transcription (scripts/make_exl3_fixture.py's reconstruct, which Exl3CheckpointTest checks Spindle's Java decoder
against bit for bit), and the original-basis weight exllamav3's fused reconstruct_had_slice gives with the effective weight
computed from the same tensors in float64.

exllamav3's sources are not part of this project: EXT is a checkout of exllamav3/exllamav3_ext (fetch
github:turboderp-org/exllamav3; MIT). Only its reconstruct kernel is built, with a two-line binding written here, through
torch.utils.cpp_extension (about a minute).

Usage: exl3_reference_check.py EXT BUILD_DIR CHECKPOINT_DIR... (prints one line a layer and a summary; exit 1 on a mismatch)"""
import json
import os
import struct
import sys

import numpy as np
import torch
from torch.utils.cpp_extension import load

sys.path.insert(0, os.path.dirname(__file__))
from make_exl3_fixture import had_l, had_r, reconstruct  # noqa: E402

ext_dir, build = sys.argv[1], sys.argv[2]
os.makedirs(build, exist_ok=True)
binding = os.path.join(build, 'binding.cpp')
with open(binding, 'w') as f:
    f.write('#include <torch/extension.h>\n#include "quant/reconstruct.cuh"\n'
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("reconstruct", &reconstruct); '
            'm.def("reconstruct_had_slice", &reconstruct_had_slice); }\n')
major, minor = torch.cuda.get_device_capability()
ext = load(name='exl3_reconstruct', sources=[binding, os.path.join(ext_dir, 'quant', 'reconstruct.cu')],
           extra_include_paths=[ext_dir], build_directory=build, verbose=False,
           extra_cuda_cflags=['-O3', f'-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}'])


def tensors(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    dt = {'I16': np.int16, 'F16': np.float16, 'I32': np.int32, 'BF16': np.uint16, 'F32': np.float32}
    out = {}
    for name, info in json.loads(raw[8:8 + n]).items():
        if name != '__metadata__':
            a, b = info['data_offsets']
            out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt[info['dtype']]).reshape(info['shape'])
    return out


bad = layers = 0
for ckpt in sys.argv[3:]:
    t = tensors(os.path.join(ckpt, 'model.safetensors'))
    for name in sorted(k for k in t if k.endswith('.trellis')):
        base = name[:-len('trellis')]
        trellis = t[name]
        kt, nt, k16 = trellis.shape
        K = k16 // 16
        cb = 'mcg' if base + 'mcg' in t else 'mul1' if base + 'mul1' in t else '3inst'
        ours = reconstruct(trellis.reshape(kt * nt, k16), K, cb, kt, nt)
        packed = torch.from_numpy(trellis.copy()).cuda()
        theirs = torch.empty((kt * 16, nt * 16), dtype=torch.half, device='cuda')
        ext.reconstruct(theirs, packed, K, cb == 'mcg', cb == 'mul1')
        theirs = theirs.cpu().numpy()
        same = int((theirs.view(np.uint16) == ours.view(np.uint16)).sum())
        line = f'{ckpt}:{base}  K={K} {cb}: Ŵ {same}/{ours.size} fp16 values bit for bit'
        if base + 'suh' in t and base + 'svh' in t:
            suh, svh = t[base + 'suh'], t[base + 'svh']
            fused = torch.empty((kt * 16, nt * 16), dtype=torch.half, device='cuda')
            ext.reconstruct_had_slice(fused, packed, torch.from_numpy(suh.copy()).cuda(), torch.from_numpy(svh.copy()).cuda(),
                                      K, cb == 'mcg', cb == 'mul1', 0)
            eff = suh.astype(np.float64)[:, None] * had_r(had_l(ours.astype(np.float64))) * svh.astype(np.float64)[None, :]
            err = np.abs(fused.cpu().numpy().astype(np.float64) - eff).max() / max(np.abs(eff).max(), 1e-30)
            line += f'; W (fused, fp16) vs float64: max error {err:.2e} of max |W|'
        print(line)
        layers += 1
        bad += same != ours.size
print(f'{layers} layers, {bad} with a differing value', file=sys.stderr)
sys.exit(1 if bad else 0)
