#!/usr/bin/env python3
"""Writes src/main/resources/kl/corpus.jsonl: the sequences `spindle kl` scores, by category.

Every text here is written for this corpus (nothing copied). Categories:
  chat     assistant turns with a think block: arithmetic, comparisons, explanations, advice
  agentic  tool definitions, assistant tool calls in the XML format, tool results, final answers (several steps)
  code     source code as plain text: Python, Java, SQL, shell, CUDA
  chinese  Chinese prose and a Chinese chat
Run it again after editing; the output is deterministic.
"""
import json
import pathlib

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}},
]
DEV_TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_tests", "description": "Run the test suite, or one test class.",
        "parameters": {"type": "object", "properties": {"target": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "edit_file", "description": "Replace a unique string in a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"]}}},
]


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


def turn(user, think, answer):
    return [{"role": "user", "content": user}, {"role": "assistant", "reasoning_content": think, "content": answer}]


entries = []


def add(category, ident, **kw):
    entries.append({"category": category, "id": ident, **kw})


add("chat", "arithmetic", messages=turn(
    "What is 478 + 3956?",
    "Add column by column. 8 + 6 = 14, write 4 carry 1. 7 + 5 + 1 = 13, write 3 carry 1. 4 + 9 + 1 = 14, write 4 carry 1. 0 + 3 + 1 = 4. So 4434.",
    "478 + 3956 = 4434."))
add("chat", "comparison-and-units", messages=turn(
    "Which is bigger, 7.45 or 7.5?",
    "Compare the integer parts: both 7. Then the tenths: 4 against 5. 5 is larger, so 7.5 is bigger.",
    "7.5 is bigger than 7.45.") + turn(
    "How many centimetres are in 3.2 metres?",
    "One metre is 100 centimetres, so 3.2 metres is 3.2 x 100 = 320 centimetres.",
    "3.2 metres is 320 centimetres."))
add("chat", "explain-cache", messages=[
    {"role": "system", "content": "You are a concise assistant for software engineers."},
    {"role": "user", "content": "Why does a CPU cache make a loop over an array faster than a loop over a linked list?"},
    {"role": "assistant", "reasoning_content": "The key is locality. Arrays are contiguous, so one cache line brings several elements, and the "
        "prefetcher can predict the next lines. A linked list's nodes can be anywhere in memory, so each step may miss the cache and wait for "
        "main memory, and the address of the next node is only known after the current one arrives.",
     "content": "An array is stored contiguously: each 64-byte cache line that is loaded holds several elements, and the hardware prefetcher "
        "sees the sequential pattern and fetches the next lines before the loop needs them. A linked list scatters its nodes across memory. "
        "Every step follows a pointer whose target is only known once the previous node has arrived, so the loads cannot overlap and each "
        "cache miss costs the full memory latency, often a hundred nanoseconds or more. The work per element is the same; the waiting is not."}])
add("chat", "advice-no-think", messages=[
    {"role": "user", "content": "Give me three tips for writing a clear bug report."},
    {"role": "assistant", "reasoning_content": "", "content": "1. Say exactly how to reproduce it: the version, the input and the steps, "
        "so that someone else sees the same failure.\n2. Separate what you expected from what happened, and paste the real error message "
        "rather than a summary of it.\n3. Keep one problem per report, and add what you already tried, so nobody repeats it."}])
add("chat", "dates", messages=turn(
    "Is 2100 a leap year?",
    "A year divisible by 4 is a leap year, except years divisible by 100, unless they are also divisible by 400. "
    "2100 is divisible by 100 but not by 400, so it is not a leap year.",
    "No. 2100 is divisible by 100 but not by 400, so it is a common year with 365 days."))
add("chat", "letters", messages=turn(
    "How many times does the letter r appear in 'strawberry'?",
    "Spell it: s, t, r, a, w, b, e, r, r, y. The r's are at positions 3, 8 and 9. That is 3.",
    "The letter r appears 3 times in 'strawberry'."))

add("agentic", "weather-then-time", tools=TOOLS, messages=[
    {"role": "user", "content": "What's the weather in Madrid, and what time is it there?"},
    {"role": "assistant", "reasoning_content": "Two questions. First the weather in Madrid with get_weather.", "content": "",
     "tool_calls": [call("get_weather", {"city": "Madrid"})]},
    {"role": "tool", "content": json.dumps({"city": "Madrid", "temperature": 21, "unit": "°C", "condition": "sunny"})},
    {"role": "assistant", "reasoning_content": "It is 21°C and sunny. Now the time with get_time.", "content": "",
     "tool_calls": [call("get_time", {"city": "Madrid"})]},
    {"role": "tool", "content": json.dumps({"city": "Madrid", "time": "16:05"})},
    {"role": "assistant", "reasoning_content": "Both answers are in.", "content": "In Madrid it is 21°C and sunny, and the local time is 16:05."}])
