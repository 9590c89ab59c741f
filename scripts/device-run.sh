#!/usr/bin/env bash
# Runs on the GPU machine (see scripts/device-bundle.sh): unpacks the carried JRE, puts the CUDA
# toolkit's cuBLAS (and NCCL, where found) on the loader path, then runs what is asked, writing logs under $OUT:
#   device-run.sh tests            the CUDA contract, parity and invariance tests
#   device-run.sh tests-portable   the same through the portable kernels only (--cuda-kernels portable: the pre-Hopper path)
#   device-run.sh test CLASS...    only the named test classes (dev.spindle.backend.cuda.LinearRowsContractTest ...)
#   device-run.sh test-portable CLASS...  the same through the portable kernels only
#   device-run.sh method CLASS#METHOD...  only the named test methods (a parameterized one with its parameter types:
#                                  'KernelContractTest#decodeSplitPathEqualsPhaseZeroAtLongContext(int,int,int)')
#   device-run.sh ncu ARGS... -- METHOD   one test method (class#method) under Nsight Compute with ARGS
#   device-run.sh bench ARGS...    spindle bench --backend cuda ARGS...
#   device-run.sh ncu-bench ARGS... -- BENCH_ARGS...   that bench under Nsight Compute with ARGS (give the bench
#                                  --no-cuda-graphs and a small --kv-memory-fraction for kernel replay; with ncu's
#                                  --profile-from-start off and the bench's --profile-figure KIND:N, one figure's kernels)
#   device-run.sh ab ARGS...       the same bench on the base classes (device-bundle.sh --base REV), then on these
#   device-run.sh variants ROUNDS DIR,DIR,... ARGS...   the same bench on each classes folder in turn, ROUNDS times
#   device-run.sh cli DIR ARGS...  spindle ARGS... on the classes folder DIR (.dist/classes, .dist/base-classes, or another
#                                  built the same way): e.g. generate --backend cuda, whose start line gives the load's phases
#   device-run.sh serve-check      the packaged server on CUDA against itself and the CPU backend (bundled chat model)
#   device-run.sh figures [ARGS...]  the README's tables: the whole bench of the 33B shape, then of the 3B shape (dummy
#                                  weights, ARGS added to both), JSON to $OUT/figures-<shape>.json, then both summaries
set -uo pipefail
mkdir -p /tmp/spindle-jre && [ -x /tmp/spindle-jre/jre25/bin/java ] || tar xJf "$(ls .dist/jre.txz .dist-server/jre.txz 2>/dev/null | head -1)" -C /tmp/spindle-jre
export LD_LIBRARY_PATH="$(dirname "$(find / -name 'libcublasLt.so.13' 2>/dev/null | head -1)")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NCCL (tensor parallelism), from the nvidia-nccl-cu13 wheel where the machine has it
nccl="$(find / -name 'libnccl.so.2' -not -path '*/proc/*' 2>/dev/null | head -1)"
[ -n "$nccl" ] && export LD_LIBRARY_PATH="$(dirname "$nccl"):$LD_LIBRARY_PATH"
java=(/tmp/spindle-jre/jre25/bin/java --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED -Xmx32g)
what="$1"; shift
case "$what" in
  tests) "${java[@]}" -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" --select-package dev.spindle.backend.cuda --select-class dev.spindle.engine.sched.CudaEngineTest \
           --details=tree --disable-ansi-colors "$@" 2>&1 | tee "${OUT:-/tmp}/tests.log" ;;
  tests-portable)
       # the same suite through the portable kernels only (sm_80 PTX compiled by the driver: the pre-Hopper path)
       "${java[@]}" -Dspindle.test.cuda-kernels=portable -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" --select-package dev.spindle.backend.cuda --select-class dev.spindle.engine.sched.CudaEngineTest \
           --details=tree --disable-ansi-colors "$@" 2>&1 | tee "${OUT:-/tmp}/tests-portable.log" ;;
  test-portable) sel=(); for c in "$@"; do sel+=(--select-class "$c"); done
        "${java[@]}" -Dspindle.test.cuda-kernels=portable -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" "${sel[@]}" \
           --details=tree --disable-ansi-colors 2>&1 | tee "${OUT:-/tmp}/test-portable.log" ;;
  test) sel=(); for c in "$@"; do sel+=(--select-class "$c"); done
        "${java[@]}" -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" "${sel[@]}" \
           --details=tree --disable-ansi-colors 2>&1 | tee "${OUT:-/tmp}/test.log" ;;
  method) sel=(); for m in "$@"; do sel+=(--select-method "$m"); done
        "${java[@]}" -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" "${sel[@]}" \
           --details=tree --disable-ansi-colors 2>&1 | tee "${OUT:-/tmp}/test.log" ;;
  ncu) args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
       ncu "${args[@]}" "${java[@]}" -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" --select-method "$1" \
           --details=summary --disable-ansi-colors 2>&1 ;;
  ncu-bench) args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
       ncu "${args[@]}" "${java[@]}" -cp ".dist/classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda "$@" ;;
  bench) "${java[@]}" -cp ".dist/classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda "$@" ;;
  cli) d="$1"; shift; "${java[@]}" -cp "$d:.dist/lib/*" dev.spindle.cli.SpindleCli "$@" ;;
  ab)
    # the same bench on the base commit's classes (device-bundle.sh --base REV) and on this tree's, one after
    # the other in this call; JSON to $OUT/ab-base.json and $OUT/ab-current.json, then both summaries
    [ -d .dist/base-classes ] || { echo "no .dist/base-classes: bundle with scripts/device-bundle.sh --base REV" >&2; exit 2; }
    for v in base current; do
      classes=.dist/classes; [ "$v" = base ] && classes=.dist/base-classes
      "${java[@]}" -cp "$classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda "$@" > "${OUT:-/tmp}/ab-$v.json" 2> "${OUT:-/tmp}/ab-$v.err"
    done
    for v in base current; do echo "== $v"; python3 scripts/bench-summary.py "${OUT:-/tmp}/ab-$v.json"; done ;;
  variants)
    # device-run.sh variants ROUNDS DIR,DIR,... BENCH_ARGS...: the same bench on each classes folder (.dist/base-classes,
    # .dist/classes, or another built the same way), in turn, ROUNDS times (alternated, so a drift of the machine
    # shows as a drift, not as a difference); JSON to $OUT/var-<folder>-<round>.json, then every summary
    rounds="$1"; IFS=, read -r -a dirs <<< "$2"; shift 2
    for r in $(seq 1 "$rounds"); do
      for d in "${dirs[@]}"; do
        n="$(basename "$d")"
        "${java[@]}" -cp "$d:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda "$@" > "${OUT:-/tmp}/var-$n-$r.json" 2> "${OUT:-/tmp}/var-$n-$r.err"
      done
    done
    for r in $(seq 1 "$rounds"); do for d in "${dirs[@]}"; do n="$(basename "$d")"; echo "== $n round $r"; python3 scripts/bench-summary.py "${OUT:-/tmp}/var-$n-$r.json"; done; done ;;
  serve-check)
    # the packaged server on the CUDA backend (port 8002) against the same model on the CPU backend (port 8001):
    # scripts/serve_check.py, then scripts/serve_bench.py on CUDA at the given concurrencies
    mkdir -p /tmp/spindle-srv && [ -f /tmp/spindle-srv/spindle-server/quarkus-run.jar ] || tar xJf .dist-server/server.txz -C /tmp/spindle-srv
    serve=("${java[@]}" -Djava.util.logging.manager=org.jboss.logmanager.LogManager -jar /tmp/spindle-srv/spindle-server/quarkus-run.jar serve)
    "${serve[@]}" --backend cpu --port 8001 "$@" > "${OUT:-/tmp}/server-cpu.log" 2>&1 &
    cpu=$!
    "${serve[@]}" --backend cuda --port 8002 --max-num-seqs 64 "$@" > "${OUT:-/tmp}/server-cuda.log" 2>&1 &
    gpu=$!
    python3 scripts/serve_check.py http://localhost:8002 http://localhost:8001; rc=$?
    for c in 1 16 64; do python3 scripts/serve_bench.py http://localhost:8002 "$c" 4 128; done
    kill "$cpu" "$gpu"; wait
    exit "$rc" ;;
  figures)
    rc=0
    for m in nanbeige4.3-33b-shape nanbeige4.1-3b-shape; do
      "${java[@]}" -cp ".dist/classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda --model "models/shapes/$m" --load-format dummy "$@" \
        > "${OUT:-/tmp}/figures-$m.json" 2> "${OUT:-/tmp}/figures-$m.err" || { rc=$?; tail -3 "${OUT:-/tmp}/figures-$m.err"; }
    done
    for m in nanbeige4.3-33b-shape nanbeige4.1-3b-shape; do echo "== $m"; python3 scripts/bench-summary.py "${OUT:-/tmp}/figures-$m.json"; done
    exit "$rc" ;;
  *) echo "usage: device-run.sh tests|test|method|ncu|ncu-bench|bench|cli|ab|variants|serve-check|figures ..." >&2; exit 2 ;;
esac
