#!/usr/bin/env python3
"""Builds a 166,912-token stand-in for the Nanbeige 4.3 vocabulary, for benchmarking constrained-decoding masks.

What it makes: one Hugging Face tokenizer.json, gzipped (level 9), in the same format as the bundled
models/spindle-chat-target/tokenizer.json (scripts/make_tokenizer.py): SentencePiece-style BPE with
byte_fallback and fuse_unk, ids 0-2 <unk> <s> </s>, ids 3-258 the byte pieces <0x00>..<0xFF>, learned
pieces after them; no normalizer; Metaspace pre-tokenizer (replacement ▁, prepend_scheme first, split
false); decoder Replace(▁→' '), ByteFallback, Fuse, Strip(1 leading space); TemplateProcessing that
prepends <|im_start|>. Added tokens follow the learned pieces in Nanbeige's order: <|im_start|>,
<|im_end|>, <|endoftext|> (special), <think>, </think>, <tool_call>, </tool_call> (not special). The
model vocabulary holds ids 0..166904 and the seven added tokens take 166905..166911, so
get_vocab_size(with_added_tokens=True) is exactly 166,912, the real vocabulary's size.

Training text, all found or generated on the machine it runs on (no network, no downloaded data):
  * code: the Python standard library's .py files and the installed site-packages' .py files (at most a
    few MB per top-level package, so that no one package dominates), plus this project's Java sources;
  * English prose: .md/.rst/.txt files and package METADATA in those trees, pydoc's topic texts, and
    this project's docs;
  * JSON: json.dumps of generated objects (nested dicts/lists, identifier keys, English/Chinese/escaped
    strings, ints, floats, booleans, null; compact, indent 2, indent 4, ensure_ascii on and off);
  * Chinese: generated sentences of pseudo-words built from the GB2312 character set (decoded with
    Python's own gb2312 codec, levels 1 and 2, 6,763 characters) with Zipf-distributed character and
    word frequencies, Chinese punctuation, and English words and numbers mixed in, so that a good share
    of the vocabulary is CJK as in a real bilingual vocabulary.
Merges are learned within pieces (Metaspace split, plus runs of ▁ kept together so indentation pieces
such as ▁▁▁ exist, as in SentencePiece with whitespace-only pieces); pieces are at most 16 characters
(SentencePiece's default max_piece_length). If training stops short of the target, more generated text
is added and it trains again.

Where it runs: on the GPU machine (it needs the HF `tokenizers` package, 0.23 there; no GPU is used),
through the device `run` tool, from the repository root:
    python3 scripts/make_large_tokenizer.py $OUT/tokenizer.json.gz
It checks the result (loads with Tokenizer.from_file, the exact size, contiguous ids, the same
pre-tokenizer/decoder/model settings as the bundled tokenizer, round trips of English, code, JSON and
Chinese), prints statistics, and writes them as JSON beside the output (OUT.stats.json).

Usage: python3 make_large_tokenizer.py OUT.json.gz [--seed N]
       python3 make_large_tokenizer.py --check IN.json[.gz] OUT.json.gz   (only the checks, stats and gzip)
"""
import collections
import gzip
import json
import os
import random
import re
import site
import sys
import sysconfig
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

TOTAL = 166912
SPECIAL_HEAD = ["<unk>", "<s>", "</s>"]
BYTES = [f"<0x{i:02X}>" for i in range(256)]
ADDED_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
ADDED_PLAIN = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
MODEL_VOCAB = TOTAL - len(ADDED_SPECIAL) - len(ADDED_PLAIN)  # 166,905: ids 0..166904
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED = os.path.join(REPO, "models", "spindle-chat-target", "tokenizer.json")

MB = 1 << 20
CODE_BUDGET = 80 * MB          # characters of .py text in all
PER_PACKAGE = 5 * MB           # characters of .py text per top-level site-packages package
PROSE_BUDGET = 24 * MB
MAX_FILE = 400_000             # skip larger files (generated tables, vendored data)
T0 = time.time()

# strings the model vocabulary must not learn: added tokens are matched before the model, and
# the special/byte pieces are already in the vocabulary
FORBIDDEN = re.compile("|".join(re.escape(t) for t in SPECIAL_HEAD + ADDED_SPECIAL + ADDED_PLAIN) + r"|<0x[0-9A-Fa-f]{2}>")


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


