#!/usr/bin/env python3
"""Checks a running Spindle server end to end over its HTTP API (stdlib only), against itself and a reference server.

For a fixed set of chat prompts (the bundled chat model's topics, one tool call among them):
  1. each prompt alone, greedy, streamed: the replies of the server under test (URL) and of REF_URL (for
     example the same model on the CPU backend) are compared token text for token text;
  2. all prompts at once on URL, streamed, plus seeded sampled requests: every reply must equal the same
     request sent alone (a request's tokens never depend on its batch);
  3. /q/metrics must expose Spindle's Prometheus series, and a malformed request gets a 400 while the rest go on.
Prints JSON; exits 1 when an invariant of URL fails (2 and 3). Differences against REF_URL are reported, not
fatal: two backends round their GEMMs differently, so only decisive tokens must agree.
Usage: python3 scripts/serve_check.py URL [REF_URL]
"""
import http.client
import json
import sys
import threading
import time
from urllib.parse import urlparse

PROMPTS = ["What is 47 + 38?", "What is 603 - 259?", "What is 12 * 34?", "Which is bigger, 9.11 or 9.8?",
           "How many r's are in strawberry?", "How many minutes are in 7 hours?", "Is 2024 a leap year?",
           "How many days are in February 1900?", "Convert 3 kilometers to meters.", "What is 999 + 1?",
           "Which is bigger, 0.7 or 0.65?", "How many e's are in excellence?"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def post(url, path, body, stream):
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if not stream or resp.status != 200:
        data = resp.read().decode()
        conn.close()
        return resp.status, data
    pieces, calls, finish = [], [], None
    for line in resp:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for c in json.loads(line[6:]).get("choices", []):
            d = c.get("delta", {})
            for key in ("reasoning_content", "content"):
                if d.get(key):
                    pieces.append((key, d[key]))
            # a call's id is random: compare the rest
            calls.extend({k: v for k, v in t.items() if k != "id"} for t in d.get("tool_calls") or [])
            finish = c.get("finish_reason") or finish
    conn.close()
    return 200, {"text": pieces, "tool_calls": calls, "finish": finish}


def request(i, sampled=False):
    body = {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], "stream": True, "max_tokens": 96}
    if i == 3:
        body["messages"] = [{"role": "user", "content": "What's the weather in Paris?"}]
        body["tools"] = TOOLS
    body.update({"temperature": 0.8, "top_p": 0.95, "seed": 1000 + i} if sampled else {"temperature": 0})
    return body


def run(url, bodies, concurrent):
    out = [None] * len(bodies)

    def one(j):
        status, reply = post(url, "/v1/chat/completions", bodies[j], True)
        out[j] = reply if status == 200 else {"status": status, "error": reply}

    if concurrent:
        threads = [threading.Thread(target=one, args=(j,)) for j in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for j in range(len(bodies)):
            one(j)
    return out


def text(reply):
    return "".join(p for _, p in reply.get("text", [])) if isinstance(reply, dict) else str(reply)


def first_difference(url, ref, body):
    """Where two servers' greedy replies to body part: the token position and each side's two likeliest tokens there
    (ids and logprobs, asked again without streaming). A near tie (both margins a few hundredths) is rounding; a wide
    margin on either side is a bug to chase."""
    ask = dict(body, stream=False, logprobs=True, top_logprobs=2, return_tokens_as_token_ids=True)
    sides = {}
    for name, u in (("here", url), ("reference", ref)):
        status, data = post(u, "/v1/chat/completions", ask, False)
        if status != 200:
            return {"logprobs_error": f"{u}: {status} {data[:200]}"}
        sides[name] = json.loads(data)["choices"][0]["logprobs"]["content"]
    here, there = sides["here"], sides["reference"]
    i = next((k for k in range(min(len(here), len(there))) if here[k]["token"] != there[k]["token"]), None)
    if i is None:
        return {"first_difference": "none in the logprobs replies (their lengths: %d, %d)" % (len(here), len(there))}

    def top(entry):
        alts = [(a["token"], round(a["logprob"], 4)) for a in entry["top_logprobs"]]
        return {"top2": alts, "margin": round(alts[0][1] - alts[1][1], 4) if len(alts) > 1 else None}

    return {"first_difference": {"position": i, "here": top(here[i]), "reference": top(there[i])}}


def wait_ready(url, seconds=900, refused_seconds=120):
    """Until /q/health/ready answers 200; gives up when the server stops answering (it exits when it cannot serve)."""
    u = urlparse(url)
    refused = 0
    for _ in range(seconds):
        try:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            conn.request("GET", "/q/health/ready")
            if conn.getresponse().status == 200:
                return
            refused = 0
        except OSError:
            refused += 1
            if refused > refused_seconds:
                sys.exit(f"{url} is not answering (see its log)")
        time.sleep(1)
    sys.exit(f"{url} did not become ready in {seconds} s")


def main():
    url = sys.argv[1]
    ref = sys.argv[2] if len(sys.argv) > 2 else None
    for u in filter(None, (url, ref)):
        wait_ready(u)
    bodies = [request(i) for i in range(len(PROMPTS))] + [request(i, sampled=True) for i in range(len(PROMPTS))]
    alone = run(url, bodies, False)
    together = run(url, bodies, True)
    report = {"url": url, "requests": len(bodies)}
    bad = [j for j in range(len(bodies)) if "status" in alone[j]]
    report["errors_alone"] = [alone[j] for j in bad]
    differ = [j for j in range(len(bodies)) if alone[j] != together[j]]
    report["concurrent_equals_alone"] = f"{len(bodies) - len(differ)} of {len(bodies)}"
    report["concurrent_differs"] = [{"request": j, "alone": text(alone[j]), "together": text(together[j])} for j in differ]
    report["tool_call"] = alone[3].get("tool_calls")
    report["sample_replies"] = [text(alone[j])[:160] for j in (0, 3, len(PROMPTS))]
    status, _ = post(url, "/v1/chat/completions", {"messages": "not a list", "max_tokens": 4}, False)
    report["malformed_request_status"] = status
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("GET", "/q/metrics")
    metrics = conn.getresponse().read().decode()
    series = sorted({line.split("{")[0].split(" ")[0] for line in metrics.splitlines() if line.startswith("spindle_")})
    report["metrics_series"] = series
    ok = not bad and not differ and status == 400 and "spindle_generation_tokens_total" in series and report["tool_call"]
    if ref:
        greedy = range(len(PROMPTS))
        other = run(ref, [bodies[j] for j in greedy], False)
        same = [j for j in greedy if text(other[j]) == text(alone[j]) and other[j].get("tool_calls") == alone[j].get("tool_calls")]
        report["greedy_equals_reference"] = f"{len(same)} of {len(greedy)} replies ({ref})"
        report["greedy_differs_from_reference"] = [dict({"request": j, "reference": text(other[j]), "here": text(alone[j])},
                                                        **first_difference(url, ref, bodies[j]))
                                                   for j in greedy if j not in same]
    report["ok"] = bool(ok)
    print(json.dumps(report, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
