#!/usr/bin/env python3
"""EXL3 checkpoints of a Hugging Face llama (bf16 safetensors), numpy only, in exllamav3's storage layout.

What a linear layer of an EXL3 checkpoint stores (exllamav3 1.x, read from its sources: LinearEXL3, quantize.py's
regularize / pack_trellis, the CUDA kernels reconstruct.cu, exl3_dq.cuh, codebook.cuh, pack.cu, hadamard.cu):

  <layer>.trellis  I16 (in/16, out/16, 16*K): one 16x16 tile of W_hat (k = input, n = output) a row of 256*K bits: K bits a
                   weight, the weights in the tensor-core order below; weight t's code is the 16-bit window of the bit stream
                   ending at bit (t+1)*K, read cyclically (tail-biting): bits [(t+1)*K - 16, (t+1)*K) mod 256*K. The stream is
                   MSB-first in 32-bit words; each word is stored as two int16, the low half first (little-endian u32).
  <layer>.suh      F16 (in): input signs and scales;  <layer>.svh F16 (out): output signs and scales
                   (older files: <layer>.su / .sv, I16 bitfields, bit i of word j set = -1 for element 16j + i, else +1).
  <layer>.mcg / .mul1  I32 [] present: the codebook (absent: 3inst). The value is the multiplier, never read.
  W (in, out) = diag(suh) . H . W_hat . H . diag(svh), H block-diagonal 128x128 Sylvester Hadamard / sqrt(128) on each side;
  a linear layer computes y = x . W. Dimensions are padded to multiples of 128 with zeros (outputs trimmed).

Codebooks (x: the 16-bit code as u32, arithmetic mod 2^32; lop3(x) = (x & 0x8fff8fff) ^ 0x3b603b60 then the two fp16
halves added in fp16):
  3inst  x = x * 89226354 + 64248484; lop3; lo + hi
  mcg    x = x * 0xCBAC1FED; lop3; lo + hi
  mul1   x = x * 0x83DCD12D; s = sum of x's four bytes; h = fp16 bits (0x6400 + s); fp16(h * fp16 0x1eee + fp16 0xc931), fused
Tensor-core order: weight t = 8 * lane + j of a tile sits at row r (k) and column c (n) with r0 = (lane % 4) * 2,
c0 = lane / 4: j = 0..7 -> (r0, c0), (r0+1, c0), (r0+8, c0), (r0+9, c0), (r0, c0+8), (r0+1, c0+8), (r0+8, c0+8), (r0+9, c0+8).

The quantizer here is this script's own and simpler than exllamav3's (no calibration, no Hessian, no LDLQ error feedback):
regularize as exllamav3 does (random signs, output channel scales, the Hadamard transforms, input scales / -1.24371088,
one global scale: here W_hat's RMS set to the codebook's standard deviation, where exllamav3 searches it), then give each tile the least-squares tail-biting trellis path (a Viterbi search, scripts/exl3_viterbi.c). Its error is
therefore larger than exllamav3's at the same K (which weighs the error by the layer's input statistics); the format is
the same. OUT_DIR.reference.safetensors holds, for two weights, the decoded W_hat (F16, padded
(in, out)) and the effective weight (out, in) in F32, computed here in float64.

Usage: make_exl3_fixture.py MODEL_DIR OUT_DIR [--bits K] [--head-bits K] [--codebook mul1|mcg|3inst] [--attn-bits K]
       [--mlp-bits K] [--seed S] [--reference NAME,NAME] [--out-scales always|never] [--packed-sv]
(--head-bits 16 keeps the head unquantized, stored F16 as exllamav3 does.)"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_np import from_bf16, read_bf16, write  # noqa: E402

CODEBOOK_SCALE = 1.24371088
MULT = {'mcg': 0xCBAC1FED, 'mul1': 0x83DCD12D}


def lop3_sum(x):
    x = (x & np.uint32(0x8fff8fff)) ^ np.uint32(0x3b603b60)
    lo = (x & np.uint32(0xffff)).astype(np.uint16).view(np.float16).astype(np.float32)
    hi = (x >> np.uint32(16)).astype(np.uint16).view(np.float16).astype(np.float32)
    return (lo + hi).astype(np.float16)  # exact in fp32 (both in [2^-3, 1)), one rounding to fp16


def decode(code, cb):
    """fp16 values of 16-bit codes (any integer array) in codebook cb."""
    x = np.asarray(code).astype(np.uint64) & 0xffff
    if cb == '3inst':
        return lop3_sum(((x * 89226354 + 64248484) & 0xffffffff).astype(np.uint32))
    if cb == 'mcg':
        return lop3_sum(((x * MULT['mcg']) & 0xffffffff).astype(np.uint32))
    x = ((x * MULT['mul1']) & 0xffffffff).astype(np.uint32)
    s = (x & 0xff) + ((x >> 8) & 0xff) + ((x >> 16) & 0xff) + (x >> 24)
    h = (np.uint32(0x6400) + s).astype(np.uint16).view(np.float16).astype(np.float64)
    k_inv = float(np.uint16(0x1eee).view(np.float16))
    k_bias = float(np.uint16(0xc931).view(np.float16))
    return (h * k_inv + k_bias).astype(np.float16)  # exact in float64, one rounding to fp16 (the fused hfma)


def perm():
    p = np.zeros(256, dtype=np.int64)
    for lane in range(32):
        r0, c0 = (lane % 4) * 2, lane // 4
        for j, (r, c) in enumerate([(r0, c0), (r0 + 1, c0), (r0 + 8, c0), (r0 + 9, c0),
                                    (r0, c0 + 8), (r0 + 1, c0 + 8), (r0 + 8, c0 + 8), (r0 + 9, c0 + 8)]):
            p[lane * 8 + j] = r * 16 + c
    return p


PERM = perm()


def pack(codes, K):
    """(T, 256) K-bit codes -> (T, 16 * K) int16 as pack_trellis stores them."""
    T = codes.shape[0]
    bits = ((codes[:, :, None] >> np.arange(K - 1, -1, -1)) & 1).astype(np.uint8).reshape(T, 256 * K)
    chunks = np.packbits(bits.reshape(T, -1, 16), axis=2, bitorder='big').reshape(T, -1, 2)
    u16 = (chunks[:, :, 0].astype(np.uint16) << 8) | chunks[:, :, 1]  # the stream's 16-bit chunks, in order
    swapped = u16.reshape(T, -1, 2)[:, :, ::-1].reshape(T, -1)  # SWAP16 of each u32 (stored little-endian)
    return swapped.view(np.int16)


def unpack_codes(packed, K):
    """The 256 16-bit codes of each tile as exllamav3's dequantizer reads them (dq: a 64-bit funnel shift of two words)."""
    u16 = packed.view(np.uint16).astype(np.uint64)
    words = u16[:, 0::2] | (u16[:, 1::2] << 16)  # u32 words, little-endian halves
    n = K * 256 // 32
    t = np.arange(256)
    b0 = t * K + K - 16 + 256 * K
    b1 = b0 + 16
    i0, i1 = b0 // 32, (b1 - 1) // 32
    s0 = (i1 + 1) * 32 - b1
    a, b = words[:, i0 % n], words[:, i1 % n]
    return (((a << 32) | b) >> s0.astype(np.uint64)) & 0xffff


