#!/usr/bin/env python3
"""A vocabulary-only GGUF (llama architecture, tokenizer.ggml.model "llama": pieces, scores, token types; no tensors) from
a Hugging Face model directory whose tokenizer.json is a byte-fallback BPE, written with llama.cpp's gguf-py; and the ids
llama.cpp's own llama-tokenize gives for a list of texts (tokenizer goldens).

Usage: make_gguf_vocab.py GGUF_PY_DIR MODEL_DIR OUT.gguf SPACE_PREFIX [LLAMA_TOKENIZE TEXTS.jsonl GOLDENS.jsonl]
  SPACE_PREFIX: true or false, tokenizer.ggml.add_space_prefix (false: a chat prompt, which begins with a special token,
  tokenizes as the Hugging Face tokenizer's Metaspace "first" does)
Piece types: added special tokens CONTROL, other added tokens USER_DEFINED, <0xXX> BYTE, the unk token UNKNOWN, the rest
NORMAL; scores -id (a BPE vocabulary's pieces in merge order); add_bos_token false."""
import json
import os
import re
import sys

sys.path.insert(0, sys.argv[1])
import gguf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_tokenize_goldens import write_goldens  # noqa: E402

model, out, prefix = sys.argv[2], sys.argv[3], sys.argv[4] == 'true'
cfg = json.load(open(f'{model}/config.json'))
rope_theta = cfg.get('rope_theta', cfg.get('rope_parameters', {}).get('rope_theta', 10000.0))  # def rope_theta: top level or rope_parameters
tj = json.load(open(f'{model}/tokenizer.json'))
vocab = dict(tj['model']['vocab'])
added = {t['content']: t for t in tj['added_tokens']}
for t in tj['added_tokens']:
    vocab[t['content']] = t['id']
n = cfg['vocab_size']
pieces, types, scores = [''] * n, [gguf.TokenType.UNUSED] * n, [0.0] * n
for piece, i in vocab.items():
    if i >= n:
        continue
    pieces[i] = piece
    scores[i] = -float(i)
    if piece in added:
        types[i] = gguf.TokenType.CONTROL if added[piece]['special'] else gguf.TokenType.USER_DEFINED
    elif re.fullmatch(r'<0x[0-9A-F]{2}>', piece):
        types[i] = gguf.TokenType.BYTE
    elif piece == tj['model'].get('unk_token'):
        types[i] = gguf.TokenType.UNKNOWN
    else:
        types[i] = gguf.TokenType.NORMAL
for i in range(n):
    if pieces[i] == '':
        pieces[i] = f'[PAD{i}]'
w = gguf.GGUFWriter(out, 'llama')
w.add_name(model.rstrip('/').split('/')[-1] + ' vocabulary')
w.add_context_length(cfg.get('max_position_embeddings', 4096))
w.add_embedding_length(cfg['hidden_size'])
w.add_block_count(cfg['num_hidden_layers'])
w.add_feed_forward_length(cfg['intermediate_size'])
w.add_head_count(cfg['num_attention_heads'])
w.add_head_count_kv(cfg.get('num_key_value_heads', cfg['num_attention_heads']))
w.add_rope_dimension_count(cfg.get('head_dim', cfg['hidden_size'] // cfg['num_attention_heads']))
w.add_layer_norm_rms_eps(cfg.get('rms_norm_eps', 1e-5))
w.add_rope_freq_base(rope_theta)
w.add_key_length(cfg.get('head_dim', cfg['hidden_size'] // cfg['num_attention_heads']))
w.add_value_length(cfg.get('head_dim', cfg['hidden_size'] // cfg['num_attention_heads']))
w.add_vocab_size(n)
w.add_tokenizer_model('llama')
w.add_token_list(pieces)
w.add_token_scores(scores)
w.add_token_types(types)
if cfg.get('bos_token_id') is not None:
    w.add_bos_token_id(cfg['bos_token_id'])
eos = cfg.get('eos_token_id')
w.add_eos_token_id(eos if isinstance(eos, int) else eos[0])
if tj['model'].get('unk_token') in vocab:
    w.add_unk_token_id(vocab[tj['model']['unk_token']])
w.add_add_bos_token(False)
w.add_add_space_prefix(prefix)
tpl = os.path.join(model, 'chat_template.jinja')
if os.path.exists(tpl):
    w.add_chat_template(open(tpl).read())
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out)
if len(sys.argv) > 5:
    tool, texts, goldens = sys.argv[5:8]
    write_goldens(tool, out, [json.loads(line)['text'] for line in open(texts)], goldens)
