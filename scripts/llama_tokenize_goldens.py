"""The ids llama.cpp's own llama-tokenize gives for texts with a GGUF file's vocabulary (tokenizer goldens), shared by
make_gguf_vocab.py and make_gguf_bpe_vocab.py: one JSON object a line, {text, ids}, no BOS, special tokens parsed."""
import json
import os
import subprocess
import tempfile


def write_goldens(tool, gguf_path, texts, goldens_path):
    with open(goldens_path, 'w') as g:
        for text in texts:
            with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False, encoding='utf-8') as f:
                f.write(text)
            r = subprocess.run([tool, '-m', gguf_path, '-f', f.name, '--ids', '--no-bos', '--log-disable'], capture_output=True, text=True)
            os.unlink(f.name)
            ids = json.loads(r.stdout.strip().splitlines()[-1])
            g.write(json.dumps({'text': text, 'ids': ids}, ensure_ascii=False) + '\n')
    print(goldens_path)
