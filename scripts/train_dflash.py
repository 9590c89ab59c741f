#!/usr/bin/env python3
"""Trains a DFlash draft head for the bundled target (models/spindle-chat-target), with the paper's
recipe (arXiv:2602.06036): the target frozen; context = the target's residual after each of
target_layer_ids; random anchors per sequence; each anchor's block [anchor, mask x (B - 1)] sees the
context strictly before its anchor and its own block (bidirectionally); cross-entropy at block rows
1..B-1 against the sequence's next tokens, row k weighted exp(-(k - 1) / gamma). Data: replies sampled
from the target at temperature 0.7 to generated chats (scripts/chatdata.py), so the head learns the
target's own distribution.

Writes the head in the published DFlash layout (config.json with architectures DFlashDraftModel and
dflash_config, bf16 model.safetensors) and a training report with acceptance on held-out chats, measured
with scripts/dflash_reference.py's bf16 head against the target's greedy replies.

With --dflash2 the head is a DFlash2 head in its published layout: the same backbone with a grouped
dynamic depthwise convolution around each attention and MLP (kernel 2, groups of 16 channels), and the
candidate selector (rank 32, top-8). Public sources pin DFlash2's format and inference, not how its
selector is trained; here it is trained with the backbone, by cross-entropy over each row's top-K
candidates (the target's next token, when it is among them), the previous token given as the true one
(teacher forcing), the rows weighted as the backbone's.

Usage (on the GPU machine): python3 scripts/train_dflash.py TARGET_DIR OUT_DIR [--seconds S] [--chats N] [--dflash2]
"""
import json, math, os, random, sys, time
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
import chatdata  # noqa: E402
import hf_jinja  # noqa: E402
import dflash_reference as ref  # noqa: E402

DEV = "cuda"
SEED = 20261201
BLOCK = 8
TAPS = [1, 5, 8]
MASK = 4095  # a row of the target's vocabulary no token uses
GAMMA = 5.0
LAYERS = 2
CONV_K, CONV_GROUP, RANK, TOPK = 2, 16, 32, 8


