#!/usr/bin/env python3
"""A vocabulary-only GGUF with a gpt2-style byte-level BPE vocabulary (tokenizer.ggml.model "gpt2": tokens, token types,
merges, tokenizer.ggml.pre), written with llama.cpp's gguf-py; and the ids llama.cpp's own llama-tokenize gives for a list
of texts (tokenizer goldens).

The vocabulary is trained here (no pretrained byte-level BPE is downloadable): GPT-2's byte-to-unicode alphabet (the 188
printable bytes as themselves, the others as U+0100 onward), then MERGES merges learned greedily (the most frequent
adjacent pair of the training texts' words, ties to the first seen) over words split roughly as the pre-tokenizer does
(letters with one leading space, digits, other symbols); the merges only need to be a valid vocabulary for the check, since
llama-tokenize decides the ids. Special tokens: <|begin_of_text|>, <|end_of_text|>, <|im_start|>, <|im_end|> (CONTROL) and
<think>, </think> (USER_DEFINED), after the learned tokens.

Usage: make_gguf_bpe_vocab.py GGUF_PY_DIR TEXTS.jsonl OUT.gguf PRE MERGES [LLAMA_TOKENIZE GOLDENS.jsonl]
  PRE: tokenizer.ggml.pre (gpt-2, llama-bpe, qwen2)"""
import collections
import json
import os
import re
import sys

sys.path.insert(0, sys.argv[1])
import gguf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_tokenize_goldens import write_goldens  # noqa: E402

texts_path, out, pre, n_merges = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
texts = [json.loads(line)['text'] for line in open(texts_path, encoding='utf-8')]


def byte_alphabet():
    keep = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


B2U = byte_alphabet()
words = collections.Counter()
for t in texts:
    for w in re.findall(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+", t):
        words[tuple(B2U[b] for b in w.encode('utf-8'))] += 1
vocab = [B2U[b] for b in range(256)]
seen = set(vocab)
merges = []
words = dict(words)
for _ in range(n_merges):
    pairs = collections.Counter()
    for w, c in words.items():
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += c
    if not pairs:
        break
    (a, b), _ = max(pairs.items(), key=lambda kv: kv[1])
    merges.append(a + ' ' + b)
    if a + b not in seen:
        vocab.append(a + b)
        seen.add(a + b)
    merged = {}
    for w, c in words.items():
        out_w, i = [], 0
        while i < len(w):
            if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                out_w.append(a + b)
                i += 2
            else:
                out_w.append(w[i])
                i += 1
        merged[tuple(out_w)] = merged.get(tuple(out_w), 0) + c
    words = merged
types = [gguf.TokenType.NORMAL] * len(vocab)
for s, kind in [('<|begin_of_text|>', gguf.TokenType.CONTROL), ('<|end_of_text|>', gguf.TokenType.CONTROL),
                ('<|im_start|>', gguf.TokenType.CONTROL), ('<|im_end|>', gguf.TokenType.CONTROL),
                ('<think>', gguf.TokenType.USER_DEFINED), ('</think>', gguf.TokenType.USER_DEFINED)]:
    vocab.append(s)
    types.append(kind)
w = gguf.GGUFWriter(out, 'llama')
w.add_name(f'byte-level BPE vocabulary ({pre})')
w.add_context_length(4096)
w.add_embedding_length(64)
w.add_block_count(1)
w.add_feed_forward_length(128)
w.add_head_count(4)
w.add_head_count_kv(4)
w.add_rope_dimension_count(16)
w.add_layer_norm_rms_eps(1e-5)
w.add_vocab_size(len(vocab))
w.add_tokenizer_model('gpt2')
w.add_tokenizer_pre(pre)
w.add_token_list(vocab)
w.add_token_types(types)
w.add_token_merges(merges)
w.add_bos_token_id(vocab.index('<|begin_of_text|>'))
w.add_eos_token_id(vocab.index('<|im_end|>'))
w.add_add_bos_token(pre == 'llama-bpe')
w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out, len(vocab), 'tokens', len(merges), 'merges')
if len(sys.argv) > 6:
    write_goldens(sys.argv[6], out, texts, sys.argv[7])
