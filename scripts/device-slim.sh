#!/usr/bin/env bash
# A device call carries the working tree (tracked and untracked-not-ignored files) plus the carried .dist,
# 64 MiB in all, and the tree alone is most of that. This moves out of the tree what one kind of call does
# not read, into a folder outside the repository, and puts it back:
# Every mode moves the ggml block vectors, the GGUF vocabularies and the bundled model's EXL3 checkpoint (CPU tests only); the
# EXL3, GGUF, MLX and NVFP4 model fixtures stay where the CUDA tests read them (Exl3ContractTest, CudaExl3PassTest,
# CudaExpandedFormatsTest), and the bench mode moves them.
#   device-slim.sh tests      the CUDA suite (device-run.sh tests): keeps the bundled target and every parity fixture
#                             (with .dist as device-bundle.sh leaves it: an overlay folder added to .dist may not fit
#                             beside them; size says so); moves the DFlash fixtures and heads, the drafter (no test of the
#                             suite reads it; CudaSpeculativeTest, which does, runs in the dflash mode), the tokenizers,
#                             the node clients, the agent model (only the agent CLI tests read it), docs/bench, the test sources (the suite runs from .dist/test-classes) and
#                             .dist/base-classes (only an A/B reads it); and the format fixtures (the formats' CUDA tests then skip, saying so:
#                             they run in the formats mode)
#   device-slim.sh kernels    as tests, less the parity fixtures and the bundled model's HF logits: kernel contract tests,
#                             the EXL3 fixtures' check against exllamav3 (scripts/exl3_reference_check.py), training
#   device-slim.sh dflash     CudaDraftHeadTest's trained heads and CudaSpeculativeTest: keeps the bundled models and
#                             the DFlash heads, moves the parity fixtures, the DFlash reference fixtures (its other
#                             test then fails with "not found") and the bundled model's HF reference logits
#   device-slim.sh dflash-reference  CudaDraftHeadTest whole: its PyTorch reference fixtures, the bundled target
#                             and the trained heads' test in two calls: this mode keeps the reference fixtures and
#                             moves the trained heads and the drafter (run the dflash mode for the trained heads)
#   device-slim.sh formats    the weight formats' CUDA tests (Exl3ContractTest, CudaExl3PassTest, CudaExpandedFormatsTest) and
#                             the bench: keeps llama-gqa and the EXL3, GGUF, MLX and NVFP4 fixtures, moves the bundled models
#   device-slim.sh bench      device-run.sh bench | ab | ncu-bench with --load-format dummy: moves every fixture
#                             and bundled model too
#   device-slim.sh serve      device-run.sh serve-check (carry: [".dist-server"]): keeps the bundled chat model, moves the
#                             fixtures, the drafter and the DFlash heads; sizes the tree against .dist-server
#   device-slim.sh restore    puts everything back (run it before any commit)
#   device-slim.sh size       what the next call would carry, against the limit
# Nothing is deleted: moved paths keep their relative names under $ASIDE (default /tmp/spindle-device-aside),
# listed in its MANIFEST, which restore reads.
set -euo pipefail
cd "$(dirname "$0")/.."
aside="${ASIDE:-/tmp/spindle-device-aside}"
limit=67108864

size() {
  local t u d dist="${1:-.dist}"
  # files moved out are still tracked: du skips them (its complaint silenced, its status ignored)
  t=$( ( (git ls-files -z; git ls-files -o --exclude-standard -z) | xargs -0 du -cb 2>/dev/null || true) | awk '/\ttotal$/ {s += $1} END {print s + 0}')
  d=$( (du -sb "$dist" 2>/dev/null || echo 0) | cut -f1)
  echo "tree $t + $dist ${d:-0} = $((t + ${d:-0})) bytes of $limit"
  if [ $((t + ${d:-0})) -gt $((limit - 2 * 1024 * 1024)) ]; then
    echo "too close to the limit (the device tool counts a little more than this): move more out" >&2
    return 1
  fi
}

move() {
  mkdir -p "$aside"
  for p in "$@"; do
    if [ -e "$p" ]; then
      if [ -e "$aside/$p" ]; then echo "$aside/$p already exists: run restore first" >&2; exit 2; fi
      mkdir -p "$aside/$(dirname "$p")"
      mv "$p" "$aside/$p"
      echo "$p" >> "$aside/MANIFEST"
      echo "moved out: $p"
    fi
  done
}

restore() {
  [ -f "$aside/MANIFEST" ] || { echo "nothing to restore"; return 0; }
  while read -r p; do
    if [ -e "$p" ]; then echo "$p exists in the tree and in $aside: left both; compare them" >&2; continue; fi
    mkdir -p "$(dirname "$p")"
    mv "$aside/$p" "$p"
    echo "restored: $p"
  done < <(tac "$aside/MANIFEST") # the last moved first: a folder before what was moved out of it earlier
  rm -f "$aside/MANIFEST"
  find "$aside" -mindepth 1 -depth -type d -empty -delete 2>/dev/null || true
  if git status --short | grep '^ D'; then echo "tracked files are still missing (above)" >&2; return 1; fi
}

common=(src/test/resources/tokenizer-166k src/test/resources/templates-compat src/test/resources/tokenizer src/test/node docs/bench models/spindle-chat-agent
        src/test/resources/fixtures/ggml src/test/resources/fixtures/gguf-vocab src/test/resources/fixtures/exl3/chat-target-4bit)
dflash=(src/test/resources/fixtures/dflash models/spindle-chat-dflash models/spindle-chat-dflash2)
parity=(src/test/resources/fixtures/llama-headdim-sharded src/test/resources/fixtures/llama-gqa src/test/resources/fixtures/nanbeige-looped)
bundled=(src/test/resources/fixtures/chat-target models/spindle-chat-drafter models/spindle-chat-target)
formats=(src/test/resources/fixtures/gguf src/test/resources/fixtures/mlx src/test/resources/fixtures/nvfp4 src/test/resources/fixtures/exl3)
case "${1:-}" in
  tests) move "${common[@]}" "${dflash[@]}" "${formats[@]}" models/spindle-chat-drafter src/test/java .dist/base-classes; size ;;
  kernels) move "${common[@]}" "${dflash[@]}" "${parity[@]}" models/spindle-chat-drafter src/test/java .dist/base-classes \
            src/test/resources/fixtures/chat-target/reference.safetensors; size ;;
  dflash) move "${common[@]}" "${parity[@]}" src/test/java src/test/resources/fixtures/dflash src/test/resources/fixtures/chat-target/reference.safetensors \
            .dist/base-classes; size ;;
  dflash-reference) move "${common[@]}" "${parity[@]}" models/spindle-chat-dflash models/spindle-chat-dflash2 models/spindle-chat-drafter \
            src/test/resources/fixtures/chat-target/reference.safetensors .dist/base-classes; size ;;
  formats) move "${common[@]}" "${dflash[@]}" "${bundled[@]}" src/test/resources/fixtures/llama-headdim-sharded src/test/resources/fixtures/nanbeige-looped \
            src/test/java .dist/base-classes; size ;;
  bench) move "${common[@]}" "${dflash[@]}" "${parity[@]}" "${bundled[@]}" "${formats[@]}"; size ;;
  serve) move "${common[@]}" "${dflash[@]}" "${parity[@]}" src/test/resources/fixtures/chat-target models/spindle-chat-drafter; size .dist-server ;;
  restore) restore ;;
  size) size ;;
  *) echo "usage: device-slim.sh tests|kernels|formats|dflash|dflash-reference|bench|serve|restore|size" >&2; exit 2 ;;
esac
