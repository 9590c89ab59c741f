#!/usr/bin/env python3
"""Trains Spindle's bundled chat models: a target (~14M parameters) and a drafter (~2M),
both stock llama (LlamaForCausalLM: HF transformers loads them unchanged, like the
Nanbeige 4.3 / 4.1 pair they stand in for), on the same tokenizer (Nanbeige's format,
scripts/make_tokenizer.py) and the same generated chats (scripts/chatdata.py).

Then it measures, with HF transformers on the GPU: held-out accuracy per task kind for
both models, the drafter's greedy acceptance rate against the target (k = 4 drafted
tokens per step), and records the target's greedy replies (eager attention, bf16) on
held-out prompts as a parity fixture for Spindle's CPU backend.

Usage: python3 train_chat_models.py TOKENIZER_DIR TEMPLATE OUT_DIR [--target-seconds S] [--drafter-seconds S]
Writes OUT_DIR/spindle-chat-target, OUT_DIR/spindle-chat-drafter, OUT_DIR/chat-parity/reference.json,
OUT_DIR/report.json.
"""
import json
import math
import os
import random
import re
import shutil
import sys
import time

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
import chatdata  # noqa: E402
import hf_jinja  # noqa: E402

SEED = 20261130
DEV = "cuda"
MAX_LEN = 384
VOCAB = 4096  # tokenizer ids < 4007; padded like the published 166,912-row head

TARGET = dict(hidden_size=320, intermediate_size=864, num_hidden_layers=10, num_attention_heads=10, num_key_value_heads=2, head_dim=32)
DRAFTER = dict(hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32)


def arg(name, default):
    return float(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def config(shape, tok_dir):
    ids = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))["added_tokens_decoder"]
    by_name = {v["content"]: int(k) for k, v in ids.items()}
    return LlamaConfig(vocab_size=VOCAB, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                       tie_word_embeddings=False, bos_token_id=by_name["<|im_start|>"], eos_token_id=by_name["<|im_end|>"],
                       pad_token_id=0, attention_bias=False, mlp_bias=False, hidden_act="silu", **shape)


def assistant_spans(text):
    """Character spans the model is trained on: each assistant turn after its header, through <|im_end|>."""
    spans = []
    for m in re.finditer(re.escape("<|im_start|>assistant\n"), text):
        end = text.find("<|im_end|>", m.end())
        spans.append((m.end(), end + len("<|im_end|>")))
    return spans


def encode_dataset(tok, template, n, seed):
    r = random.Random(seed)
    seqs, masks = [], []
    for _ in range(n):
        conv = chatdata.conversation(r)
        text = chatdata.render_training(conv, template)
        enc = tok.encode(text, add_special_tokens=False)
        spans = assistant_spans(text)
        mask = [any(s <= off[0] < e for s, e in spans) for off in enc.offsets]
        ids = enc.ids[:MAX_LEN]
        seqs.append(ids)
        masks.append(mask[:MAX_LEN])
    return seqs, masks


def batches(seqs, masks, batch, seed):
    order = list(range(len(seqs)))
    random.Random(seed).shuffle(order)
    for i in range(0, len(order) - batch + 1, batch):
        idx = order[i:i + batch]
        L = max(len(seqs[j]) for j in idx)
        x = torch.zeros((batch, L), dtype=torch.long)
        m = torch.zeros((batch, L), dtype=torch.bool)
        for b, j in enumerate(idx):
            x[b, :len(seqs[j])] = torch.tensor(seqs[j])
            m[b, :len(masks[j])] = torch.tensor(masks[j])
        yield x, m