def clean(text):
    text = FORBIDDEN.sub(" ", text)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):  # lone surrogates cannot cross into Rust
        text = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def read_text(path):
    try:
        if os.path.getsize(path) > MAX_FILE:
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def walk(root, exts):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git", "node_modules", "target"))
        for name in sorted(filenames):
            if name.endswith(exts) or (exts == "META" and name == "METADATA"):
                yield os.path.join(dirpath, name)


# ---------------------------------------------------------------- local text

def local_text():
    stdlib = sysconfig.get_paths()["stdlib"]
    sites = []
    for p in site.getsitepackages() + [site.getusersitepackages(), "/usr/lib/python3/dist-packages"]:
        if p and os.path.isdir(p) and os.path.realpath(p) not in [os.path.realpath(s) for s in sites]:
            sites.append(p)
    seen = set()
    code, prose = [], []
    code_chars = prose_chars = 0
    n_code_files = n_prose_files = 0

    def take(path, into):
        rp = os.path.realpath(path)
        if rp in seen:
            return 0
        seen.add(rp)
        t = read_text(path)
        if not t or not t.strip():
            return 0
        into.append(clean(t))
        return len(t)

    # the standard library first (skipping site-packages inside it), then site-packages by package
    for path in walk(stdlib, ".py"):
        if "site-packages" in path or "dist-packages" in path:
            continue
        if code_chars >= CODE_BUDGET:
            break
        n = take(path, code)
        code_chars += n
        n_code_files += n > 0
    std_chars = code_chars
    for sp in sites:
        for pkg in sorted(os.listdir(sp)):
            full = os.path.join(sp, pkg)
            got = 0
            paths = walk(full, ".py") if os.path.isdir(full) else ([full] if full.endswith(".py") else [])
            for path in paths:
                if got >= PER_PACKAGE or code_chars >= CODE_BUDGET:
                    break
                n = take(path, code)
                got += n
                code_chars += n
                n_code_files += n > 0
    # this project's Java sources and docs
    for sub in ("src", "spindle"):
        for path in walk(os.path.join(REPO, sub), (".java",)):
            n = take(path, code)
            code_chars += n
            n_code_files += n > 0
    for path in list(walk(os.path.join(REPO, "docs"), (".md", ".txt"))) + [os.path.join(REPO, "README.md")]:
        if os.path.exists(path):
            n = take(path, prose)
            prose_chars += n
            n_prose_files += n > 0
    try:
        import pydoc_data.topics as topics
        for v in topics.topics.values():
            prose.append(clean(v))
            prose_chars += len(v)
    except ImportError:
        pass
    for root in [stdlib] + sites:
        for exts in ((".md", ".rst", ".txt"), "META"):
            for path in walk(root, exts):
                if prose_chars >= PROSE_BUDGET:
                    break
                n = take(path, prose)
                prose_chars += n
                n_prose_files += n > 0
    log(f"code: {n_code_files} files, {code_chars / MB:.1f} M chars ({std_chars / MB:.1f} M stdlib); "
        f"prose: {n_prose_files} files, {prose_chars / MB:.1f} M chars; site dirs {sites}")
    return code, prose


WORD_RE = re.compile(r"[A-Za-z][a-z]{2,14}")
IDENT_RE = re.compile(r"\b[a-z_][a-z0-9_]{2,24}\b")


