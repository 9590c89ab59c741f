#!/usr/bin/env python3
"""Trains Spindle's bundled agent model (models/spindle-chat-agent): the target's shape and tokenizer
(scripts/train_chat_models.py), trained at 4,096 positions on chatdata.py's conversations, most of
them in agent CLIs' envelopes (scripts/agentdata.py: long system prompts, reminder blocks, namespaced
tools among distractors), so that the real Claude Code and Codex CLIs, with trimmed prompts, can run
a whole tool turn against the server (AgentCliTest).

Then, with HF transformers on the GPU: held-out accuracy per kind, plain and in envelopes.

Usage: python3 train_agent_model.py TOKENIZER_DIR TEMPLATE OUT_DIR [--seconds S] [--conversations N] [--init MODEL_DIR] [--lr LR]
Writes OUT_DIR/config.json, generation_config.json, the weights in shards of at most 14 MB (what the
GPU machine can hand back) and OUT_DIR/report.json; the tokenizer files and template are the target's.
"""
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
import agentdata  # noqa: E402
import chatdata  # noqa: E402
import train_chat_models as base  # noqa: E402

MAX_LEN = 4096
SEED = base.SEED + 1


def encode(tok, template, n, seed):
    """Conversations as ids and loss masks (assistant turns only); ones cut off by MAX_LEN are dropped."""
    r = random.Random(seed)
    seqs, masks = [], []
    while len(seqs) < n:
        conv = agentdata.conversation(r)
        text = chatdata.render_training(conv, template)
        enc = tok.encode(text, add_special_tokens=False)
        if len(enc.ids) > MAX_LEN:
            continue
        spans = base.assistant_spans(text)
        seqs.append(enc.ids)
        masks.append([any(s <= off[0] < e for s, e in spans) for off in enc.offsets])
    return seqs, masks


def batches(seqs, masks, tokens_per_batch, seed):
    """Batches of similar lengths (sorted within shuffled windows), padded, up to a token budget each."""
    order = list(range(len(seqs)))
    random.Random(seed).shuffle(order)
    window = 4096
    out = []
    for w in range(0, len(order), window):
        chunk = sorted(order[w:w + window], key=lambda j: len(seqs[j]))
        i = 0
        while i < len(chunk):
            L = len(seqs[chunk[i]])
            b = max(1, tokens_per_batch // max(L, 1))
            idx = chunk[i:i + b]
            L = max(len(seqs[j]) for j in idx)
            b = max(1, min(len(idx), tokens_per_batch // L))
            idx = idx[:b]
            out.append(idx)
            i += len(idx)
    random.Random(seed + 1).shuffle(out)
    for idx in out:
        L = max(len(seqs[j]) for j in idx)
        x = torch.zeros((len(idx), L), dtype=torch.long)
        m = torch.zeros((len(idx), L), dtype=torch.bool)
        for b, j in enumerate(idx):
            x[b, :len(seqs[j])] = torch.tensor(seqs[j])
            m[b, :len(masks[j])] = torch.tensor(masks[j])
        yield x, m


def config(tok_dir):
    cfg = base.config(base.TARGET, tok_dir)
    cfg.max_position_embeddings = MAX_LEN
    return cfg


def train(tok_dir, seqs, masks, seconds, lr, init):
    """From the bundled target's weights (init) when given: it knows the tasks, and learns the envelopes and the longer context."""
    torch.manual_seed(SEED)
    if init:
        model = base.LlamaForCausalLM.from_pretrained(init, dtype=torch.float32).to(base.DEV)
        model.config.max_position_embeddings = MAX_LEN
    else:
        model = base.LlamaForCausalLM(config(tok_dir)).to(base.DEV)
    model.config._attn_implementation = "sdpa"
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step, t0, epoch, losses, done = 0, time.time(), 0, [], False
    while not done:
        for x, m in batches(seqs, masks, 48 * 1024, SEED + epoch):
            progress = (time.time() - t0) / seconds
            if progress >= 1:
                done = True
                break
            x, m = x.to(base.DEV, non_blocking=True), m.to(base.DEV, non_blocking=True)
            scale = min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * progress))
            for g in opt.param_groups:
                g["lr"] = lr * max(scale, 0.02)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=x).logits
            mm = m[:, 1:]
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, base.VOCAB), x[:, 1:].reshape(-1), reduction="none")
            loss = (loss * mm.reshape(-1)).sum() / mm.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 100 == 0:
                losses.append(round(loss.item(), 4))
                print(f"step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
        epoch += 1
    return model, step, time.time() - t0, losses


def correct(conv, reply):
    """base.correct, with the expected call taken from the first assistant turn (an envelope puts a system turn first)."""
    if conv["kind"].startswith("tool_"):
        call = next(m for m in conv["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]
        return f"<function={call['name']}>" in reply and all(f"<parameter={k}>\n{v}\n</parameter>" in reply for k, v in call["arguments"].items())
    return base.correct(conv, reply)


@torch.no_grad()
def evaluate(model, tok, template, per_kind, eos):
    """Held-out greedy accuracy per kind, for plain conversations and the same kinds in envelopes."""
    r = random.Random(SEED + 7)
    by_kind = {}
    while sum(len(v) for v in by_kind.values()) < per_kind * 12:
        conv = chatdata.conversation(r)
        base_kind = "tool" if conv["kind"].startswith("tool_") else conv["kind"].split("_")[0]
        for c, k in ((conv, base_kind), (agentdata.envelope(conv, r), "agent_" + base_kind)):
            if len(by_kind.setdefault(k, [])) < per_kind:
                by_kind[k].append(c)
    acc = {}
    for kind, convs in sorted(by_kind.items()):
        ok = 0
        for conv in convs:
            if conv["kind"].startswith("agent_"):
                conv = dict(conv, kind=conv["kind"][len("agent_"):])
            ids = tok.encode(base.prompt_of(conv, template), add_special_tokens=False).ids
            out = base.generate(model, ids, 120, eos)
            ok += correct(conv, tok.decode(out, skip_special_tokens=False))
        acc[kind] = round(ok / len(convs), 3)
    return acc


def main():
    tok_dir, template_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    template = open(template_path).read()
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    t0 = time.time()
    seqs, masks = encode(tok, template, int(base.arg("--conversations", 60000)), SEED)
    lengths = sorted(map(len, seqs))
    print(f"data: {len(seqs)} conversations, {sum(lengths)} tokens (median {lengths[len(lengths) // 2]}, max {lengths[-1]}), "
          f"{time.time() - t0:.0f}s", flush=True)
    init = sys.argv[sys.argv.index("--init") + 1] if "--init" in sys.argv else None
    model, steps, took, losses = train(tok_dir, seqs, masks, base.arg("--seconds", 300), base.arg("--lr", 2e-3), init)
    os.makedirs(out, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out, safe_serialization=True, max_shard_size="14MB")
    eos = model.config.eos_token_id
    gen = {"bos_token_id": model.config.bos_token_id, "eos_token_id": eos, "pad_token_id": 0,
           "do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    model = base.LlamaForCausalLM.from_pretrained(out, dtype=torch.bfloat16, attn_implementation="eager").to(base.DEV).eval()
    report = {"seed": SEED, "conversations": len(seqs), "tokens": sum(lengths), "max_len": MAX_LEN, "shape": base.TARGET,
              "parameters": sum(p.numel() for p in model.parameters()), "init": init, "steps": steps, "train_seconds": round(took, 1),
              "loss_every_100_steps": losses, "held_out_accuracy": evaluate(model, tok, template, 8, eos)}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