def arg(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def prompt_of(conv, template):
    msgs = conv["messages"]
    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    return hf_jinja.render(template, msgs[:first], tools=conv["tools"], add_generation_prompt=True, **conv["kwargs"])


@torch.no_grad()
def sample_replies(target, prompts, eos, temperature, max_new=160, batch=256):
    """Replies drawn from the target (temperature sampling, top-p 0.95), prompts left-padded per batch."""
    from transformers import GenerationConfig
    out = []
    cfg = GenerationConfig(do_sample=temperature > 0, temperature=temperature if temperature > 0 else None, top_p=0.95 if temperature > 0 else None,
                           max_new_tokens=max_new, eos_token_id=eos, pad_token_id=0)
    for i in range(0, len(prompts), batch):
        group = prompts[i:i + batch]
        width = max(len(p) for p in group)
        ids = torch.zeros(len(group), width, dtype=torch.long)
        att = torch.zeros(len(group), width, dtype=torch.long)
        for j, p in enumerate(group):
            ids[j, width - len(p):] = torch.tensor(p)
            att[j, width - len(p):] = 1
        gen = target.generate(input_ids=ids.to(DEV), attention_mask=att.to(DEV), generation_config=cfg)
        for j, p in enumerate(group):
            reply = gen[j, width:].tolist()
            if eos in reply:
                reply = reply[:reply.index(eos) + 1]
            out.append(p + reply)
    return out


class TrainHead(torch.nn.Module):
    """The head's parameters, named as published, and a batched training forward (fp32 master weights, bf16 autocast)."""

    def __init__(self, hidden, heads, kvh, dim, inter, two=False, vocab=0):
        super().__init__()
        self.hidden, self.heads, self.kvh, self.dim, self.two = hidden, heads, kvh, dim, two
        lin = lambda o, i: torch.nn.Parameter(torch.randn(o, i) / math.sqrt(i))
        self.p = {}  # published name -> parameter (registered below under names without dots)
        self.p["fc.weight"] = lin(hidden, len(TAPS) * hidden)
        for n in ("hidden_norm.weight", "norm.weight"):
            self.p[n] = torch.nn.Parameter(torch.ones(hidden))
        for l in range(LAYERS):
            q = f"layers.{l}."
            self.p[q + "input_layernorm.weight"] = torch.nn.Parameter(torch.ones(hidden))
            self.p[q + "post_attention_layernorm.weight"] = torch.nn.Parameter(torch.ones(hidden))
            self.p[q + "self_attn.q_proj.weight"] = lin(heads * dim, hidden)
            self.p[q + "self_attn.k_proj.weight"] = lin(kvh * dim, hidden)
            self.p[q + "self_attn.v_proj.weight"] = lin(kvh * dim, hidden)
            self.p[q + "self_attn.o_proj.weight"] = torch.nn.Parameter(torch.randn(hidden, heads * dim) * 0.3 / math.sqrt(heads * dim))
            self.p[q + "self_attn.q_norm.weight"] = torch.nn.Parameter(torch.ones(dim))
            self.p[q + "self_attn.k_norm.weight"] = torch.nn.Parameter(torch.ones(dim))
            self.p[q + "mlp.gate_proj.weight"] = lin(inter, hidden)
            self.p[q + "mlp.up_proj.weight"] = lin(inter, hidden)
            self.p[q + "mlp.down_proj.weight"] = torch.nn.Parameter(torch.randn(hidden, inter) * 0.3 / math.sqrt(inter))
            if two:
                for conv in ("attention_conv", "mlp_conv"):
                    base = torch.zeros(2, CONV_K, hidden)
                    base[:, 0] = 1.0  # starts as the identity
                    self.p[q + conv + ".base_kernel"] = torch.nn.Parameter(base)
                    self.p[q + conv + ".kernel_projection.weight"] = torch.nn.Parameter(torch.zeros(2 * CONV_K * (hidden // CONV_GROUP), hidden))
        if two:
            self.p["candidate_selector.hidden_projection.weight"] = lin(RANK, hidden)
            self.p["candidate_selector.predecessor_codebook"] = torch.nn.Parameter(torch.randn(vocab, RANK) * 0.1)
            self.p["candidate_selector.successor_codebook"] = torch.nn.Parameter(torch.randn(vocab, RANK) * 0.1)
        for name, prm in self.p.items():
            self.register_parameter(name.replace(".", "__"), prm)

    @staticmethod
    def norm(x, w, eps=1e-5):
        return w * (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)

    def conv(self, x, dynamic, base):
        """x (b, A, B, H) per block; dynamic (b, A, B, K, groups); base (K, H): causal within each block."""
        b, A, B, H = x.shape
        g = H // CONV_GROUP
        blocks = x.view(b, A, B, g, CONV_GROUP)
        out = torch.zeros_like(blocks)
        for o in range(CONV_K):
            shifted = blocks if o == 0 else torch.cat([torch.zeros_like(blocks[:, :, :o]), blocks[:, :, :-o]], dim=2)
            out = out + base[o].view(g, CONV_GROUP).to(x.dtype) * shifted
            out = out + dynamic[:, :, :, o, :, None] * shifted
        return out.view(b, A, B, H)

    def sublayer(self, name, h, fn, per):
        """fn(h) wrapped in DFlash2's convolutions (prepare before, finish after) when the head has them."""
        if not self.two:
            return fn(h)
        b, Q, H = h.shape
        g = H // CONV_GROUP
        dyn = F.linear(h, self.p[name + ".kernel_projection.weight"]).view(b, Q // per, per, 2, CONV_K, g)
        base = self.p[name + ".base_kernel"]
        shape = (b, Q // per, per, H)
        pre = self.conv(h.view(shape), dyn[:, :, :, 0], base[0]).view(b, Q, H)
        return self.conv(fn(pre).view(shape), dyn[:, :, :, 1], base[1]).view(b, Q, H)

    def forward(self, feats, noise, ctx_pos, blk_pos, mask):
        """feats (b, T, kH); noise (b, Q, H) block rows' embeddings; mask (b, Q, T + Q) True = visible."""
        p, d = self.p, self.dim
        b, T, _ = feats.shape
        Q = noise.shape[1]
        ctx = self.norm(F.linear(feats, p["fc.weight"]), p["hidden_norm.weight"])
        cos_c, sin_c = [t.to(noise.dtype) for t in ref.rope_tables(ctx_pos, d, 10000.0, torch.float32)]
        cos_b, sin_b = [t.to(noise.dtype) for t in ref.rope_tables(blk_pos.reshape(-1), d, 10000.0, torch.float32)]
        cos_b, sin_b = cos_b.view(b, Q, d), sin_b.view(b, Q, d)
        rot = lambda x, c, s: x * c[:, :, None, :] + torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1) * s[:, :, None, :]
        x = noise
        for l in range(LAYERS):
            q_ = f"layers.{l}."
            a = q_ + "self_attn."

            def attend(h):
                q = self.norm(F.linear(h, p[a + "q_proj.weight"]).view(b, Q, self.heads, d), p[a + "q_norm.weight"])
                kb = self.norm(F.linear(h, p[a + "k_proj.weight"]).view(b, Q, self.kvh, d), p[a + "k_norm.weight"])
                vb = F.linear(h, p[a + "v_proj.weight"]).view(b, Q, self.kvh, d)
                q, kb = rot(q, cos_b, sin_b), rot(kb, cos_b, sin_b)
                k = torch.cat([kc, kb], dim=1).repeat_interleave(self.heads // self.kvh, dim=2)
                v = torch.cat([vc, vb], dim=1).repeat_interleave(self.heads // self.kvh, dim=2)
                o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None])
                return F.linear(o.transpose(1, 2).reshape(b, Q, self.heads * d), p[a + "o_proj.weight"])

            kc = rot(self.norm(F.linear(ctx, p[a + "k_proj.weight"]).view(b, T, self.kvh, d), p[a + "k_norm.weight"]),
                     cos_c[None].expand(b, -1, -1), sin_c[None].expand(b, -1, -1))
            vc = F.linear(ctx, p[a + "v_proj.weight"]).view(b, T, self.kvh, d)
            x = x + self.sublayer(q_ + "attention_conv", self.norm(x, p[q_ + "input_layernorm.weight"]), attend, BLOCK)
            m = q_ + "mlp."
            mlp = lambda h: F.linear(F.silu(F.linear(h, p[m + "gate_proj.weight"])) * F.linear(h, p[m + "up_proj.weight"]), p[m + "down_proj.weight"])
            x = x + self.sublayer(q_ + "mlp_conv", self.norm(x, p[q_ + "post_attention_layernorm.weight"]), mlp, BLOCK)
        return self.norm(x, p["norm.weight"])


def main():
    target_dir, out = sys.argv[1], sys.argv[2]
    seconds = arg("--seconds", 240.0)
    n_chats = arg("--chats", 6000)
    two = "--dflash2" in sys.argv
    torch.manual_seed(SEED)
    from transformers import AutoModelForCausalLM
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.bfloat16, attn_implementation="sdpa").to(DEV).eval()
    for prm in target.parameters():
        prm.requires_grad_(False)
    tc = target.config
    eos = tc.eos_token_id if isinstance(tc.eos_token_id, int) else tc.eos_token_id[0]
    template = open(os.path.join(target_dir, "chat_template.jinja")).read()
    tok = Tokenizer.from_file(os.path.join(target_dir, "tokenizer.json"))
    r = random.Random(SEED)
    convs = [chatdata.conversation(r) for _ in range(n_chats + 200)]
    prompts = [tok.encode(prompt_of(c, template), add_special_tokens=False).ids for c in convs]
    t0 = time.time()
    train_seqs = sample_replies(target, prompts[:n_chats], eos, 0.7)
    print(f"sampled {len(train_seqs)} replies at T 0.7 in {time.time() - t0:.0f}s", flush=True)
    starts = [len(p) for p in prompts[:n_chats]]
    embed = target.get_input_embeddings().weight
    lm_head = target.get_output_embeddings().weight
    head = TrainHead(tc.hidden_size, tc.num_attention_heads, tc.num_key_value_heads, tc.head_dim, 512, two, tc.vocab_size).to(DEV)
    opt = torch.optim.AdamW(head.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.01)
    weights = torch.tensor([math.exp(-(k - 1) / GAMMA) for k in range(1, BLOCK)], device=DEV)
    step, losses, t0 = 0, [], time.time()
    per_seq, batch = 16, 64
    order = list(range(len(train_seqs)))
    while time.time() - t0 < seconds:
        idx = [order[i] for i in (r.randrange(len(order)) for _ in range(batch))]
        seqs = [train_seqs[i] for i in idx]
        T = max(len(s) for s in seqs)
        ids = torch.zeros(batch, T, dtype=torch.long)
        for j, s in enumerate(seqs):
            ids[j, :len(s)] = torch.tensor(s)
        ids = ids.to(DEV)
        with torch.no_grad():
            hs = target(ids, output_hidden_states=True).hidden_states
            feats = torch.cat([hs[t + 1] for t in TAPS], dim=-1)
        Q = per_seq * BLOCK
        blk_ids = torch.full((batch, per_seq, BLOCK), MASK, dtype=torch.long)
        labels = torch.full((batch, per_seq, BLOCK - 1), -100, dtype=torch.long)
        blk_pos = torch.zeros(batch, per_seq, BLOCK, dtype=torch.long)
        anchor = torch.zeros(batch, per_seq, dtype=torch.long)
        for j, s in enumerate(seqs):
            lo, hi = max(1, starts[idx[j]] - 1), len(s) - 2
            for a_i in range(per_seq):
                a = r.randint(lo, max(lo, hi))
                anchor[j, a_i] = a
                blk_ids[j, a_i, 0] = s[a]
                blk_pos[j, a_i] = torch.arange(a, a + BLOCK)
                for k in range(1, BLOCK):
                    if a + k < len(s):
                        labels[j, a_i, k - 1] = s[a + k]
        blk_ids, labels, blk_pos, anchor = blk_ids.to(DEV), labels.to(DEV), blk_pos.to(DEV), anchor.to(DEV)
        # visibility: context keys strictly before the block's anchor, and the block's own rows
        ctx_vis = torch.arange(T, device=DEV)[None, None, :] < anchor[:, :, None]  # (b, A, T)
        ctx_vis = ctx_vis[:, :, None, :].expand(-1, -1, BLOCK, -1).reshape(batch, Q, T)
        own = torch.arange(per_seq, device=DEV).repeat_interleave(BLOCK)
        blk_vis = (own[:, None] == own[None, :])[None].expand(batch, -1, -1)
        mask = torch.cat([ctx_vis, blk_vis], dim=-1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            noise = F.embedding(blk_ids.reshape(batch, Q), embed)
            hidden = head(feats, noise, torch.arange(T, device=DEV), blk_pos.reshape(batch, Q), mask)
            rows = hidden.view(batch, per_seq, BLOCK, -1)[:, :, 1:]
            logits = F.linear(rows, lm_head).float()
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none", ignore_index=-100).view(batch, per_seq, BLOCK - 1)
        valid = (labels >= 0).float()
        loss = (ce * weights * valid).sum() / (weights * valid).sum()
        if two:
            # the selector: cross-entropy over each row's top-K candidates, the previous token the true one
            with torch.autocast("cuda", dtype=torch.bfloat16):
                proj = F.linear(rows, head.p["candidate_selector.hidden_projection.weight"]).float()
            cands = logits.detach().topk(TOPK, dim=-1).indices  # (b, A, B-1, K)
            unary = logits.gather(-1, cands)
            prev = torch.cat([blk_ids[:, :, :1], labels[:, :, :-1].clamp_min(0)], dim=-1)
            pred = head.p["candidate_selector.predecessor_codebook"][prev]
            succ = head.p["candidate_selector.successor_codebook"][cands]
            scores = unary + ((pred * proj)[..., None, :] * succ).sum(-1)
            hit = cands == labels[..., None]
            chosen = torch.where(hit.any(-1), hit.float().argmax(-1), torch.full_like(labels, -100))
            sel = F.cross_entropy(scores.reshape(-1, TOPK), chosen.reshape(-1), reduction="none", ignore_index=-100).view_as(chosen)
            ok = (chosen >= 0).float()
            loss = loss + (sel * weights * ok).sum() / (weights * ok).sum().clamp_min(1)
        progress = (time.time() - t0) / seconds
        for g in opt.param_groups:
            g["lr"] = 2e-3 * min(1.0, (step + 1) / 100) * max(0.02, 0.5 * (1 + math.cos(math.pi * progress)))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 200 == 0:
            losses.append(round(loss.item(), 4))
            print(f"step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
    train_time = time.time() - t0
    # save in the published layout
    os.makedirs(out, exist_ok=True)
    from safetensors.torch import save_file
    tensors = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in head.p.items()}
    save_file(tensors, os.path.join(out, "model.safetensors"))
    cfg = {"architectures": ["DFlash2DraftModel" if two else "DFlashDraftModel"], "model_type": "qwen3", "hidden_size": tc.hidden_size, "intermediate_size": 512,
           "num_hidden_layers": LAYERS, "num_attention_heads": tc.num_attention_heads, "num_key_value_heads": tc.num_key_value_heads,
           "head_dim": tc.head_dim, "rms_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": False,
           "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "num_target_layers": tc.num_hidden_layers,
           "vocab_size": tc.vocab_size, "dtype": "bfloat16",
           "dflash_config": {"block_size": BLOCK, "mask_token_id": MASK, "target_layer_ids": TAPS}}
    if two:
        cfg["is_causal"] = False
        cfg["dflash_config"].update({"conv_kernel_size": CONV_K, "conv_group_size": CONV_GROUP, "selector_rank": RANK, "selector_top_k": TOPK})
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    # acceptance on held-out chats: greedy target replies, drafted block by block with the bf16 reference head
    report = evaluate(target, cfg, tensors, prompts[n_chats:], eos)
    report.update({"steps": step, "train_seconds": round(train_time), "losses": losses, "chats": n_chats, "block_size": BLOCK,
                   "target_layer_ids": TAPS, "gamma": GAMMA, "sampled_at": 0.7, "parameters": sum(v.numel() for v in tensors.values()),
                   "torch": torch.__version__})
    json.dump(report, open(os.path.join(out, "training-report.json"), "w"), indent=2)
    print(json.dumps(report), flush=True)


@torch.no_grad()
def evaluate(target, cfg, tensors, prompts, eos, max_new=120):
    from transformers import GenerationConfig
    embed = target.get_input_embeddings().weight
    lm_head = target.get_output_embeddings().weight
    gen = GenerationConfig(do_sample=False, max_new_tokens=max_new, eos_token_id=eos, pad_token_id=0)
    per_position = [0] * (BLOCK - 1)
    windows, committed, drafted_total = 0, 0, 0
    for p in prompts[:100]:
        full = target.generate(torch.tensor([p], device=DEV), generation_config=gen)[0].tolist()
        hs = target(torch.tensor([full], device=DEV), output_hidden_states=True).hidden_states
        feats = torch.cat([hs[t + 1][0] for t in TAPS], dim=-1)
        head = ref.Head(cfg, tensors)
        pos = len(p) - 1  # the anchor: the last prompt token is committed, the target has run the rows before it
        head.inject(feats[:pos], torch.arange(0, pos, device=DEV))
        while pos < len(full) - 1:
            n = min(BLOCK - 1, len(full) - 1 - pos)
            rows = head.forward(embed, full[pos], pos, n)
            logits = head.logits(rows, lm_head)
            drafts = head.walk(rows, logits, full[pos])[0] if head.kind == "DFlash2DraftModel" else logits.float().argmax(-1).tolist()
            m = 0
            while m < n and drafts[m] == full[pos + 1 + m]:
                per_position[m] += 1
                m += 1
            windows += 1
            drafted_total += n
            committed += m + 1
            head.inject(feats[pos:pos + m + 1], torch.arange(pos, pos + m + 1, device=DEV))
            pos += m + 1
    return {"held_out_chats": min(100, len(prompts)), "mean_accepted_length": round(committed / windows, 3),
            "acceptance_per_position": [round(c / windows, 3) for c in per_position],
            "acceptance_rate": round(sum(per_position) / drafted_total, 3)}


if __name__ == "__main__":
    main()