add("agentic", "calculator", tools=TOOLS, messages=[
    {"role": "user", "content": "Please calculate 3817 * 46 with the tool."},
    {"role": "assistant", "reasoning_content": "The user wants 3817 * 46. I will use the calculate tool.", "content": "",
     "tool_calls": [call("calculate", {"expression": "3817 * 46"})]},
    {"role": "tool", "content": json.dumps({"result": 175582})},
    {"role": "assistant", "reasoning_content": "The result is 175582.", "content": "3817 * 46 = 175582."}])
add("agentic", "fahrenheit", tools=TOOLS, messages=[
    {"role": "user", "content": "Is it cold in Oslo right now? Answer in fahrenheit."},
    {"role": "assistant", "reasoning_content": "I should call get_weather for Oslo with unit fahrenheit.", "content": "",
     "tool_calls": [call("get_weather", {"city": "Oslo", "unit": "fahrenheit"})]},
    {"role": "tool", "content": json.dumps({"city": "Oslo", "temperature": 28, "unit": "°F", "condition": "light snow"})},
    {"role": "assistant", "reasoning_content": "28°F with light snow is below freezing.", "content": "Yes: it is 28°F with light snow in Oslo, below freezing."}])
add("agentic", "fix-a-test", tools=DEV_TOOLS, messages=[
    {"role": "system", "content": "You are a coding agent working in a Java repository. Use the tools; keep changes minimal."},
    {"role": "user", "content": "The test RangeTest fails. Find out why and fix it."},
    {"role": "assistant", "reasoning_content": "Start by running the failing test to see the assertion.", "content": "",
     "tool_calls": [call("run_tests", {"target": "RangeTest"})]},
    {"role": "tool", "content": "RangeTest.containsTheUpperBound FAILED\n  expected: <true> but was: <false>\n  at RangeTest.java:14"},
    {"role": "assistant", "reasoning_content": "The test expects the upper bound to be included. Read Range.java.", "content": "",
     "tool_calls": [call("read_file", {"path": "src/main/java/Range.java"})]},
    {"role": "tool", "content": "public record Range(int low, int high) {\n    public boolean contains(int x) {\n        return x >= low && x < high;\n    }\n}"},
    {"role": "assistant", "reasoning_content": "contains uses x < high, so the upper bound is excluded while the test and the class's name say "
        "the range is closed. Change < to <=.", "content": "",
     "tool_calls": [call("edit_file", {"path": "src/main/java/Range.java", "old": "x >= low && x < high", "new": "x >= low && x <= high"})]},
    {"role": "tool", "content": "edited src/main/java/Range.java (1 replacement)"},
    {"role": "assistant", "reasoning_content": "Run the test again to confirm.", "content": "",
     "tool_calls": [call("run_tests", {"target": "RangeTest"})]},
    {"role": "tool", "content": "RangeTest: 3 tests, 0 failures"},
    {"role": "assistant", "reasoning_content": "It passes now.", "content": "Range.contains excluded its upper bound (x < high) while RangeTest "
        "expects a closed range. I changed the comparison to x <= high; RangeTest now passes (3 tests, 0 failures)."}])
add("agentic", "time-unknown-city", tools=TOOLS, messages=[
    {"role": "user", "content": "Tell me the current time in Seoul."},
    {"role": "assistant", "reasoning_content": "The user wants the local time in Seoul. I will call get_time.", "content": "",
     "tool_calls": [call("get_time", {"city": "Seoul"})]},
    {"role": "tool", "content": json.dumps({"error": "unknown city"})},
    {"role": "assistant", "reasoning_content": "The tool did not know the city. Say so rather than guess.",
     "content": "I could not get the time for Seoul: the time service does not know that city. Seoul is on UTC+9 if that helps."}])

