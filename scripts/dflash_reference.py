#!/usr/bin/env python3
"""A PyTorch reference of DFlash and DFlash2 draft heads, written for Spindle from the published
descriptions (arXiv:2602.06036; the heads' published config and tensor layout), and the fixtures
Spindle's heads are checked against.

The head: a few Qwen3-style decoder layers at the target's hidden size, no embedding or output
head of their own. Context rows (the target's residual after each of target_layer_ids, i.e. HF
hidden_states[id + 1], concatenated) go through fc and hidden_norm, then through each layer's
k_proj (+ k_norm, RoPE at the row's position) and v_proj; a block [anchor, mask x (B - 1)] at the
anchor's position onward is run through the layers, attending bidirectionally to the context and
the block (within sliding_window on sliding layers); final norm; the target's lm_head on rows
1..B-1, times output_multiplier, tanh soft-capped. DFlash drafts each row's argmax; DFlash2 adds a
grouped dynamic depthwise convolution around attention and MLP (causal over the block's rows) and
walks each row's top-K candidates with a low-rank predecessor/successor score.

bf16 everywhere as HF runs a bf16 head: each linear, norm, product and sum rounded to bf16;
attention scores and softmax in fp32 (sdpa's math).

Usage (on the GPU machine, where torch and transformers are):
  python3 scripts/dflash_reference.py make-heads TARGET_DIR OUT_DIR    random small heads of both kinds, published layout
  python3 scripts/dflash_reference.py fixtures TARGET_DIR HEAD_DIR PROMPTS_JSON OUT_PREFIX
      -> OUT_PREFIX.json (cases: tokens, anchor position, argmax, margins, DFlash2's walk) and
         OUT_PREFIX.safetensors (logits_<case>: (drafts, vocab) f32 of the bf16 draft logits;
         logits_f32_<case>: the same head and target computed in fp32, the truth both are measured against)
"""
import json, math, os, sys
import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_tf32 = False
DEV = "cuda" if torch.cuda.is_available() else "cpu"
BF = torch.bfloat16


def rms(x, w, eps):
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return w * y


def rope_tables(positions, dim, theta, dtype=BF):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64, device=DEV).float() / dim))
    ang = positions[:, None].float() * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate(x, cos, sin):
    # x (n, heads, d); cos/sin (n, d)
    h = x.shape[-1] // 2
    flipped = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos[:, None, :] + flipped * sin[:, None, :]