def harvest(code, prose, r):
    words = collections.Counter()
    for t in prose[:4000]:
        words.update(WORD_RE.findall(t))
    idents = collections.Counter()
    for t in code[:: max(1, len(code) // 3000)]:
        idents.update(IDENT_RE.findall(t))
    words = [w for w, _ in words.most_common(30000)] or ["alpha", "beta", "gamma"]
    idents = [w for w, _ in idents.most_common(20000)] or ["name", "value", "items"]
    return words, idents


# ---------------------------------------------------------------- Chinese

def gb2312_chars():
    out = []
    for hi in range(0xB0, 0xF8):          # level 1: 0xB0-0xD7, level 2: 0xD8-0xF7
        for lo in range(0xA1, 0xFF):
            try:
                c = bytes([hi, lo]).decode("gb2312")
            except UnicodeDecodeError:
                continue
            if "\u4e00" <= c <= "\u9fff":
                out.append(c)
    return out


def zipf_cum(n, s):
    cum, tot = [], 0.0
    for k in range(1, n + 1):
        tot += 1.0 / k ** s
        cum.append(tot)
    return cum


class Chinese:
    PUNCT_MID = ["，"] * 8 + ["、"] * 2 + ["；", "："]
    PUNCT_END = ["。"] * 10 + ["！", "？", "……"]

    def __init__(self, r, english, n_words=70000):
        self.r = r
        chars = gb2312_chars()
        level1, level2 = chars[:3755], chars[3755:]
        r.shuffle(level1)
        r.shuffle(level2)
        self.chars = level1 + level2        # common characters get the high ranks
        char_cum = zipf_cum(len(self.chars), 1.0)
        lens = r.choices([1, 2, 3, 4], weights=[12, 58, 20, 10], k=n_words)
        flat = r.choices(self.chars, cum_weights=char_cum, k=sum(lens))
        lex, i, seen = [], 0, set()
        for ln in lens:
            w = "".join(flat[i:i + ln])
            i += ln
            if w not in seen:
                seen.add(w)
                lex.append(w)
        self.lex = lex
        self.word_cum = zipf_cum(len(lex), 0.95)
        self.english = english[:3000]

    def sentence(self):
        r = self.r
        n = r.randint(4, 22)
        ws = r.choices(self.lex, cum_weights=self.word_cum, k=n)
        out = []
        for j, w in enumerate(ws):
            x = r.random()
            if x < 0.03:
                out.append(r.choice(self.english))
            elif x < 0.05:
                out.append(str(r.choice([r.randint(0, 100), r.randint(1900, 2030), r.randint(0, 10 ** 6)])))
            elif x < 0.06:
                out.append("“" + w + "”")
                continue
            elif x < 0.065:
                out.append("《" + w + "》")
                continue
            out.append(w)
            if j < n - 1 and r.random() < 0.12:
                out.append(r.choice(self.PUNCT_MID))
        return "".join(out) + r.choice(self.PUNCT_END)

    def document(self):
        r = self.r
        paras = []
        for _ in range(r.randint(1, 6)):
            style = r.random()
            sents = "".join(self.sentence() for _ in range(r.randint(1, 8)))
            if style < 0.1:
                paras.append("## " + self.sentence().rstrip("。！？…") + "\n\n" + sents)
            elif style < 0.2:
                paras.append("\n".join(f"{k + 1}. " + self.sentence() for k in range(r.randint(2, 6))))
            elif style < 0.25:
                paras.append("\n".join("- " + self.sentence() for _ in range(r.randint(2, 5))))
            elif style < 0.3:
                paras.append("# " + self.sentence() + "\n" + r.choice(["x", "result", "value"]) + " = "
                             + str(r.randint(0, 999)) + "  # " + self.sentence())
            else:
                paras.append(sents)
        return "\n\n".join(paras) + "\n"


# ---------------------------------------------------------------- JSON

class JsonGen:
    def __init__(self, r, words, idents, zh):
        self.r, self.words, self.idents, self.zh = r, words, idents, zh
        self.keys = idents[:6000] + [self.camel(w) for w in idents[:2000]]

    @staticmethod
    def camel(s):
        parts = s.strip("_").split("_")
        return parts[0] + "".join(p.title() for p in parts[1:]) if parts and parts[0] else s

    def string(self):
        r = self.r
        x = r.random()
        if x < 0.35:
            return " ".join(r.choices(self.words[:8000], k=r.randint(1, 12)))
        if x < 0.55:
            return self.zh.sentence()
        if x < 0.65:
            return r.choice(self.idents)
        if x < 0.72:
            return f"{r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:00Z"
        if x < 0.78:
            return "https://example.com/" + "/".join(r.choices(self.idents, k=r.randint(1, 4)))
        if x < 0.84:
            return "%08x-%04x-%04x-%04x-%012x" % tuple(r.getrandbits(b) for b in (32, 16, 16, 16, 48))
        if x < 0.90:
            return "line one\nline \"two\"\t" + r.choice(self.words) + "\\" + r.choice(self.idents)
        if x < 0.95:
            return "C:\\Users\\" + r.choice(self.idents) + "\\" + r.choice(self.idents) + ".txt"
        return r.choice(["", " ", "N/A", "ok", "true", "null", "😀", "café", "naïve"])

    def scalar(self):
        r = self.r
        x = r.random()
        if x < 0.40:
            return self.string()
        if x < 0.62:
            return r.choice([r.randint(0, 10), r.randint(0, 1000), r.randint(-10 ** 6, 10 ** 6), r.randint(0, 2 ** 40)])
        if x < 0.80:
            return round(r.uniform(-1000, 1000), r.randint(0, 6)) if r.random() < 0.8 else r.uniform(0, 1) * 10 ** r.randint(-12, 12)
        if x < 0.92:
            return r.random() < 0.5
        return None

    def value(self, depth):
        r = self.r
        x = r.random()
        if depth < 4 and x < 0.22:
            return self.obj(depth + 1)
        if depth < 4 and x < 0.34:
            kind = r.random()
            n = r.randint(0, 8)
            if kind < 0.4:
                return [self.scalar() for _ in range(n)]
            if kind < 0.6:
                return [r.randint(0, 1000) for _ in range(n)]
            return [self.obj(depth + 1) for _ in range(min(n, 4))]
        return self.scalar()

    def obj(self, depth=0):
        r = self.r
        return {r.choice(self.keys): self.value(depth) for _ in range(r.randint(1, 9 if depth < 2 else 5))}

    def document(self):
        r = self.r
        o = self.obj()
        if r.random() < 0.15:  # tool-call / chat-API shaped
            o = {"name": r.choice(self.idents), "arguments": o} if r.random() < 0.5 else \
                {"role": r.choice(["user", "assistant", "tool"]), "content": self.string(), "data": o}
        if r.random() < 0.1:
            o = [self.obj(2) for _ in range(r.randint(1, 6))]
        style = r.random()
        ascii_ = r.random() < 0.3
        if style < 0.35:
            return json.dumps(o, ensure_ascii=ascii_) + "\n"
        if style < 0.45:
            return json.dumps(o, ensure_ascii=ascii_, separators=(",", ":")) + "\n"
        if style < 0.8:
            return json.dumps(o, ensure_ascii=ascii_, indent=2) + "\n"
        if style < 0.95:
            return json.dumps(o, ensure_ascii=ascii_, indent=4) + "\n"
        return "```json\n" + json.dumps(o, ensure_ascii=ascii_, indent=2) + "\n```\n"


def generated(gen, chars):
    out, n = [], 0
    while n < chars:
        block = "".join(gen() for _ in range(8))
        out.append(clean(block))
        n += len(block)
    return out


# ---------------------------------------------------------------- training and layout

def train(corpus, vocab_size):
    base = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # merges are learned within pieces (as SentencePiece trains); runs of ▁ stay together so that
    # indentation pieces exist; the served layout below does not split
    base.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
        pre_tokenizers.Split(Regex("▁+(?=▁)|▁?[^▁]+|▁"), behavior="isolated"),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_HEAD + BYTES, min_frequency=2,
                                  show_progress=False, limit_alphabet=9000, max_token_length=16)
    base.train_from_iterator(corpus, trainer=trainer, length=len(corpus))
    return json.loads(base.to_str())["model"]


def build(learned):
    vocab = {}
    for t in SPECIAL_HEAD + BYTES:
        vocab[t] = len(vocab)
    for t, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_HEAD])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ADDED_SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_PLAIN])
    bos = tok.token_to_id("<|im_start|>")
    tok.post_processor = processors.TemplateProcessing(single="<|im_start|> $A", pair="<|im_start|> $A <|im_start|> $B",
                                                       special_tokens=[("<|im_start|>", bos)])
    return tok, len(vocab), len(merges)


