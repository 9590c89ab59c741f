#!/usr/bin/env python3
"""A seeded random llama checkpoint (bf16 safetensors + config.json), numpy only: a model of the shapes asked, for
fixtures that need particular shapes (e.g. rows of 256 for ggml's K-quants). Weights ~ N(0, 0.02), norms ~ 1 + N(0, 0.1).

Usage: make_random_llama.py OUT_DIR hidden intermediate layers heads kv_heads head_dim vocab seed"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_np import bf16_bits, write  # noqa: E402

out = sys.argv[1]
hidden, inter, layers, heads, kv, hd, vocab, seed = map(int, sys.argv[2:10])
rng = np.random.default_rng(seed)


t = {'model.embed_tokens.weight': rng.normal(0, 1, (vocab, hidden)), 'model.norm.weight': 1 + rng.normal(0, 0.1, hidden),
     'lm_head.weight': rng.normal(0, 0.02, (vocab, hidden))}
for l in range(layers):
    p = f'model.layers.{l}.'
    t[p + 'input_layernorm.weight'] = 1 + rng.normal(0, 0.1, hidden)
    t[p + 'post_attention_layernorm.weight'] = 1 + rng.normal(0, 0.1, hidden)
    t[p + 'self_attn.q_proj.weight'] = rng.normal(0, 0.02, (heads * hd, hidden))
    t[p + 'self_attn.k_proj.weight'] = rng.normal(0, 0.02, (kv * hd, hidden))
    t[p + 'self_attn.v_proj.weight'] = rng.normal(0, 0.02, (kv * hd, hidden))
    t[p + 'self_attn.o_proj.weight'] = rng.normal(0, 0.02, (hidden, heads * hd))
    t[p + 'mlp.gate_proj.weight'] = rng.normal(0, 0.02, (inter, hidden))
    t[p + 'mlp.up_proj.weight'] = rng.normal(0, 0.02, (inter, hidden))
    t[p + 'mlp.down_proj.weight'] = rng.normal(0, 0.02, (hidden, inter))
write(f'{out}/model.safetensors', {name: ('BF16', bf16_bits(a)) for name, a in t.items()})
json.dump({'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'vocab_size': vocab, 'hidden_size': hidden,
           'intermediate_size': inter, 'num_hidden_layers': layers, 'num_attention_heads': heads, 'num_key_value_heads': kv,
           'head_dim': hd, 'max_position_embeddings': 2048, 'rms_norm_eps': 1e-5, 'rope_theta': 10000.0, 'tie_word_embeddings': False,
           'hidden_act': 'silu', 'bos_token_id': 1, 'eos_token_id': 2, 'torch_dtype': 'bfloat16'}, open(f'{out}/config.json', 'w'), indent=1)
print(out, sum(v.size for v in t.values()), 'parameters')
