#!/usr/bin/env python3
"""Builds a tokenizer in Nanbeige 4.x's exact tokenizer.json format, and HF's goldens for it.

Trains a small BPE with HF `tokenizers` on Spindle's chat data (chatdata.py) plus mixed
text, then lays it out as Nanbeige's is: ids 0-2 <unk> <s> </s>, ids 3-258 the byte
pieces <0x00>..<0xFF>, learned pieces after them; byte_fallback and fuse_unk; no
normalizer; Metaspace pre-tokenizer (prepend_scheme first, split false); decoder
Replace(▁→' '), ByteFallback, Fuse, Strip(1 leading space); TemplateProcessing that
prepends <|im_start|>. Added tokens follow the learned vocabulary in Nanbeige's order
(<|im_start|>, <|im_end|>, <|endoftext|> special; <think>, </think>, <tool_call>,
</tool_call> not special), an id layout equivalent to the real one (166100..166106).

Writes OUT/tokenizer.json, OUT/tokenizer_config.json (with the chat template),
OUT/special_tokens_map.json and GOLDEN (HF's ids and decodings of a varied corpus).

Usage: python3 make_tokenizer.py TEMPLATE OUT_DIR GOLDEN_JSONL [VOCAB]
"""
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers, AddedToken

sys.path.insert(0, os.path.dirname(__file__))
import chatdata  # noqa: E402

SPECIAL_HEAD = ["<unk>", "<s>", "</s>"]
BYTES = [f"<0x{i:02X}>" for i in range(256)]
ADDED_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
ADDED_PLAIN = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

MIXED = [
    "The quick brown fox jumps over the lazy dog. 1234567890",
    "你好，世界！今天天气很好。我们一起去公园散步吧。南北阁是一个大语言模型。",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # 5\n",
    "for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }",
    "Emoji: 😀 🎉 🚀 ❤️ 👍🏽 — and math: ∑ x² ≤ π · r²",
    "  leading spaces, trailing spaces   \n\n\nthree newlines\tand a tab",
    "JSON: {\"answer\": 42, \"ok\": true, \"list\": [1, 2, 3]}",
    "Ünïcödé àccents, naïve café, Straße, ßß, Œuvre",
]


def corpus(n, template):
    r = random.Random(1234)
    out = []
    for _ in range(n):
        text = chatdata.render_training(chatdata.conversation(r), template)
        for t in ADDED_SPECIAL + ADDED_PLAIN:  # added tokens are matched before the model: keep them out of its vocabulary
            text = text.replace(t, "\n")
        out.append(text)
    out += MIXED * 50
    return out


def golden_inputs():
    s = [
        "Hello, world!", "hello world", " leading space", "trailing space ", "   three leading", "a  b   c    d",
        "\n", "\n\n\n", "line one\nline two\n\nline four", "tab\there", "\t\t  mixed \n \t",
        "What is 37 + 48?", "Which is bigger, 9.11 or 9.8?", "How many r's are in strawberry?",
        "你好，世界", "南北阁", "今天天气怎么样？", "日本語のテキスト", "한국어 텍스트",
        "😀", "👍🏽", "🚀 to the moon 🌕", "❤️‍🔥", "é", "ß", "Ω≈ç√∫",
        "def f(x):\n    return x ** 2\n", "if (a && b) { return -1; }", "<html><body>hi</body></html>",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n",
        "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        "text<|im_end|>more", "<|endoftext|>", "<s>not special here?</s>", "<unk>", "<think><think></think>",
        "<tool_response>\n{\"temperature\": 18}\n</tool_response>", "{\"answer\": 85}",
        "\u0000 nul and \u0007 bell", "\u00a0non-breaking\u00a0space", "zero\u200bwidth", "\ufeffbom",
        "broken surrogate \ud800 here", "lone low \udc00", "x" * 300, "ab" * 200, "1234567890" * 5,
        "▁ literal metaspace ▁▁", "Ġ gpt2 style", "<0x41> looks like a byte piece",
    ]
    r = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz ABC.,!?\n\t0123456789你好世界😀é<>/|_=-"
    for _ in range(40):
        s.append("".join(r.choice(alphabet) for _ in range(r.randint(1, 80))))
    tpl = open(sys.argv[1]).read()
    rr = random.Random(99)
    for _ in range(20):
        s.append(chatdata.render_training(chatdata.conversation(rr), tpl))
    return s


def sanitize(t):
    """Lone surrogates cannot cross into Rust (or UTF-8): both sides replace them with U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in t)


def main():
    template_path, out, golden = sys.argv[1], sys.argv[2], sys.argv[3]
    vocab_size = int(sys.argv[4]) if len(sys.argv) > 4 else 4000
    template = open(template_path).read()
    os.makedirs(out, exist_ok=True)

    # 1. learn merges on the corpus
    base = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # merges are learned within words (as SentencePiece trains); the served layout below does not split
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_HEAD + BYTES, min_frequency=2,
                                  show_progress=False, limit_alphabet=300)
    base.train_from_iterator(corpus(20000, template), trainer=trainer)
    learned = json.loads(base.to_str())["model"]
    vocab = {}
    for t in SPECIAL_HEAD + BYTES:
        vocab[t] = len(vocab)
    for t, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]

    # 2. the Nanbeige layout
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
    tok.save(os.path.join(out, "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIAL_HEAD + ADDED_SPECIAL + ADDED_PLAIN}
    print("vocab", tok.get_vocab_size(), "added ids", ids)

    added_decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                              "special": t in SPECIAL_HEAD + ADDED_SPECIAL} for t, i in ids.items()}
    config = {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": added_decoder,
              "bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<unk>", "unk_token": "<unk>",
              "clean_up_tokenization_spaces": False, "legacy": False, "model_max_length": 4096,
              "tokenizer_class": "LlamaTokenizer", "chat_template": template}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<unk>", "unk_token": "<unk>"}, f, indent=2)

    # 3. goldens: HF's ids (no special tokens added, as for a rendered prompt, and with them) and decodings
    reloaded = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    with open(golden, "w") as f:
        for text in golden_inputs():
            clean = sanitize(text)
            plain = reloaded.encode(clean, add_special_tokens=False).ids
            with_bos = reloaded.encode(clean, add_special_tokens=True).ids
            f.write(json.dumps({"text": text, "sanitized": clean, "ids": plain, "ids_with_special": with_bos,
                                "decoded": reloaded.decode(plain, skip_special_tokens=False),
                                "decoded_skip_special": reloaded.decode(plain, skip_special_tokens=True)},
                               ensure_ascii=True) + "\n")
    print("goldens written")


if __name__ == "__main__":
    main()