def is_cjk(c):
    o = ord(c)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FFFF


def stats(model_vocab):
    pieces = [t for t in model_vocab if t not in SPECIAL_HEAD and not re.fullmatch(r"<0x[0-9A-F]{2}>", t)]
    text = [t.replace("▁", " ") for t in pieces]
    lens = [len(t) for t in text]
    blen = [len(t.encode("utf-8")) for t in text]
    hist = collections.Counter(min(n, 16) for n in lens)
    return {
        "model_vocab": len(model_vocab),
        "byte_pieces": 256,
        "learned_pieces": len(pieces),
        "with_quote": sum('"' in t for t in pieces),
        "with_lt": sum("<" in t for t in pieces),
        "with_newline": sum("\n" in t for t in pieces),
        "with_backslash": sum("\\" in t for t in pieces),
        "with_lbrace": sum("{" in t for t in pieces),
        "digit_only": sum(t.isascii() and t.isdigit() for t in pieces),
        "digit_only_with_leading_space": sum(t.startswith("▁") and t[1:].isascii() and t[1:].isdigit() for t in pieces),
        "cjk_containing": sum(any(is_cjk(c) for c in t) for t in pieces),
        "cjk_only": sum(all(is_cjk(c) for c in t) for t in pieces),
        "starting_with_metaspace": sum(t.startswith("▁") for t in pieces),
        "whitespace_only": sum(t.strip("▁") == "" for t in pieces),
        "ascii_only": sum(t.isascii() for t in text),
        "mean_len_chars": round(sum(lens) / len(lens), 3),
        "mean_len_utf8_bytes": round(sum(blen) / len(blen), 3),
        "max_len_chars": max(lens),
        "len_histogram_chars": {str(k): hist[k] for k in sorted(hist)},
    }


