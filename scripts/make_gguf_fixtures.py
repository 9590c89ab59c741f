#!/usr/bin/env python3
"""GGUF files of a Hugging Face llama checkpoint (bf16 safetensors), written with llama.cpp's gguf-py the way llama.cpp's
converter lays a llama model out: its tensor names, its llama.* metadata, q and k rows interleaved for ggml's rope (in each
head, row 2 i + j holds the published row j * half + i), 1-D norms in F32, every matrix (the embedding too) in the output
type. The quantized types are gguf-py's own quantizers (Q8_0, Q4_0: what llama-quantize computes for them).

Usage: make_gguf_fixtures.py GGUF_PY_DIR MODEL_DIR OUT_PREFIX TYPE...   (TYPE: BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1)
Writes OUT_PREFIX-<type>.gguf."""
import json
import struct
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
import gguf  # noqa: E402
from gguf import quants  # noqa: E402

model, prefix, types = sys.argv[2], sys.argv[3], sys.argv[4:]
cfg = json.load(open(f'{model}/config.json'))
rope_theta = cfg.get('rope_theta', cfg.get('rope_parameters', {}).get('rope_theta', 10000.0))  # def rope_theta: top level or rope_parameters
raw = open(f'{model}/model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n])
tensors = {}
for name, info in header.items():
    if name == '__metadata__':
        continue
    a, b = info['data_offsets']
    assert info['dtype'] == 'BF16', name
    u16 = np.frombuffer(raw[8 + n + a:8 + n + b], dtype='<u2').astype(np.uint32) << 16
    tensors[name] = u16.view(np.float32).reshape(info['shape'])

heads, kv = cfg['num_attention_heads'], cfg.get('num_key_value_heads', cfg['num_attention_heads'])
hidden = cfg['hidden_size']
head_dim = cfg.get('head_dim', hidden // heads)


def interleave(w, h):
    # published (h, 2, half, cols) -> ggml's (h, half, 2, cols)
    return w.reshape(h, 2, w.shape[0] // h // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


names = {'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight'}
for l in range(cfg['num_hidden_layers']):
    p, g = f'model.layers.{l}.', f'blk.{l}.'
    names.update({p + 'input_layernorm.weight': g + 'attn_norm.weight', p + 'self_attn.q_proj.weight': g + 'attn_q.weight',
                  p + 'self_attn.k_proj.weight': g + 'attn_k.weight', p + 'self_attn.v_proj.weight': g + 'attn_v.weight',
                  p + 'self_attn.o_proj.weight': g + 'attn_output.weight', p + 'post_attention_layernorm.weight': g + 'ffn_norm.weight',
                  p + 'mlp.gate_proj.weight': g + 'ffn_gate.weight', p + 'mlp.up_proj.weight': g + 'ffn_up.weight',
                  p + 'mlp.down_proj.weight': g + 'ffn_down.weight'})
for t in types:
    qtype = gguf.GGMLQuantizationType[t]
    w = gguf.GGUFWriter(f'{prefix}-{t.lower()}.gguf', 'llama')
    w.add_name(model.rstrip('/').split('/')[-1])
    w.add_context_length(cfg.get('max_position_embeddings', 4096))
    w.add_embedding_length(hidden)
    w.add_block_count(cfg['num_hidden_layers'])
    w.add_feed_forward_length(cfg['intermediate_size'])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(rope_theta)
    w.add_layer_norm_rms_eps(cfg.get('rms_norm_eps', 1e-5))
    w.add_vocab_size(cfg['vocab_size'])
    if cfg.get('bos_token_id') is not None:
        w.add_bos_token_id(cfg['bos_token_id'])
    eos = cfg.get('eos_token_id')
    if isinstance(eos, int):
        w.add_eos_token_id(eos)
    w.add_file_type(int({'BF16': gguf.LlamaFileType.MOSTLY_BF16, 'Q8_0': gguf.LlamaFileType.MOSTLY_Q8_0, 'Q4_0': gguf.LlamaFileType.MOSTLY_Q4_0,
                         'Q4_1': gguf.LlamaFileType.MOSTLY_Q4_1, 'Q5_0': gguf.LlamaFileType.MOSTLY_Q5_0, 'Q5_1': gguf.LlamaFileType.MOSTLY_Q5_1}[t]))
    for hf, name in names.items():
        if hf not in tensors:
            continue
        x = tensors[hf]
        if name.endswith('attn_q.weight'):
            x = interleave(x, heads)
        elif name.endswith('attn_k.weight'):
            x = interleave(x, kv)
        if x.ndim == 1:
            w.add_tensor(name, x.astype(np.float32))
        else:
            w.add_tensor(name, quants.quantize(np.ascontiguousarray(x), qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f'{prefix}-{t.lower()}.gguf')
