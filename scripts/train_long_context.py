#!/usr/bin/env python3
"""Trains spindle-long-context: a small stock llama (LlamaForCausalLM, ~3.7M parameters, 7-8 MB in bf16) with a
32,768-token context, on generated documents whose next tokens can only be predicted by attending far back. It stands in
for the 33B's long context in `spindle kl` (the long-context category: what an fp8 or 4-bit KV cache does to attention
at 16K-32K positions), where the bundled chat model (2,048 positions) cannot.

A document is a registry: lines that give a four-digit code two words ("code 4821 is amber river."), filler sentences,
and questions about codes given anywhere earlier ("Which words have code 4821? amber river."), the code asked for drawn
uniformly from all codes so far (so most answers lie thousands of tokens back); a few lines repeat a whole earlier line.
The answers' tokens weigh 4 in the loss. About 64K tokens a step, in a curriculum of lengths (CURRICULUM): documents of
256-1K tokens first, where few codes are given and recall is easy to find, then 1K-8K, then 2K-32K. (The first run,
session 39, drew 2K-32K from the start with half the lines new facts: in 2,650 steps the model learned the registry's
language but no recall, 0% of answers beyond 2K.) Questions are the majority of lines, so most of the loss is recall.

Then, with HF transformers (sdpa, bf16) on held-out documents of 4K, 16K and 32K tokens: the share of answers whose
every token is the greedy argmax, by how far back the fact lies. Written: OUT/spindle-long-context (the model, the chat
tokenizer, the kl corpus kl-long.jsonl of three held-out documents of 17K-32K tokens) and OUT/long-context-report.json.

Usage: python3 train_long_context.py TOKENIZER_DIR OUT_DIR [--seconds S]
"""
import bisect
import collections
import json
import math
import multiprocessing as mp
import os
import random
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 20261207
DEV = "cuda"
VOCAB = 4096
CONTEXT = 32768
SHAPE = dict(hidden_size=256, intermediate_size=640, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, head_dim=32)
# (share of the training time it starts at, lengths and their weights)
CURRICULUM = [(0.0, [(256, 0.3), (512, 0.4), (1024, 0.3)]),
              (0.25, [(1024, 0.3), (2048, 0.4), (8192, 0.3)]),
              (0.5, [(2048, 0.3), (8192, 0.35), (CONTEXT, 0.35)])]
TOKENS_A_STEP = 65536
ANSWER_WEIGHT = 4.0

WORDS = ("amber river stone cloud maple tiger silver garden lantern harbor meadow copper falcon willow ember canyon "
         "orchid marble thunder violet cedar comet glacier velvet saffron quartz raven lotus prairie cobalt juniper "
         "walnut breeze crimson island pepper summit jasmine anchor sparrow timber coral meteor hazel fossil olive "
         "desert crystal bamboo cotton dragon eagle forest ginger honey ivory jungle kettle lemon mango needle ocean "
         "pebble quiver rocket saddle tulip umbrella valley wagon yarrow zebra almond bridge candle dolphin engine "
         "feather goblet hammer igloo jacket kitten ladder magnet nickel onion parrot quilt ribbon shovel tunnel "
         "violin whistle yogurt badger cactus daisy ferret gravel heron iris jelly koala lilac mossy nectar").split()
FILLER = ("the a clerk wrote down every entry with care before the office closed for the night and nobody "
          "checked the old pages again since the ledger was kept in a drawer near the window").split()

_tok = None


def tokenizer(tok_dir):
    global _tok
    if _tok is None:
        _tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    return _tok