def check(path, out_stats):
    tok = Tokenizer.from_file(path)
    assert tok.get_vocab_size(with_added_tokens=True) == TOTAL, tok.get_vocab_size(with_added_tokens=True)
    assert tok.get_vocab_size(with_added_tokens=False) == MODEL_VOCAB, tok.get_vocab_size(with_added_tokens=False)
    full = tok.get_vocab(with_added_tokens=True)
    assert sorted(full.values()) == list(range(TOTAL)), "ids are not contiguous 0..166911"
    d = json.load(open(path, encoding="utf-8"))
    mv = d["model"]["vocab"]
    assert sorted(mv.values()) == list(range(MODEL_VOCAB))
    assert [mv[t] for t in SPECIAL_HEAD + BYTES] == list(range(259))
    added = {a["content"]: (a["id"], a["special"]) for a in d["added_tokens"]}
    want = {t: (i, True) for i, t in enumerate(SPECIAL_HEAD)}
    want.update({t: (MODEL_VOCAB + i, i < 3) for i, t in enumerate(ADDED_SPECIAL + ADDED_PLAIN)})
    assert added == want, added
    if os.path.exists(BUNDLED):
        b = json.load(open(BUNDLED, encoding="utf-8"))
        for k in ("normalizer", "pre_tokenizer", "decoder", "truncation", "padding", "version"):
            assert d[k] == b[k], (k, d[k], b[k])
        assert {k: v for k, v in d["model"].items() if k not in ("vocab", "merges")} == \
               {k: v for k, v in b["model"].items() if k not in ("vocab", "merges")}
        assert d["post_processor"]["type"] == b["post_processor"]["type"]
        assert d["post_processor"]["single"] == b["post_processor"]["single"]
        assert [(a["content"], a["special"]) for a in d["added_tokens"]] == [(a["content"], a["special"]) for a in b["added_tokens"]]
        log("same format as the bundled tokenizer: pre_tokenizer, decoder, normalizer, model settings, added tokens")
    samples = [
        "Hello, world! The quick brown fox jumps over the lazy dog.",
        "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # 5\n",
        "public static int sum(int[] xs) {\n        int s = 0;\n        for (int x : xs) s += x;\n        return s;\n    }",
        json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": ["C", "F"], "ok": True, "x": None}}),
        json.dumps({"答案": "你好，世界！", "escaped": "a\"b\\c\nd", "n": -1.5e-7}, ensure_ascii=False, indent=2),
        json.dumps({"答案": "你好，世界！"}, ensure_ascii=True),
        "你好，世界！今天天气很好。我们一起去公园散步吧。南北阁是一个大语言模型。",
        "使用 Python 3.12 和 tokenizers 0.23 训练了一个包含166912个词元的词表。",
        "  leading spaces, trailing spaces   \n\n\nthree newlines\tand a tab",
        "Emoji: 😀 🎉 🚀 ❤️ 👍🏽 — and math: ∑ x² ≤ π · r²; 日本語のテキスト; 한국어",
    ]
    rt = []
    for s in samples:
        ids = tok.encode(s, add_special_tokens=False).ids
        back = tok.decode(ids, skip_special_tokens=False)
        # the format's own behaviour (the bundled tokenizer's and Llama's legacy one): Metaspace prepends ▁ only
        # when the text does not start with a space, and the decoder strips one leading space
        want = s[1:] if s.startswith(" ") else s
        assert back == want, (s, back)
        rt.append({"text": s[:40], "chars": len(s), "tokens": len(ids)})
        log(f"round trip ok: {len(s):4d} chars -> {len(ids):4d} tokens  {s[:50]!r}")
    chat = "<|im_start|>user\n天气如何？<|im_end|>\n<|im_start|>assistant\n<think>\nok\n</think>\n\n<tool_call>\n{\"a\": 1}\n</tool_call><|im_end|>"
    enc = tok.encode(chat, add_special_tokens=False)
    for t in ADDED_SPECIAL[:2] + ADDED_PLAIN:
        assert tok.token_to_id(t) in enc.ids, t
    with_bos = tok.encode("hi", add_special_tokens=True).ids
    assert with_bos[0] == tok.token_to_id("<|im_start|>")
    log("added tokens are matched in a chat string; <|im_start|> is prepended with add_special_tokens")
    s = stats(mv)
    s["round_trips"] = rt
    s["merges"] = len(d["model"]["merges"])
    s.update(out_stats)
    return s