def train(name, shape, tok_dir, seqs, masks, seconds, lr):
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config(shape, tok_dir)).to(DEV)
    model.config._attn_implementation = "sdpa"
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    batch = 128
    step, t0, epoch = 0, time.time(), 0
    losses = []
    done = False
    while not done:
        for x, m in batches(seqs, masks, batch, SEED + epoch):
            x, m = x.to(DEV, non_blocking=True), m.to(DEV, non_blocking=True)
            progress = (time.time() - t0) / seconds  # cosine schedule over the time budget
            if progress >= 1:
                done = True
                break
            scale = min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * progress))
            for g in opt.param_groups:
                g["lr"] = lr * max(scale, 0.02)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=x).logits
            tgt = x[:, 1:]
            mm = m[:, 1:]
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, VOCAB), tgt.reshape(-1), reduction="none")
            loss = (loss * mm.reshape(-1)).sum() / mm.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 200 == 0:
                losses.append(round(loss.item(), 4))
                print(f"{name} step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
        epoch += 1
    return model, params, step, time.time() - t0, losses


def save(model, out, tok_dir, template):
    os.makedirs(out, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out, safe_serialization=True)
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]:
        shutil.copy(os.path.join(tok_dir, f), os.path.join(out, f))
    with open(os.path.join(out, "chat_template.jinja"), "w") as f:
        f.write(template)
    gen = {"bos_token_id": model.config.bos_token_id, "eos_token_id": model.config.eos_token_id, "pad_token_id": 0,
           "do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)


def load_eager(path):
    return LlamaForCausalLM.from_pretrained(path, dtype=torch.bfloat16, attn_implementation="eager").to(DEV).eval()


def prompt_of(conv, template):
    """The chat up to the point the model must act: the first assistant turn's generation prompt."""
    msgs = conv["messages"]
    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    return hf_jinja.render(template, msgs[:first], tools=conv["tools"], add_generation_prompt=True, **conv["kwargs"])


@torch.no_grad()
def greedy(model, ids, max_new, eos):
    """Greedy decoding by full recompute (no cache), recording HF's top-2 margins."""
    seq = list(ids)
    out, margins, tops = [], [], []
    for _ in range(max_new):
        logits = model(input_ids=torch.tensor([seq], device=DEV)).logits[0, -1].float()
        top2 = torch.topk(logits, 2)
        t = int(torch.argmax(logits))
        out.append(t); margins.append(float(top2.values[0] - top2.values[1])); tops.append(float(top2.values[0]))
        seq.append(t)
        if t == eos:
            break
    return out, margins, tops


def correct(conv, reply):
    kind = conv["kind"]
    if kind.startswith("tool_"):
        call = conv["messages"][1]["tool_calls"][0]["function"]
        if f"<function={call['name']}>" not in reply:
            return False
        return all(f"<parameter={k}>\n{v}\n</parameter>" in reply for k, v in call["arguments"].items())
    answer = reply.split("</think>")[-1].strip()
    value = conv["answer"]
    if kind.endswith("_json"):
        try:
            return json.loads(answer).get("answer") == value
        except (ValueError, AttributeError):
            return False
    if isinstance(value, bool):
        return answer.startswith("Yes" if value else "No")
    return re.search(r"(?<![\d.])" + re.escape(str(value)) + r"(?![\d])", answer) is not None


@torch.no_grad()
def generate(model, ids, max_new, eos):
    """HF's own greedy generate (with its KV cache): tokens after the prompt."""
    cfg = GenerationConfig(do_sample=False, max_new_tokens=max_new, eos_token_id=eos if eos >= 0 else None, pad_token_id=0)
    out = model.generate(torch.tensor([ids], device=DEV), generation_config=cfg)
    return out[0, len(ids):].tolist()


@torch.no_grad()
def evaluate(model, tok, template, per_kind, eos):
    r = random.Random(SEED + 7)
    by_kind = {}
    while sum(len(v) for v in by_kind.values()) < per_kind * 6:
        conv = chatdata.conversation(r)
        base = conv["kind"].split("_")[0] if not conv["kind"].startswith("tool_") else "tool"
        if len(by_kind.setdefault(base, [])) < per_kind:
            by_kind[base].append(conv)
    acc = {}
    for kind, convs in by_kind.items():
        ok = 0
        for conv in convs:
            ids = tok.encode(prompt_of(conv, template), add_special_tokens=False).ids
            out = generate(model, ids, 120, eos)
            ok += correct(conv, tok.decode(out, skip_special_tokens=False))
        acc[kind] = round(ok / len(convs), 3)
    return acc


@torch.no_grad()
def acceptance(target, drafter, tok, template, n, eos, k=4):
    r = random.Random(SEED + 11)
    drafted = accepted = 0
    for _ in range(n):
        conv = chatdata.conversation(r)
        ids = tok.encode(prompt_of(conv, template), add_special_tokens=False).ids
        ref = generate(target, ids, 120, eos)
        pos = 0
        while pos < len(ref):
            ctx = ids + ref[:pos]
            prop = generate(drafter, ctx, min(k, len(ref) - pos), -1)[:min(k, len(ref) - pos)]
            m = 0
            while m < len(prop) and prop[m] == ref[pos + m]:
                m += 1
            drafted += len(prop)
            accepted += m
            pos += m + 1
    return round(accepted / max(1, drafted), 3)


def main():
    tok_dir, template_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    template = open(template_path).read()
    torch.manual_seed(SEED)
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    t0 = time.time()
    seqs, masks = encode_dataset(tok, template, int(arg("--conversations", 100000)), SEED)
    print(f"data: {len(seqs)} conversations, {sum(map(len, seqs))} tokens, {time.time() - t0:.0f}s", flush=True)
    report = {"seed": SEED, "conversations": len(seqs), "tokens": sum(map(len, seqs))}
    paths = {}
    for name, shape, secs, lr in [("target", TARGET, arg("--target-seconds", 200), 2e-3),
                                  ("drafter", DRAFTER, arg("--drafter-seconds", 60), 3e-3)]:
        model, params, steps, took, losses = train(name, shape, tok_dir, seqs, masks, secs, lr)
        p = os.path.join(out, f"spindle-chat-{name}")
        save(model, p, tok_dir, template)
        paths[name] = p
        report[name] = {"parameters": params, "steps": steps, "train_seconds": round(took, 1), "loss_every_200_steps": losses,
                        "shape": shape}
        print(f"{name}: {params} parameters, {steps} steps in {took:.0f}s", flush=True)
    eos = config(TARGET, tok_dir).eos_token_id
    target, drafter = load_eager(paths["target"]), load_eager(paths["drafter"])
    report["target"]["held_out_accuracy"] = evaluate(target, tok, template, 30, eos)
    report["drafter"]["held_out_accuracy"] = evaluate(drafter, tok, template, 30, eos)
    print("accuracy", report["target"]["held_out_accuracy"], report["drafter"]["held_out_accuracy"], flush=True)
    report["drafter_greedy_acceptance_k4"] = acceptance(target, drafter, tok, template, 30, eos)
    print("acceptance", report["drafter_greedy_acceptance_k4"], flush=True)

    # parity fixture: the target's greedy replies to held-out prompts, by HF (eager, bf16)
    r = random.Random(SEED + 13)
    cases = []
    kinds_seen = set()
    while len(cases) < 8:
        conv = chatdata.conversation(r)
        if conv["kind"] in kinds_seen and len(cases) < 6:
            continue
        kinds_seen.add(conv["kind"])
        ids = tok.encode(prompt_of(conv, template), add_special_tokens=False).ids
        reply, margins, tops = greedy(target, ids, 64, eos)
        cases.append({"kind": conv["kind"], "messages": conv["messages"][:next(i for i, m in enumerate(conv["messages"]) if m["role"] == "assistant")],
                      "tools": conv["tools"], "kwargs": conv["kwargs"], "prompt_ids": ids, "greedy": reply, "margins": margins, "tops": tops,
                      "reply": tok.decode(reply, skip_special_tokens=False)})
    os.makedirs(os.path.join(out, "chat-parity"), exist_ok=True)
    with open(os.path.join(out, "chat-parity", "reference.json"), "w") as f:
        json.dump({"model": "spindle-chat-target", "attn_implementation": "eager", "torch": torch.__version__,
                   "transformers": __import__("transformers").__version__, "cases": cases}, f, ensure_ascii=False, indent=1)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
