#!/usr/bin/env python3
"""Writes a checkpoint of a model shape in the published HF layout, for measuring the start (load and
upload) on the GPU machine without the real weights: config.json copied from SHAPE_DIR, bf16 tensors of
every llama weight under their HF names, in shards of at most --shard-gb GB with a
model.safetensors.index.json, as Hugging Face publishes them. The values are pseudo-random bf16 bytes with
the exponent kept small (no NaN or infinity), written for real (not sparse), so reading them costs what
reading the real release costs once it is in the page cache (write it to /dev/shm, or to disk and read it
once, for a warm cache).

Usage: python3 make_shape_checkpoint.py SHAPE_DIR OUT_DIR [--shard-gb 5] [--layers N]
--layers N: only N decoder layers (the config says so), for a checkpoint that fits where the whole one
does not (a 64 GB /dev/shm); the upload's rate is the same.
"""
import json
import os
import struct
import sys

import numpy as np


def tensors(cfg):
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", (v, h)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", (h,)
        yield p + "self_attn.q_proj.weight", (q, h)
        yield p + "self_attn.k_proj.weight", (kv, h)
        yield p + "self_attn.v_proj.weight", (kv, h)
        yield p + "self_attn.o_proj.weight", (h, q)
        yield p + "post_attention_layernorm.weight", (h,)
        yield p + "mlp.gate_proj.weight", (i, h)
        yield p + "mlp.up_proj.weight", (i, h)
        yield p + "mlp.down_proj.weight", (h, i)
    yield "model.norm.weight", (h,)
    if not cfg.get("tie_word_embeddings", False):
        yield "lm_head.weight", (v, h)


def main():
    shape_dir, out = sys.argv[1], sys.argv[2]
    shard_bytes = int(float(sys.argv[sys.argv.index("--shard-gb") + 1]) * 1e9) if "--shard-gb" in sys.argv else 5 * 10**9
    cfg = json.load(open(os.path.join(shape_dir, "config.json")))
    if "--layers" in sys.argv:
        cfg["num_hidden_layers"] = int(sys.argv[sys.argv.index("--layers") + 1])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    shards, cur, size = [], [], 0
    for name, shape in tensors(cfg):
        n = 2 * int(np.prod(shape))
        if cur and size + n > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape, n))
        size += n
    shards.append(cur)
    # 64 MiB of bf16 values in [-2, 2): random mantissas, small exponents
    rng = np.random.default_rng(1)
    block = (rng.standard_normal(32 << 20, dtype=np.float32) * 0.02).astype(np.float32).view(np.uint32)
    block = (block >> 16).astype(np.uint16).tobytes()
    weight_map, total = {}, 0
    for k, shard in enumerate(shards):
        fn = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for name, shape, n in shard:
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
            off += n
            weight_map[name] = fn
        hb = json.dumps(header).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        with open(os.path.join(out, fn), "wb") as f:
            f.write(struct.pack("<Q", len(hb)))
            f.write(hb)
            left = off
            while left > 0:
                w = min(left, len(block))
                f.write(block[:w])
                left -= w
        total += off
        print(f"{fn}: {off / 1e9:.2f} GB", flush=True)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    print(f"{len(shards)} shards, {total / 1e9:.1f} GB", flush=True)


if __name__ == "__main__":
    main()