def main():
    if sys.argv[1] == "--check":  # check an existing tokenizer.json[.gz] and write it (gzipped) and its stats to OUT
        src, out = sys.argv[2], sys.argv[3]
        data = gzip.decompress(open(src, "rb").read()) if src.endswith(".gz") else open(src, "rb").read()
        raw = out[:-3] if out.endswith(".gz") else out + ".raw.json"
        os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
        with open(raw, "wb") as f:
            f.write(data)
        finish(raw, out, {"checked": src})
        return
    out = sys.argv[1]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 20261201
    r = random.Random(seed)
    import tokenizers
    log(f"python {sys.version.split()[0]}, tokenizers {tokenizers.__version__}, {os.cpu_count()} cpus")
    code, prose = local_text()
    words, idents = harvest(code, prose, r)
    zh = Chinese(r, words)
    js = JsonGen(r, words, idents, zh)
    log(f"chinese: {len(zh.chars)} characters, {len(zh.lex)} pseudo-words; {len(words)} english words, {len(idents)} identifiers")
    zh_chars, json_chars = 24 * MB, 32 * MB
    for attempt in range(3):
        chinese = generated(zh.document, zh_chars)
        jsons = generated(js.document, json_chars)
        corpus = code + prose + jsons + chinese
        r.shuffle(corpus)
        sizes = {"code_chars": sum(map(len, code)), "prose_chars": sum(map(len, prose)),
                 "json_chars": sum(map(len, jsons)), "chinese_chars": sum(map(len, chinese))}
        log(f"attempt {attempt + 1}: corpus {len(corpus)} documents, " + ", ".join(f"{k} {v / MB:.1f}M" for k, v in sizes.items()))
        learned = train(corpus, MODEL_VOCAB)
        log(f"trained: {len(learned['vocab'])} pieces, {len(learned['merges'])} merges")
        tok, n_vocab, n_merges = build(learned)
        if n_vocab == MODEL_VOCAB:
            break
        log(f"short of {MODEL_VOCAB} ({n_vocab}): adding generated text and training again")
        zh_chars, json_chars = zh_chars * 2, json_chars * 2
    else:
        sys.exit(f"could not reach {MODEL_VOCAB} model pieces")
    raw = out[:-3] if out.endswith(".gz") else out + ".raw.json"
    os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
    tok.save(raw)
    finish(raw, out, {"corpus_" + k: v for k, v in sizes.items()})


def finish(raw, out, extra):
    s = check(raw, extra)
    data = open(raw, "rb").read()
    with open(out, "wb") as f:
        f.write(gzip.compress(data, compresslevel=9, mtime=0))
    s["json_bytes"] = len(data)
    s["gz_bytes"] = os.path.getsize(out)
    assert json.loads(gzip.decompress(open(out, "rb").read()))["model"]["vocab"] == json.loads(data)["model"]["vocab"]
    os.remove(raw)
    with open(out + ".stats.json", "w") as f:
        json.dump(s, f, ensure_ascii=False, indent=2)
    log("stats", json.dumps({k: v for k, v in s.items() if k != "round_trips"}, ensure_ascii=False))
    log(f"wrote {out} ({s['gz_bytes']} bytes gzipped, {len(data)} bytes of JSON)")


if __name__ == "__main__":
    main()