def document_text(r, chars):
    """A registry document of about `chars` characters, and the character spans of its answers with the position of the
    line that gave each fact (for the distance of the answer)."""
    out = [f"Registry {r.randint(100, 999)}. Each line gives a code and its two words.\n"]
    n = len(out[0])
    facts = {}  # code -> (words, char offset of the fact's line)
    answers = []  # (start, end, fact offset)
    while n < chars:
        k = r.random()
        if k < 0.35 or len(facts) < 4:
            code = r.randint(1000, 9999)
            while code in facts:
                code = r.randint(1000, 9999)
            words = f"{r.choice(WORDS)} {r.choice(WORDS)}"
            facts[code] = (words, n)
            line = f"code {code} is {words}.\n"
        elif k < 0.42:
            line = " ".join(r.choice(FILLER) for _ in range(r.randint(5, 12))).capitalize() + ".\n"
        elif k < 0.95:
            code = r.choice(list(facts))
            words, at = facts[code]
            q = f"Which words have code {code}?"
            answers.append((n + len(q), n + len(q) + 1 + len(words), at))
            line = f"{q} {words}.\n"
        else:
            code = r.choice(list(facts))
            words, at = facts[code]
            q = f"Repeat the line of code {code}:"
            a = f" code {code} is {words}."
            answers.append((n + len(q), n + len(q) + len(a), at))
            line = q + a + "\n"
        out.append(line)
        n += len(line)
    return "".join(out), answers


def encode(tok_dir, seed, length):
    """Token ids (exactly `length`, the chat tokenizer's <|im_start|> first), loss weights, and the answers as
    (first token, last token + 1, fact's token position)."""
    r = random.Random(seed)
    tok = tokenizer(tok_dir)
    chars = int(length * 3.2)
    while True:
        text, answers = document_text(r, chars)
        enc = tok.encode(text, add_special_tokens=True)
        if len(enc.ids) >= length:
            break
        chars = int(chars * 1.25)
    ids = enc.ids[:length]
    starts = [o[0] for o in enc.offsets[:length]]
    weights = [1.0] * length
    spans = []
    for s, e, at in answers:
        t0 = bisect.bisect_left(starts, s)
        t1 = bisect.bisect_left(starts, e)
        if t1 >= length or t0 >= t1:
            continue
        for t in range(t0, t1):
            weights[t] = ANSWER_WEIGHT
        spans.append((t0, t1, bisect.bisect_left(starts, at)))
    return ids, weights, spans, text[:enc.offsets[length - 1][1]]


def job(args):
    tok_dir, seed, length = args
    ids, weights, _, _ = encode(tok_dir, seed, length)
    return length, np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float32)


def lengths_at(progress):
    return [ls for start, ls in CURRICULUM if start <= progress][-1]


def step_jobs(tok_dir, seed0, progress):
    """Documents for one step after another, all of one length drawn from the curriculum's stage at progress()."""
    r = random.Random(seed0)
    s = seed0 * 1000
    while True:
        ls = lengths_at(progress())
        length = r.choices([l for l, _ in ls], [w for _, w in ls])[0]
        for _ in range(max(1, TOKENS_A_STEP // length)):
            s += 1
            yield tok_dir, s, length


def config(tok_dir):
    ids = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))["added_tokens_decoder"]
    by_name = {v["content"]: int(k) for k, v in ids.items()}
    return LlamaConfig(vocab_size=VOCAB, max_position_embeddings=CONTEXT, rms_norm_eps=1e-5, rope_theta=1000000.0,
                       tie_word_embeddings=True, bos_token_id=by_name["<|im_start|>"], eos_token_id=by_name["<|im_end|>"],
                       pad_token_id=0, attention_bias=False, mlp_bias=False, hidden_act="silu", **SHAPE)


