#!/usr/bin/env python3
"""llama.cpp's own logits for the GGUF fixtures, the reference LlamaCppLogitsTest compares Spindle against (issue 54: the
same file through both engines, teacher-forced).

For each fixture file: a copy with `tokenizer.ggml.model = "none"` and `llama.vocab_size` (the fixtures hold no vocabulary,
and llama.cpp's loader requires one; "none" gives it dummy tokens, the weights untouched), then llama.cpp's logits at every
position of a seeded sequence of 48 ids (scripts/llama_logits.c: one batch, as a prefill), written as float32
(positions x vocab) into OUT_DIR/<fixture>.f32, and OUT_DIR/index.json: the ids, the vocabulary size, llama.cpp's commit and
how it was built and run.

Usage: make_llama_cpp_logits.py GGUF_PY_DIR LLAMA_LOGITS_BINARY LLAMA_COMMIT OUT_DIR FIXTURE.gguf...
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import gguf  # noqa: E402

SEED = 54
POSITIONS = 48


def with_dummy_vocab(src, dst):
    reader = gguf.GGUFReader(src)
    arch = reader.get_field("general.architecture").contents()
    vocab = None
    for t in reader.tensors:
        if t.name == "token_embd.weight":
            vocab = int(t.shape[-1])
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF.") or field.name.startswith("tokenizer."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
    writer.add_key_value("tokenizer.ggml.model", "none", gguf.GGUFValueType.STRING)
    if reader.get_field(f"{arch}.vocab_size") is None:
        writer.add_key_value(f"{arch}.vocab_size", vocab, gguf.GGUFValueType.UINT32)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    return vocab


def main():
    binary, commit, out, files = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    os.makedirs(out, exist_ok=True)
    index = {"llama_cpp_commit": commit, "positions": POSITIONS, "seed": SEED,
             "how": "scripts/llama_logits.c built against that commit's CPU build (cmake -DGGML_NATIVE=OFF), run with 2 threads and "
                    "no GPU layers; the file copied with tokenizer.ggml.model none (scripts/make_llama_cpp_logits.py)",
             "fixtures": {}}
    for f in files:
        name = os.path.basename(f)[:-len(".gguf")]
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, name + ".gguf")
            vocab = with_dummy_vocab(f, copy)
            r = random.Random(SEED)
            ids = [r.randrange(3, vocab) for _ in range(POSITIONS)]
            run = subprocess.run([binary, copy, os.path.join(out, name + ".f32"), "0"] + [str(i) for i in ids], capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"{name}: llama_logits failed:\n{run.stderr[-2000:]}")
            v, n = map(int, run.stdout.split())
            assert v == vocab and n == POSITIONS, (v, n)
        index["fixtures"][name] = {"vocab": vocab, "ids": ids}
        print(name, vocab, flush=True)
    with open(os.path.join(out, "index.json"), "w") as fh:
        json.dump(index, fh, indent=1)


if __name__ == "__main__":
    main()