class Head:
    def __init__(self, cfg, tensors, dtype=BF):
        self.cfg = cfg
        self.dtype = dtype
        d = cfg.get("dflash_config", {})
        pick = lambda k, dflt=None: d.get(k, cfg.get(k, dflt))
        self.kind = cfg["architectures"][0]
        self.hidden = cfg["hidden_size"]
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kvh = cfg.get("num_key_value_heads", self.heads)
        self.dim = cfg.get("head_dim", self.hidden // self.heads)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 10000.0)
        self.block = int(pick("block_size", 16))
        self.mask = int(pick("mask_token_id"))
        self.taps = list(pick("target_layer_ids"))
        self.scale_in = float(pick("input_embedding_scale", 1.0))
        self.mult = float(pick("output_multiplier", 1.0))
        self.cap = pick("final_logit_softcapping")
        types = cfg.get("layer_types") or ["full_attention"] * self.layers
        self.window = [cfg["sliding_window"] if t == "sliding_attention" else None for t in types]
        self.k = int(pick("conv_kernel_size", 0))
        self.group = int(pick("conv_group_size", 1))
        self.rank = int(pick("selector_rank", 0))
        self.topk = int(pick("selector_top_k", 0))
        self.t = {k[len("model."):] if k.startswith("model.") else k: v.to(DEV).to(dtype) for k, v in tensors.items()}
        for name in ("predecessor_codebook", "successor_codebook"):
            key = "candidate_selector." + name
            if key + ".weight" in self.t:
                self.t[key] = self.t.pop(key + ".weight")
        self.ctx_k = [None] * self.layers
        self.ctx_v = [None] * self.layers
        self.ctx_pos = None

    def conv(self, x, dynamic, base):
        # x (n, H); dynamic (n, K, groups); base (K, H): out[t] = sum_o base[o] * x[t-o] + dyn[t, o, g] * x[t-o]
        n, hsz = x.shape
        groups = hsz // self.group
        blocks = x.view(n, groups, self.group)
        dyn = dynamic.view(n, self.k, groups, 1)
        out = torch.zeros_like(blocks)
        for o in range(self.k):
            shifted = blocks if o == 0 else torch.cat([torch.zeros_like(blocks[:o]), blocks[:-o]], dim=0)
            out = out + base[o].view(groups, self.group) * shifted
            out = torch.addcmul(out, dyn[:, o], shifted)
        return out.view(n, hsz)

    def inject(self, feats, positions):
        ctx = rms(F.linear(feats, self.t["fc.weight"]), self.t["hidden_norm.weight"], self.eps)
        cos, sin = rope_tables(positions, self.dim, self.theta, self.dtype)
        for l in range(self.layers):
            p = f"layers.{l}.self_attn."
            k = F.linear(ctx, self.t[p + "k_proj.weight"]).view(-1, self.kvh, self.dim)
            k = rotate(rms(k, self.t[p + "k_norm.weight"], self.eps), cos, sin)
            v = F.linear(ctx, self.t[p + "v_proj.weight"]).view(-1, self.kvh, self.dim)
            self.ctx_k[l] = k if self.ctx_k[l] is None else torch.cat([self.ctx_k[l], k])
            self.ctx_v[l] = v if self.ctx_v[l] is None else torch.cat([self.ctx_v[l], v])
        self.ctx_pos = positions if self.ctx_pos is None else torch.cat([self.ctx_pos, positions])

    def attend(self, l, x_in, pos, cos, sin):
        p = f"layers.{l}.self_attn."
        n = x_in.shape[0]
        q = rotate(rms(F.linear(x_in, self.t[p + "q_proj.weight"]).view(n, self.heads, self.dim), self.t[p + "q_norm.weight"], self.eps), cos, sin)
        kb = rotate(rms(F.linear(x_in, self.t[p + "k_proj.weight"]).view(n, self.kvh, self.dim), self.t[p + "k_norm.weight"], self.eps), cos, sin)
        vb = F.linear(x_in, self.t[p + "v_proj.weight"]).view(n, self.kvh, self.dim)
        k = kb if self.ctx_k[l] is None else torch.cat([self.ctx_k[l], kb])
        v = vb if self.ctx_v[l] is None else torch.cat([self.ctx_v[l], vb])
        kpos = pos if self.ctx_pos is None else torch.cat([self.ctx_pos, pos])
        rep = self.heads // self.kvh
        kf = k.float().repeat_interleave(rep, dim=1)  # (keys, heads, d)
        vf = v.float().repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), kf) / math.sqrt(self.dim)
        if self.window[l] is not None:
            far = (pos[:, None] - kpos[None, :]).abs() >= self.window[l]
            scores = scores.masked_fill(far[None], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.einsum("hqk,khd->qhd", probs, vf).to(self.dtype).reshape(n, self.heads * self.dim)
        return F.linear(out, self.t[p + "o_proj.weight"])

    def forward(self, embed, anchor, position, drafts):
        n = drafts + 1
        ids = torch.full((n,), self.mask, dtype=torch.long, device=DEV)
        ids[0] = anchor
        x = F.embedding(ids, embed)
        if self.scale_in != 1.0:
            x = x * self.scale_in
        pos = torch.arange(position, position + n, device=DEV)
        cos, sin = rope_tables(pos, self.dim, self.theta, self.dtype)
        two = self.kind == "DFlash2DraftModel"
        groups = self.hidden // max(1, self.group)
        for l in range(self.layers):
            p = f"layers.{l}."
            h = rms(x, self.t[p + "input_layernorm.weight"], self.eps)
            if two:
                dyn = F.linear(h, self.t[p + "attention_conv.kernel_projection.weight"]).view(n, 2, self.k, groups)
                base = self.t[p + "attention_conv.base_kernel"]
                a = self.conv(self.attend(l, self.conv(h, dyn[:, 0], base[0]), pos, cos, sin), dyn[:, 1], base[1])
            else:
                a = self.attend(l, h, pos, cos, sin)
            x = x + a
            h = rms(x, self.t[p + "post_attention_layernorm.weight"], self.eps)
            mlp = lambda y: F.linear(F.silu(F.linear(y, self.t[p + "mlp.gate_proj.weight"])) * F.linear(y, self.t[p + "mlp.up_proj.weight"]),
                                     self.t[p + "mlp.down_proj.weight"])
            if two:
                dyn = F.linear(h, self.t[p + "mlp_conv.kernel_projection.weight"]).view(n, 2, self.k, groups)
                base = self.t[p + "mlp_conv.base_kernel"]
                m = self.conv(mlp(self.conv(h, dyn[:, 0], base[0])), dyn[:, 1], base[1])
            else:
                m = mlp(h)
            x = x + m
        return rms(x, self.t["norm.weight"], self.eps)[1:]

    def logits(self, rows, lm_head):
        z = F.linear(rows, lm_head)
        if self.mult != 1.0:
            z = z * self.mult
        if self.cap:
            z = torch.tanh(z / float(self.cap)) * float(self.cap)
        return z

    def walk(self, rows, logits, anchor):
        proj = F.linear(rows, self.t["candidate_selector.hidden_projection.weight"])
        pred, succ = self.t["candidate_selector.predecessor_codebook"], self.t["candidate_selector.successor_codebook"]
        prev, path, margins = anchor, [], []
        for r in range(rows.shape[0]):
            # candidates best first, ties to the lower id (a stable sort of the row)
            order = torch.sort(logits[r].float(), descending=True, stable=True).indices[: self.topk]
            pair = torch.mv(succ[order], pred[prev] * proj[r])  # (K,) bf16
            scores = logits[r][order] + pair
            best = int(torch.argmax(scores))
            s = scores.float().sort(descending=True).values
            margins.append(float(s[0] - s[1]) if len(s) > 1 else 1e9)
            prev = int(order[best])
            path.append(prev)
        return path, margins


def load_target(target_dir):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(target_dir, dtype=BF, attn_implementation="eager").to(DEV).eval()
    return m


def make_heads(target_dir, out_dir):
    from safetensors.torch import save_file
    tc = json.load(open(os.path.join(target_dir, "config.json")))
    H, inter = tc["hidden_size"], 256  # a small MLP keeps the committed heads small
    heads, kvh, dim = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    g = torch.Generator().manual_seed(20261201)
    for kind in ("DFlashDraftModel", "DFlash2DraftModel"):
        two = kind == "DFlash2DraftModel"
        dcfg = {"block_size": 8, "mask_token_id": 4095, "target_layer_ids": [1, 5, 8]}
        cfg = {"architectures": [kind], "model_type": "qwen3", "hidden_size": H, "intermediate_size": inter, "num_hidden_layers": 2,
               "num_attention_heads": heads, "num_key_value_heads": kvh, "head_dim": dim, "rms_norm_eps": 1e-5, "hidden_act": "silu",
               "attention_bias": False, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "num_target_layers": tc["num_hidden_layers"],
               "vocab_size": tc["vocab_size"], "dtype": "bfloat16", "dflash_config": dcfg}
        if two:
            dcfg.update({"conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 32, "selector_top_k": 8, "output_multiplier": 0.5,
                         "final_logit_softcapping": 20.0})
            cfg.update({"is_causal": False, "layer_types": ["sliding_attention"] * 2, "sliding_window": 24})
        rnd = lambda *shape, std: (torch.randn(*shape, generator=g) * std).to(BF)
        near1 = lambda n: (1 + 0.1 * torch.randn(n, generator=g)).to(BF)
        t = {"fc.weight": rnd(H, 3 * H, std=1 / math.sqrt(3 * H)), "hidden_norm.weight": near1(H), "norm.weight": near1(H)}
        for l in range(2):
            p = f"layers.{l}."
            t[p + "input_layernorm.weight"] = near1(H)
            t[p + "post_attention_layernorm.weight"] = near1(H)
            t[p + "self_attn.q_proj.weight"] = rnd(heads * dim, H, std=1 / math.sqrt(H))
            t[p + "self_attn.k_proj.weight"] = rnd(kvh * dim, H, std=1 / math.sqrt(H))
            t[p + "self_attn.v_proj.weight"] = rnd(kvh * dim, H, std=1 / math.sqrt(H))
            t[p + "self_attn.o_proj.weight"] = rnd(H, heads * dim, std=0.5 / math.sqrt(heads * dim))
            t[p + "self_attn.q_norm.weight"] = near1(dim)
            t[p + "self_attn.k_norm.weight"] = near1(dim)
            t[p + "mlp.gate_proj.weight"] = rnd(inter, H, std=1 / math.sqrt(H))
            t[p + "mlp.up_proj.weight"] = rnd(inter, H, std=1 / math.sqrt(H))
            t[p + "mlp.down_proj.weight"] = rnd(H, inter, std=0.5 / math.sqrt(inter))
            if two:
                for conv in ("attention_conv", "mlp_conv"):
                    base = torch.zeros(2, 2, H)
                    base[:, 0] = 1.0
                    t[p + conv + ".base_kernel"] = (base + 0.2 * torch.randn(2, 2, H, generator=g)).to(BF)
                    t[p + conv + ".kernel_projection.weight"] = rnd(2 * 2 * (H // 16), H, std=0.2 / math.sqrt(H))
        if two:
            t["candidate_selector.hidden_projection.weight"] = rnd(32, H, std=1 / math.sqrt(H))
            # published without .weight: the layout of Nanbeige4.3-33B-DFlash2
            t["candidate_selector.predecessor_codebook"] = rnd(tc["vocab_size"], 32, std=0.5)
            t["candidate_selector.successor_codebook"] = rnd(tc["vocab_size"], 32, std=0.5)
        d = os.path.join(out_dir, "dflash2-random" if two else "dflash-random")
        os.makedirs(d, exist_ok=True)
        # DFlash's tensors under "model." (the other published prefix), DFlash2's bare
        save_file({("model." + k if not two else k): v.contiguous() for k, v in t.items()}, os.path.join(d, "model.safetensors"))
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
        print("wrote", d)


@torch.inference_mode()
def fixtures(target_dir, head_dir, prompts_json, out_prefix):
    from safetensors.torch import load_file, save_file
    target = load_target(target_dir)
    target32 = load_target(target_dir).float()
    cfg = json.load(open(os.path.join(head_dir, "config.json")))
    head_tensors = load_file(os.path.join(head_dir, "model.safetensors"))
    embed = target.get_input_embeddings().weight
    lm_head = target.get_output_embeddings().weight
    prompts = json.load(open(prompts_json))["prompts"]
    cases, arrays = [], {}
    for i, ids in enumerate(prompts[:6]):
        for cut in (len(ids) - 1, max(2, len(ids) // 2)):
            head = Head(cfg, head_tensors)
            tokens = torch.tensor(ids[: cut + 1], device=DEV)
            out = target(tokens[None, :cut], output_hidden_states=True)
            feats = torch.cat([out.hidden_states[t + 1][0] for t in head.taps], dim=-1)
            # inject in two pieces, as the engine does after successive steps
            half = cut // 2
            head.inject(feats[:half], torch.arange(0, half, device=DEV))
            head.inject(feats[half:], torch.arange(half, cut, device=DEV))
            drafts = head.block - 1
            rows = head.forward(embed, int(tokens[cut]), cut, drafts)
            logits = head.logits(rows, lm_head)
            # the truth: the same weights in fp32, the target's taps in fp32 too
            exact = Head(cfg, head_tensors, torch.float32)
            out32 = target32(tokens[None, :cut], output_hidden_states=True)
            feats32 = torch.cat([out32.hidden_states[t + 1][0] for t in exact.taps], dim=-1)
            exact.inject(feats32, torch.arange(0, cut, device=DEV))
            logits32 = exact.logits(exact.forward(target32.get_input_embeddings().weight, int(tokens[cut]), cut, drafts),
                                    target32.get_output_embeddings().weight)
            case = {"tokens": tokens.tolist(), "anchor_position": cut, "drafts": drafts}
            arrays[f"logits_{len(cases)}"] = logits.float().cpu().contiguous()
            arrays[f"logits_f32_{len(cases)}"] = logits32.float().cpu().contiguous()
            top2 = logits.float().topk(2, dim=-1).values
            case["argmax"] = logits.float().argmax(-1).tolist()
            case["margins"] = (top2[:, 0] - top2[:, 1]).tolist()
            if head.kind == "DFlash2DraftModel":
                case["walk"], case["walk_margins"] = head.walk(rows, logits, int(tokens[cut]))
            cases.append(case)
    json.dump({"head": os.path.basename(head_dir.rstrip("/")), "torch": torch.__version__, "cases": cases}, open(out_prefix + ".json", "w"))
    save_file(arrays, out_prefix + ".safetensors")
    print("wrote", out_prefix, len(cases), "cases")


if __name__ == "__main__":
    if sys.argv[1] == "make-heads":
        make_heads(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "fixtures":
        fixtures(*sys.argv[2:6])
    else:
        sys.exit(__doc__)
