#!/usr/bin/env python3
"""One line per figure of a `spindle bench --backend cuda` JSON (the file named, or stdin)."""
import json, sys

d = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
print(d["model"], "copy", d["limits"]["device_copy_gb_per_second"], "GB/s, gemm", d["limits"]["bf16_gemm_peak_tflops"], "TFLOP/s")
for p in d.get("prefill", []):
    if "skipped" in p:
        print(f"prefill {p['tokens']:>6}: skipped: {p['skipped']}")
        continue
    print(f"prefill {p['tokens']:>6}: {p['tokens_per_second']:>9.1f} tok/s ({p['fraction_of_gemm_peak']})")
for key in ("decode", "aggregate_decode", "decode_sampled_on_device"):
    for r in d.get(key, []):
        if "skipped" in r:
            print(f"{key} b{r['batch']} ctx {r['context_tokens']}: skipped: {r['skipped']}")
            continue
        replay = f", graph alone {r['graph_replay_ms']} ms" if "graph_replay_ms" in r else ""
        if "graph_in_steps_ms" in r:
            replay += f", in the steps {r['graph_in_steps_ms']} ms"
        if "host_plan_us" in r:
            replay += f", host plan / send / launch / wait {r['host_plan_us']} / {r.get('host_send_us')} / {r['host_launch_us']} / {r['host_wait_us']} us"
        if "ahead_step_ms" in r:
            replay += f"; run ahead {r['ahead_tokens_per_second']:.1f} tok/s, {r['ahead_step_ms']} ms"
        print(f"{key} b{r['batch']} ctx {r['context_tokens']}: {r['tokens_per_second']:.1f} tok/s, {r['step_ms']} ms ({r['fraction_of_copy_bandwidth']}){replay}")
for r in d.get("decode_paired_epilogues", []):
    if "skipped" in r:
        continue
    print(f"paired epilogues {'on ' if r['paired_epilogues'] else 'off'} b{r['batch']} ctx {r['context_tokens']}: {r['tokens_per_second']:.1f} tok/s, {r['step_ms']} ms")
for r in d.get("engine_decode", []):
    print(f"engine b{r['streams']} async {'on ' if r['async_scheduling'] else 'off'}: {r['tokens_per_second']:.1f} tok/s ({r['decode_tokens']} tokens)")
print("ttft", d.get("time_to_first_token"))