def train(tok_dir, seconds, lr=2e-3):
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config(tok_dir)).to(DEV)
    model.config._attn_implementation = "sdpa"
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step, t0, losses = 0, time.time(), []
    with mp.get_context("spawn").Pool(12) as pool:
        # documents made ahead by the pool, at most 320 in flight (Pool.imap would drain the endless job list)
        jobs = step_jobs(tok_dir, SEED, lambda: (time.time() - t0) / seconds)
        ahead = collections.deque(pool.apply_async(job, (next(jobs),)) for _ in range(320))

        def document():
            d = ahead.popleft().get()
            ahead.append(pool.apply_async(job, (next(jobs),)))
            return d

        pending = document()
        while True:
            progress = (time.time() - t0) / seconds
            if progress >= 1:
                break
            length = pending[0]
            batch = [pending]
            while len(batch) < max(1, TOKENS_A_STEP // length):
                d = document()
                if d[0] != length:  # the curriculum moved on: this step ends short, the next starts with d
                    break
                batch.append(d)
            else:
                d = document()
            pending = d
            x = torch.from_numpy(np.stack([b[1] for b in batch])).to(DEV)
            w = torch.from_numpy(np.stack([b[2] for b in batch])).to(DEV)
            scale = min(1.0, (step + 1) / 200) * 0.5 * (1 + math.cos(math.pi * progress))
            for g in opt.param_groups:
                g["lr"] = lr * max(scale, 0.02)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=x).logits
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none")
            ww = w[:, 1:].reshape(-1)
            loss = (loss * ww).sum() / ww.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 100 == 0:
                losses.append(round(loss.item(), 4))
                print(f"step {step} len {length} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
    return model, params, step, time.time() - t0, losses


@torch.no_grad()
def evaluate(model, tok_dir, lengths, per_length):
    """Greedy accuracy of the answers (every token the argmax), by the distance back to the fact."""
    model.eval()
    bins = [0, 512, 2048, 8192, 16384, CONTEXT]
    report = {}
    for length in lengths:
        hits = [0] * (len(bins) - 1)
        total = [0] * (len(bins) - 1)
        for i in range(per_length):
            ids, _, spans, _ = encode(tok_dir, 10 ** 9 + length * 100 + i, length)
            x = torch.tensor([ids], device=DEV)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                pred = model(input_ids=x).logits[0].argmax(-1)
            for t0, t1, at in spans:
                ok = bool((pred[t0 - 1:t1 - 1] == x[0, t0:t1]).all())
                d = t0 - at
                b = next(j for j in range(len(bins) - 1) if d < bins[j + 1])
                hits[b] += ok
                total[b] += 1
        report[str(length)] = {f"{bins[j]}-{bins[j + 1]}": {"answers": total[j], "exact": round(hits[j] / total[j], 4) if total[j] else None}
                               for j in range(len(bins) - 1)}
        print(f"eval {length}: {report[str(length)]}", flush=True)
    return report


def save(model, out, tok_dir):
    os.makedirs(out, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out, safe_serialization=True)
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]:
        shutil.copy(os.path.join(tok_dir, f), os.path.join(out, f))
    gen = {"bos_token_id": model.config.bos_token_id, "eos_token_id": model.config.eos_token_id, "pad_token_id": 0,
           "do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    # the kl corpus: three held-out documents of 17K, 24K and 32K tokens, as text (Spindle tokenizes them itself)
    with open(os.path.join(out, "kl-long.jsonl"), "w") as f:
        for i, length in enumerate([17000, 24000, CONTEXT - 8]):
            _, _, _, text = encode(tok_dir, 2 * 10 ** 9 + i, length)
            f.write(json.dumps({"category": "long-context", "id": f"registry-{length // 1000}k", "text": text}, ensure_ascii=False) + "\n")


def main():
    tok_dir, out = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 300.0
    torch.backends.cuda.matmul.allow_tf32 = True
    model, params, steps, took, losses = train(tok_dir, seconds)
    print(f"trained {params} parameters, {steps} steps in {took:.0f}s", flush=True)
    acc = evaluate(model, tok_dir, [1024, 4096, 16384, CONTEXT], 4)
    save(model, os.path.join(out, "spindle-long-context"), tok_dir)
    with open(os.path.join(out, "long-context-report.json"), "w") as f:
        json.dump({"model": "spindle-long-context", "parameters": params, "shape": SHAPE, "context": CONTEXT, "rope_theta": 1e6,
                   "steps": steps, "seconds": round(took), "tokens_a_step": TOKENS_A_STEP, "curriculum": CURRICULUM,
                   "losses_every_100_steps": losses, "answer_accuracy_by_distance": acc, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name()}, f, indent=1)


if __name__ == "__main__":
    main()
