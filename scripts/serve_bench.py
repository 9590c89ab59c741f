#!/usr/bin/env python3
"""Measures a running Spindle server: time to first token and throughput at a given concurrency.

Each client streams a chat completion (stdlib only: http.client) and records when the first
text chunk (reasoning or content) arrives; usage gives the generated tokens. Prints JSON.
Usage: python3 scripts/serve_bench.py URL CONCURRENCY REQUESTS_PER_CLIENT [MAX_TOKENS]
"""
import http.client
import json
import statistics
import sys
import threading
import time
from urllib.parse import urlparse

url, conc, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 128
u = urlparse(url)
QUESTIONS = ["What is %d + %d?", "How many minutes are in %d hours?", "Is %d a leap year?"]
results, lock = [], threading.Lock()


def client(cid):
    for r in range(per):
        q = QUESTIONS[(cid + r) % 3]
        q = q % ((cid * 7 + r) % 90 + 10, (cid + 3 * r) % 80 + 10) if q.count("%d") == 2 else q % ((cid * 13 + r) % 400 + 1800 if "leap" in q else (cid + r) % 20 + 1)
        body = json.dumps({"messages": [{"role": "user", "content": q}], "stream": True, "temperature": 0, "max_tokens": max_tokens,
                           "stream_options": {"include_usage": True}})
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        ttft, tokens = None, 0
        for line in resp:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for c in chunk.get("choices", []):
                d = c.get("delta", {})
                if ttft is None and (d.get("content") or d.get("reasoning_content")):
                    ttft = time.perf_counter() - t0
        total = time.perf_counter() - t0
        conn.close()
        with lock:
            results.append((ttft, total, tokens))


t0 = time.perf_counter()
threads = [threading.Thread(target=client, args=(i,)) for i in range(conc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.perf_counter() - t0
ttfts = sorted(r[0] for r in results if r[0] is not None)
tokens = sum(r[2] for r in results)
print(json.dumps({"concurrency": conc, "requests": len(results), "generated_tokens": tokens, "wall_seconds": round(wall, 2),
                  "throughput_tokens_per_second": round(tokens / wall, 1),
                  "ttft_ms": {"p50": round(1000 * statistics.median(ttfts), 1), "p90": round(1000 * ttfts[int(0.9 * (len(ttfts) - 1))], 1),
                              "max": round(1000 * ttfts[-1], 1)},
                  "per_request_tokens_per_second_p50": round(statistics.median(r[2] / r[1] for r in results), 1)}, indent=1))
