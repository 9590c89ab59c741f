#!/usr/bin/env bash
# Runs on the GPU machine: the benchmark under a profiler, reports under $OUT.
#   device-profile.sh nsys BENCH-ARGS...   timeline of every kernel (graph nodes too): $OUT/trace.csv,
#                                          the per-kernel summary on stdout
#   device-profile.sh ncu SKIP COUNT REGEX BENCH-ARGS...
#                                          Nsight Compute sections for COUNT launches of kernels matching
#                                          REGEX after SKIP of them: $OUT/ncu.txt
set -uo pipefail
mkdir -p /tmp/spindle-jre && [ -x /tmp/spindle-jre/jre25/bin/java ] || tar xJf .dist/jre.txz -C /tmp/spindle-jre
export LD_LIBRARY_PATH="$(dirname "$(find / -name 'libcublasLt.so.13' 2>/dev/null | head -1)")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
java=(/tmp/spindle-jre/jre25/bin/java --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED -Xmx32g
      -cp ".dist/classes:.dist/lib/*" dev.spindle.cli.SpindleCli bench --backend cuda)
out="${OUT:-/tmp}"
tool="$1"; shift
case "$tool" in
  nsys)
    nsys profile -t cuda --cuda-graph-trace=node -o "$out/prof" --force-overwrite true "${java[@]}" "$@" > "$out/bench.json"
    nsys stats -q -r cuda_gpu_kern_sum --format csv "$out/prof.nsys-rep" > "$out/kern_sum.csv"
    nsys stats -q -r cuda_gpu_trace --format csv "$out/prof.nsys-rep" > "$out/trace.csv"
    rm -f "$out/prof.nsys-rep" "$out/prof.sqlite"
    gzip -f "$out/trace.csv"
    head -40 "$out/kern_sum.csv" ;;
  ncu)
    skip="$1" count="$2" regex="$3"; shift 3
    ncu --graph-profiling node -k "regex:$regex" --launch-skip "$skip" --launch-count "$count" \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        "${java[@]}" "$@" > "$out/ncu.txt" 2>&1
    grep -E '^  [a-z_0-9]+|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Compute \(SM\)' "$out/ncu.txt" | head -150 ;;
  *) echo "usage: device-profile.sh nsys|ncu ..." >&2; exit 2 ;;
esac
