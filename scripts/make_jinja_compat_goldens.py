#!/usr/bin/env python3
"""Goldens for Spindle's Jinja engine against the template shapes other model families
publish (Llama 3, Qwen, Mistral, Gemma, DeepSeek, Phi, Granite, GPT-OSS, Hermes), rendered
by Python's Jinja2 set up as HF's apply_chat_template sets it up.

The templates are our own (src/test/resources/templates-compat/*.jinja): each is rendered
over every scenario below. probes.txt holds small templates, one per "##### name" header,
rendered over the tools scenario (plus a few built here). Each JSONL line: name, template, messages, tools,
documents, kwargs, bos_token/eos_token (absent when the tokenizer has none, as HF leaves
them out of the special tokens map), and `expected` or `error` (raise_exception's message;
"*" for any other error, whose wording is Python's, kept in python_error).
Usage: python3 make_jinja_compat_goldens.py [OUT_JSONL]
"""
import json
import pathlib
import sys

from jinja2 import nodes
from jinja2.ext import Extension

import hf_jinja

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "src/test/resources/templates-compat"


class GenerationBlock(Extension):
    """{% generation %}...{% endgeneration %}: HF's assistant-mask marker; renders its body as is."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body", []), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    env = hf_jinja.environment()
    env.add_extension(GenerationBlock)
    return env


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city; answers in °C & km/h <metric>",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Zürich\" or 'São Paulo'"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            "days": {"type": "integer", "description": "1 <= days <= 7"},
            "hourly": {"type": ["boolean", "null"]},
            "fields": {"type": "array", "items": {"type": "string"}},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number", "nullable": True}},
                      "required": ["lat"], "additionalProperties": {"type": "string"}},
            "mode": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer"}}}}]},
        }, "required": ["city"]}, "return": {"type": "object"}}},
    {"type": "function", "function": {
        "name": "search_docs", "description": "Search — 検索 — the <docs> & notes",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}}, "required": ["query", "limit"]}}},
]

CALL_ARGS = {"city": "Zürich", "unit": "celsius", "q": "a<b && c>d 'x' \"y\"", "nested": {"list": [1, 2.5, None, True], "empty": {}}}

SCENARIOS = {
    "chat": dict(messages=[
        {"role": "system", "content": "You are Spindle. Ünïcode <ok> & 'quotes' \"double\"."},
        {"role": "user", "content": "Hello  \n"},
        {"role": "assistant", "content": "Hi there! How can I help?"},
        {"role": "user", "content": "Tell me more, please."}], kwargs={"add_generation_prompt": True}),
    "tools": dict(messages=[
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc123456", "type": "function", "function": {"name": "get_weather", "arguments": CALL_ARGS}}]},
        {"role": "tool", "tool_call_id": "call_abc123456", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C <warm> & clear."},
        {"role": "user", "content": "And search docs?"},
        {"role": "assistant", "content": "Searching.", "tool_calls": [
            {"id": "call_def987654", "type": "function", "function": {"name": "search_docs", "arguments": "{\"query\": \"é\", \"limit\": 2}"}}]},
        {"role": "tool", "tool_call_id": "call_def987654", "content": "[]"}],
        tools=TOOLS, kwargs={"add_generation_prompt": True}),
    "reasoning": dict(messages=[
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "reasoning_content": "Two plus two.\nSimple <math>.", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "<think>\nThree and three\n</think>\n\n6"}],
        kwargs={"add_generation_prompt": False, "enable_thinking": False}),
    "parts": dict(messages=[
        {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "image"},
                                     {"type": "image_url", "image_url": {"url": "https://x.test/a.png?a=1&b=<2>"}}, {"type": "text", "text": "this."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A picture."}]}],
        kwargs={"add_generation_prompt": True, "reasoning_effort": "high"}),
    "user_only": dict(messages=[{"role": "user", "content": "Only me"}], bos_token=None,
                      kwargs={"add_generation_prompt": True, "enable_thinking": True, "thinking": True, "builtin_tools": ["code_interpreter", "brave_search"]}),
    "documents": dict(messages=[{"role": "user", "content": "Summarise"}], documents=[
        {"doc_id": 1, "title": "Ünïcode <doc>", "text": "Doc one & more."}, {"doc_id": "b", "title": "Second", "text": "Doc two."}],
        kwargs={"add_generation_prompt": True, "controls": {"citations": True, "length": "short"}}),
    "empty": dict(messages=[], kwargs={"add_generation_prompt": True}),
    "bad_order": dict(messages=[{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], kwargs={"add_generation_prompt": True}),
}

FIXED = {"date_string": "26 Jul 2024", "today": "July 26, 2024"}  # strftime_now output changes daily; probes check its shape


def probes():
    text = (TEMPLATES / "probes.txt").read_text()
    for chunk in text.split("##### ")[1:]:
        name, _, body = chunk.partition("\n")
        yield name.strip(), body[:-1] if body.endswith("\n") else body


def render(env, template, scenario):
    s = SCENARIOS[scenario]
    case = {"template": template, "messages": s["messages"], "tools": s.get("tools"), "documents": s.get("documents"),
            "kwargs": dict(FIXED, **s["kwargs"]), "eos_token": "<|eos|>"}
    bos = s.get("bos_token", "<|bos|>")
    if bos is not None:
        case["bos_token"] = bos
    special = {k: case[k] for k in ("bos_token", "eos_token") if k in case}
    try:
        t = env.from_string(template)
        case["expected"] = t.render(messages=case["messages"], tools=case["tools"], documents=case["documents"], **special, **case["kwargs"])
    except hf_jinja.TemplateError as e:
        case["error"] = str(e)
    except Exception as e:  # noqa: BLE001 - any other failure: Spindle must fail too
        case["error"] = "*"
        case["python_error"] = f"{type(e).__name__}: {e}"
    return case


def main():
    out_path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else TEMPLATES / "goldens.jsonl"
    env = environment()
    lines = []
    for path in sorted(TEMPLATES.glob("*.jinja")):
        for scenario in SCENARIOS:
            lines.append(dict(name=f"{path.stem}/{scenario}", **render(env, path.read_text(), scenario)))
    # line breaks other than \n cannot live in the probe file (read with universal newlines)
    extra = [("line_breaks_normalised", "a\r\nb\rc\n{{ 'x\\ry' }}{{ 'lit\rcr' }}\r\n{% if true %}\r\nafter-trim{% endif %}")]
    for name, template in list(probes()) + extra:
        lines.append(dict(name=f"probe/{name}", **render(env, template, "tools")))
    with open(out_path, "w") as out:
        for case in lines:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    errors = sum(1 for c in lines if "error" in c)
    print(f"{len(lines)} cases ({errors} raising) -> {out_path}")


if __name__ == "__main__":
    main()
