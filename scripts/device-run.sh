#!/usr/bin/env bash
# Runs on the GPU machine (see scripts/device-bundle.sh): unpacks the carried JRE, puts the CUDA
# toolkit's cuBLAS on the loader path, then runs what is asked, writing logs under $OUT:
#   device-run.sh tests            the CUDA contract, parity and invariance tests
#   device-run.sh bench ARGS...    spindle bench --backend cuda ARGS...
set -uo pipefail
mkdir -p /tmp/spindle-jre && [ -x /tmp/spindle-jre/jre25/bin/java ] || tar xJf .dist/jre.txz -C /tmp/spindle-jre
export LD_LIBRARY_PATH="$(dirname "$(find / -name 'libcublasLt.so.13' 2>/dev/null | head -1)")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
java=(/tmp/spindle-jre/jre25/bin/java --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED -Xmx32g)
what="$1"; shift
case "$what" in
  tests) "${java[@]}" -jar .dist/lib/junit-platform-console-standalone-6.0.3.jar execute \
           --class-path ".dist/classes:.dist/test-classes:$(ls .dist/lib/*.jar | grep -v junit | tr '\n' ':')" --select-package dev.spindle.backend.cuda --select-class dev.spindle.engine.sched.CudaEngineTest \
           --details=tree --disable-ansi-colors "$@" 2>&1 | tee "${OUT:-/tmp}/tests.log" ;;
  bench) "${java[@]}" -cp ".dist/classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda "$@" ;;
  *) echo "usage: device-run.sh tests|bench ..." >&2; exit 2 ;;
esac
