"""numpy helpers the fixture scripts share: bf16 bits and back, reading a bf16 safetensors file's tensors, and writing
tensors (name -> (safetensors dtype, array)) as one safetensors file (sorted names, the header padded to 8 bytes)."""
import json
import struct

import numpy as np


def bf16_bits(a):
    """fp32 values rounded to bf16 (nearest, ties to even), as little-endian u16 bits."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype('<u2')


def from_bf16(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def read_bf16(path):
    """The tensors of a bf16 safetensors file: name -> (shape, u16 bits), in header order."""
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    out = {}
    for name, info in json.loads(raw[8:8 + n]).items():
        if name == '__metadata__':
            continue
        a, b = info['data_offsets']
        out[name] = (info['shape'], np.frombuffer(raw[8 + n + a:8 + n + b], dtype='<u2').reshape(info['shape']))
    return out


def write(path, tensors):
    """tensors: name -> (safetensors dtype, array), written in sorted order."""
    hdr, blobs, at = {}, [], 0
    for k in sorted(tensors):
        dt, arr = tensors[k]
        b = np.ascontiguousarray(arr).tobytes()
        hdr[k] = {'dtype': dt, 'shape': list(np.shape(arr)), 'data_offsets': [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(hdr).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