add("code", "python-lru", text='''from collections import OrderedDict


class LruCache:
    """A least-recently-used cache of at most `capacity` entries."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self.entries: OrderedDict[str, bytes] = OrderedDict()

    def get(self, key: str) -> bytes | None:
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: str, value: bytes) -> None:
        self.entries[key] = value
        self.entries.move_to_end(key)
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)


def test_eviction_order():
    cache = LruCache(2)
    cache.put("a", b"1")
    cache.put("b", b"2")
    assert cache.get("a") == b"1"
    cache.put("c", b"3")
    assert cache.get("b") is None
    assert list(cache.entries) == ["a", "c"]
''')
add("code", "java-tokenbucket", text='''package example.ratelimit;

/** A token bucket: up to {@code capacity} tokens, refilled at {@code perSecond}; not thread-safe. */
public final class TokenBucket {
    private final double capacity;
    private final double perSecond;
    private double tokens;
    private long lastNanos;

    public TokenBucket(double capacity, double perSecond, long nowNanos) {
        if (capacity <= 0 || perSecond <= 0) {
            throw new IllegalArgumentException("capacity and rate must be positive");
        }
        this.capacity = capacity;
        this.perSecond = perSecond;
        this.tokens = capacity;
        this.lastNanos = nowNanos;
    }

    /** Takes one token if there is one; returns whether it did. */
    public boolean tryTake(long nowNanos) {
        double elapsed = (nowNanos - lastNanos) / 1e9;
        tokens = Math.min(capacity, tokens + elapsed * perSecond);
        lastNanos = nowNanos;
        if (tokens >= 1) {
            tokens -= 1;
            return true;
        }
        return false;
    }
}
''')
add("code", "sql-report", text='''-- Monthly revenue per region, with the share of the region's yearly total.
WITH monthly AS (
    SELECT r.name AS region,
           date_trunc('month', o.placed_at) AS month,
           sum(o.amount_cents) / 100.0 AS revenue
    FROM orders o
    JOIN customers c ON c.id = o.customer_id
    JOIN regions r ON r.id = c.region_id
    WHERE o.status = 'paid'
      AND o.placed_at >= DATE '2026-01-01'
    GROUP BY r.name, date_trunc('month', o.placed_at)
)
SELECT region,
       month,
       revenue,
       round(100.0 * revenue / sum(revenue) OVER (PARTITION BY region), 1) AS pct_of_year
FROM monthly
ORDER BY region, month;
''')
add("code", "cuda-and-shell", text='''#!/usr/bin/env bash
set -euo pipefail
# build the kernels for Hopper and run the contract tests
nvcc -O3 -arch=sm_90a -o saxpy saxpy.cu
./saxpy 1048576

// saxpy.cu
#include <cstdio>
__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    float *x, *y;
    cudaMallocManaged(&x, n * sizeof(float));
    cudaMallocManaged(&y, n * sizeof(float));
    for (int i = 0; i < n; i++) { x[i] = 1.0f; y[i] = 2.0f; }
    saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, x, y);
    cudaDeviceSynchronize();
    printf("y[0] = %f\\n", y[0]);
    cudaFree(x);
    cudaFree(y);
    return 0;
}
''')

add("chinese", "prose-tea", text="清晨的山谷里雾气还没有散开，茶农们已经背着竹篓走进了茶园。他们说，一年中最好的茶叶要在清明前采摘，"
    "那时的嫩芽最鲜，味道也最清甜。采茶看起来简单，其实很讲究：指尖要轻，只摘一芽一叶，不能用指甲掐，否则断口会发黑。"
    "到了中午，竹篓渐渐装满，大家坐在田埂上休息，喝着去年的老茶，聊起今年的天气和收成。")
add("chinese", "prose-city", text="这座城市的地铁每天运送几百万人。早高峰的时候，车厢里挤满了上班的人，有人戴着耳机听新闻，"
    "有人低头回复工作消息，也有人闭着眼睛抓紧时间休息。下班之后，街道两旁的小吃摊陆续亮起灯，空气中飘着烤红薯和煎饼的香味。"
    "对很多刚来的年轻人来说，这里的生活节奏很快，但也充满机会。")
add("chinese", "chat-zh", messages=turn(
    "请用简单的话解释一下什么是缓存。",
    "用户想要一个通俗的解释。可以用生活中的例子：把常用的东西放在手边，就不用每次都去远处拿。",
    "缓存就是把经常要用的数据先放在一个更近、更快的地方。比如你每天都要用的钥匙放在门口，而不是锁在柜子里，"
    "出门时就能马上拿到。计算机也是这样：从内存或硬盘读取数据比较慢，所以会把最近用过的数据暂时存起来，下次需要时直接取用，速度会快很多。"))
add("chinese", "chat-zh-math", messages=turn(
    "一个长方形的长是12厘米，宽是5厘米，它的面积和周长分别是多少？",
    "面积等于长乘宽：12 × 5 = 60 平方厘米。周长等于两倍的长加宽：2 × (12 + 5) = 34 厘米。",
    "这个长方形的面积是 60 平方厘米，周长是 34 厘米。"))

out = pathlib.Path(__file__).resolve().parent.parent / "src/main/resources/kl/corpus.jsonl"
with open(out, "w", encoding="utf-8") as f:
    for e in entries:
        f.write(json.dumps(e, ensure_ascii=False) + "\n")
print(f"{len(entries)} entries -> {out}")