def reconstruct(packed, K, cb, kt, nt):
    """W_hat (16 kt, 16 nt) fp16 from packed tiles (kt * nt, 16 K), tile (i, j) at row i * nt + j."""
    vals = decode(unpack_codes(packed, K), cb)  # (T, 256) in trellis order
    tiles = np.zeros((vals.shape[0], 256), dtype=np.float16)
    tiles[:, PERM] = vals
    return tiles.reshape(kt, nt, 16, 16).transpose(0, 2, 1, 3).reshape(kt * 16, nt * 16)


def hadamard(n=128):
    i = np.arange(n)
    pc = np.vectorize(lambda v: bin(v).count('1'))(i[:, None] & i[None, :])
    return np.where(pc % 2 == 0, 1.0, -1.0) / np.sqrt(n)


H = hadamard()


def had_l(w):
    k, n = w.shape
    return (H @ w.reshape(k // 128, 128, n)).reshape(k, n)


def had_r(w):
    k, n = w.shape
    return (w.reshape(k, n // 128, 128) @ H).reshape(k, n)


def encode(target, K, cb):
    """Tail-biting trellis codes (T, 256) for targets (T, 256) in trellis order: the least-squares path of each tile
    (scripts/exl3_viterbi.c, built here with the system's C compiler and OpenMP)."""
    import ctypes
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    lib = os.path.join(tempfile.gettempdir(), 'spindle-exl3-viterbi.so')
    src = os.path.join(here, 'exl3_viterbi.c')
    if not os.path.exists(lib) or os.path.getmtime(lib) < os.path.getmtime(src):
        subprocess.check_call(['cc', '-O3', '-march=native', '-ffp-contract=off', '-fopenmp', '-shared', '-fPIC', '-o', lib, src])
    v = ctypes.CDLL(lib)
    table = np.ascontiguousarray(decode(np.arange(65536), cb).astype(np.float32))
    y = np.ascontiguousarray(target, dtype=np.float32)
    codes = np.zeros(y.shape, dtype=np.int16)
    ptr = np.ctypeslib.as_ctypes
    v.exl3_viterbi(ptr(table), ptr(y), ctypes.c_int(y.shape[0]), ctypes.c_int(K), ptr(codes))
    return codes.astype(np.int64)


def block_rms(w, axis):
    return np.sqrt(np.mean(w * w, axis=axis))


def pack_signs(v):
    """A +-1 vector as I16 bitfields: bit i of word j set = -1 at element 16 j + i (exllamav3's .su / .sv)."""
    neg = (v < 0).reshape(-1, 16).astype(np.uint32)
    return (neg << np.arange(16, dtype=np.uint32)).sum(axis=1).astype(np.uint16).view(np.int16)


def quantize(w_out_in, K, cb, rng, out_scales=True, packed_sv=False):
    """One linear weight (out, in) float32 -> (tensors, W_hat fp16 padded (in, out), effective (out, in) float64)."""
    out_f, in_f = w_out_in.shape
    kp, np_ = -(-in_f // 128) * 128, -(-out_f // 128) * 128
    w = np.zeros((kp, np_), dtype=np.float64)
    w[:in_f, :out_f] = w_out_in.T
    sv = np.sign(rng.standard_normal(np_) + 1e-5)
    ocs = block_rms(w, 0)
    zero = ocs < 1e-30
    ocs = ocs / ocs.mean()
    ocs[zero] = 0.1
    if out_scales:
        sv = sv * ocs + 1e-10
    w /= sv[None, :]
    sv[zero] = 0.0
    w = had_r(w)
    su = np.sign(rng.standard_normal(kp) + 1e-5)
    ics = block_rms(w, 1)
    ics[ics < 1e-30] = 0.1
    su = su * ics / -CODEBOOK_SCALE + 1e-10
    w /= su[:, None]
    w = had_l(w)
    # one global scale: W_hat's RMS to the codebook's standard deviation (exllamav3 searches it on sample tiles)
    g = float(decode(np.arange(65536), cb).astype(np.float64).std() / max(np.sqrt(np.mean(w * w)), 1e-30))
    w *= g
    su /= g
    kt, nt = kp // 16, np_ // 16
    tiles = w.reshape(kt, 16, nt, 16).transpose(0, 2, 1, 3).reshape(kt * nt, 256)[:, PERM]
    codes = encode(tiles.astype(np.float32), K, cb)
    packed = pack(codes, K)
    w_hat = reconstruct(packed, K, cb, kt, nt)
    suh, svh = su.astype(np.float16), sv.astype(np.float16)
    eff = (suh.astype(np.float64)[:, None] * had_r(had_l(w_hat.astype(np.float64)))) * svh.astype(np.float64)[None, :]
    tensors = {'trellis': ('I16', packed.reshape(kt, nt, 16 * K)), 'suh': ('F16', suh)}
    if packed_sv:
        assert not out_scales and not zero.any(), 'packed output signs hold signs only (no scales, no zero columns)'
        tensors['sv'] = ('I16', pack_signs(sv))
    else:
        tensors['svh'] = ('F16', svh)
    if cb in MULT:
        tensors[cb] = ('I32', np.array(np.uint32(MULT[cb]).view(np.int32)))
    return tensors, w_hat, eff[:in_f, :out_f].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('src')
    ap.add_argument('out')
    ap.add_argument('--bits', type=int, default=4)
    ap.add_argument('--head-bits', type=int, default=6)
    ap.add_argument('--attn-bits', type=int)
    ap.add_argument('--mlp-bits', type=int)
    ap.add_argument('--codebook', default='mul1', choices=['mul1', 'mcg', '3inst'])
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--reference', default='')
    ap.add_argument('--out-scales', default='always', choices=['always', 'never'])
    ap.add_argument('--packed-sv', action='store_true', help='output signs as I16 bitfields (.sv), as early files stored them')
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    src = read_bf16(os.path.join(a.src, 'model.safetensors'))
    out, ref, total_bits, total_weights = {}, {}, 0, 0
    for name, (shape, bits16) in src.items():
        module = name[:-len('.weight')]
        linear = len(shape) == 2 and name.endswith('_proj.weight') or name == 'lm_head.weight'
        if not linear:
            out[name] = ('BF16', bits16)
            continue
        if name == 'lm_head.weight' and a.head_bits == 16:
            out[name] = ('F16', from_bf16(bits16).astype(np.float16))  # an unquantized head: fp16, as exllamav3 stores it
            continue
        K = a.head_bits if name == 'lm_head.weight' else (a.attn_bits if 'self_attn' in name and a.attn_bits else
                                                          a.mlp_bits if '.mlp.' in name and a.mlp_bits else a.bits)
        tensors, w_hat, eff = quantize(from_bf16(bits16).astype(np.float64), K, a.codebook, rng, a.out_scales == 'always',
                                       a.packed_sv and shape[0] % 128 == 0)
        for sub, t in tensors.items():
            out[module + '.' + sub] = t
        total_bits += tensors['trellis'][1].size * 16
        total_weights += shape[0] * shape[1]
        if name in a.reference.split(','):
            ref[name + '.w_hat'] = ('F16', w_hat)
            ref[name + '.effective'] = ('F32', eff.astype(np.float32))
        print(f'{name}: K={K}', file=sys.stderr)
    write(os.path.join(a.out, 'model.safetensors'), out)
    if ref:
        write(a.out.rstrip('/') + '.reference.safetensors', ref)
    cfg = json.load(open(os.path.join(a.src, 'config.json')))
    cfg['quantization_config'] = {'quant_method': 'exl3', 'version': '1.4.1', 'bits': a.bits, 'head_bits': a.head_bits,
                                  'out_scales': a.out_scales, 'codebook': a.codebook,
                                  'producer': 'spindle scripts/make_exl3_fixture.py (Viterbi trellis without calibration, not exllamav3\'s quantizer)'}
    json.dump(cfg, open(os.path.join(a.out, 'config.json'), 'w'), indent=2)
    for f in ('generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'):
        if os.path.exists(os.path.join(a.src, f)):
            shutil.copy(os.path.join(a.src, f), os.path.join(a.out, f))
    print(f'{total_bits / total_weights:.3f} bits a weight over the linear layers (padding included)', file=sys.stderr)


if __name__ == '__main__':
    main()
