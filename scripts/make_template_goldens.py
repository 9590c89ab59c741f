#!/usr/bin/env python3
"""Spindle's own chat-template goldens: one small template per Jinja construct, rendered
by Python's Jinja2 the way HF's apply_chat_template sets it up (hf_jinja.py).

Each line: name, template, messages, tools, kwargs, and `expected` or `error` (the
message for raise_exception; "*" for any other error, whose wording is Python's).
Usage: python3 make_template_goldens.py OUT_JSONL
"""
import json
import sys

import hf_jinja

M = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi   there\n"},
     {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!", "tool_calls": [
         {"type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": "é", "z": [1.5, None, True]}}}]},
     {"role": "tool", "content": "{\"ok\": true}"}, {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image"}]}]

CASES = [
    ("text_only", "plain text\n"),
    ("var_and_trim", "{{ messages[0].content }}\n{% if true %}\nA\n{% endif %}\nB"),
    ("lstrip_blocks", "x\n    {% if true %}\n    y\n    {% endif %}\nz"),
    ("lstrip_after_var_same_line", "{{ 'a' }}  {% if true %}b{% endif %}"),
    ("minus_both_sides", "a   {%- if true -%}   b   {%- endif -%}   c"),
    ("plus_disables_lstrip", "x\n    {%+ if true %}y{% endif %}"),
    ("var_minus", "a  {{- 'b' -}}  c\n"),
    ("comment", "a {# note #}\nb {#- trimmed -#}  c"),
    ("raw_block", "{% raw %}{{ not evaluated }}{% endraw %}"),
    ("for_loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}{{ ',' if not loop.last }}{% endfor %}"),
    ("for_prev_next", "{% for m in messages %}{% if loop.previtem %}{{ loop.previtem.role }}>{% endif %}{{ m.role }}{% if loop.nextitem is defined %}>{{ loop.nextitem.role }}{% endif %};{% endfor %}"),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}"),
    ("for_filter", "{% for m in messages if m.role == 'user' %}{{ loop.index0 }}{{ m.role }}{% endfor %}"),
    ("for_unpack_items", "{% for k, v in messages[2].tool_calls[0].function.arguments | items %}{{ k }}={{ v }};{% endfor %}"),
    ("for_dict", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
    ("loop_scope", "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %}{{ x }}"),
    ("namespace", "{% set ns = namespace(n=0, last='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.n }} {{ ns.last }}"),
    ("reverse_slice", "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{{ 'abcdef'[1:4] }}|{{ 'abcdef'[-2:] }}|{{ [1,2,3,4][::2] }}|{{ 'héllo'[::-1] }}"),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}"),
    ("macro_string_test", "{% macro t(c) %}{{ c }}{% endmacro %}{{ t('x') is string }}"),
    ("set_block", "{% set block %}inside {{ 1 + 1 }}{% endset %}[{{ block }}]"),
    ("filter_block", "{% filter upper %}shout {{ 'it' }}{% endfilter %}"),
    ("str_of_values", "{{ none }} {{ true }} {{ false }} {{ 1 }} {{ 1.0 }} {{ 0.1 }} {{ 1e-5 }} {{ 1e20 }} {{ [1, 'a', none, true] }} {{ {'k': 'v', 'n': 1.5} }} {{ undefined_thing }}|"),
    ("repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'tab\\t', 'nl\\n'] }}"),
    ("tojson_basic", "{{ messages[2].tool_calls | tojson }}"),
    ("tojson_unicode_escapes", "{{ {'s': 'é\"\\\\\\n\\t\\u0001', 'f': 2.50, 'i': -3, 'b': false, 'n': none} | tojson }}"),
    ("tojson_indent", "{{ {'a': [1, {'b': 2}], 'c': {}} | tojson(indent=2) }}"),
    ("tojson_sort_keys", "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"),
    ("string_methods", "{{ '  x y  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nab\\n'.lstrip('\\n') }}|{{ 'ab\\n\\n'.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'aXbX'.replace('X', '-') }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ '{} and {}'.format(1, 'x') }}"),
    ("think_split", "{% set c = messages[2].content %}{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[-1].lstrip('\\n') }}"),
    ("dict_methods", "{{ messages[0].get('role') }} {{ messages[0].get('nope', 'dflt') }} {{ messages[0].get('nope') }} {{ messages[0].keys() | list }} {% for k, v in messages[0].items() %}{{ k }}{% endfor %}"),
    ("tests", "{{ messages is iterable }} {{ messages is mapping }} {{ messages[0] is mapping }} {{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.5 is float }} {{ none is none }} {{ x is defined }} {{ x is undefined }} {{ false is false }} {{ true is true }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is in 'cat' }} {{ 1 is not string }}"),
    ("operators", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'ab' ~ 1 ~ none }} {{ 'x' * 3 }} {{ [1] + [2] }} {{ 1 + 2.5 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 2 in [1, 2] }} {{ 'z' not in 'abc' }} {{ not 0 }} {{ 0 or 'dflt' }} {{ 1 and 'both' }} {{ -(3) }}"),
    ("conditional_expr", "{{ 'yes' if messages else 'no' }} {{ 'a' if false }}|{{ (1 if false else 2) + 1 }}"),
    ("filters_text", "{{ '  t  ' | trim }}|{{ 'xay' | trim('xy') }}|{{ 'abc' | replace('b', 'B') }}|{{ 1.5 | string }}|{{ none | string }}|{{ 'abc' | upper }}|{{ 'A B' | lower }}|{{ 'a b' | title }}|{{ 'aB' | capitalize }}|{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'one two  three' | wordcount }}"),
    ("filters_seq", "{{ messages | length }} {{ 'héllo' | length }} {{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 2, 1] | unique | list }} {{ [1, 2] | first }} {{ [1, 2] | last }} {{ ['a', 'b'] | join('-') }} {{ [1, 2, 3] | sum }} {{ [4, 2, 9] | max }} {{ [4, 2, 9] | min }} {{ [1, 2] | reverse | list }} {{ 'abc' | list }}"),
    ("filters_select_map", "{{ messages | map(attribute='role') | join(',') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }} {{ [0, 1, 2, 3] | select('odd') | list }} {{ [0, 1, '', 'x'] | select | list }} {{ ['a', 'b'] | map('upper') | list }}"),
    ("filters_default_num", "{{ nope | default('d') }} {{ '' | default('d', true) }} {{ '' | d('x') }} {{ '42' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ {'b': 1, 'a': 2} | dictsort }}"),
    ("items_filter_and_undefined", "{% for k, v in nothing | items %}{{ k }}{% endfor %}[{{ nothing }}]"),
    ("visible_text_list", "{% for part in messages[4].content %}{% if part is mapping and part.type == 'text' %}{{ part.text }}{% elif part.type in ['image', 'video'] %}<{{ part.type | replace('_url', '') }}>{% endif %}{% endfor %}"),
    ("whitespace_mix", "{%- for m in messages %}\n  {{- m.role }}\n  {%- if not loop.last %}, {% endif %}\n{%- endfor %}\n"),
    ("nested_quotes_newlines", "{{- '<tool_call>\n<function=' + 'f' + '>\n' }}{{ \"a\\\"b\" }}"),
    ("generation_prompt_var", "{% if add_generation_prompt %}GEN{% endif %}{{ bos_token }}{{ eos_token }}"),
    ("raise_in_macro", "{% macro fail() %}{{ raise_exception('custom failure: ' ~ messages | length) }}{% endmacro %}{{ fail() }}"),
    ("undefined_attr_error", "{{ missing.attr }}"),
    ("list_append_unsafe", "{% set l = [] %}{{ l.append(1) }}"),
    ("strftime_type", "{{ strftime_now('%Y') | length }}"),
    ("range_and_dict", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ dict(a=1, b='x') }}"),
    ("tools_var", "{% if tools %}{% for t in tools %}{{ t.function.name }}:{{ t | tojson }}\n{% endfor %}{% else %}no tools{% endif %}"),
]


def main():
    out = open(sys.argv[1], "w")
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather; °C",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    for name, template in CASES:
        case = {"name": name, "template": template, "messages": M, "tools": tools if name == "tools_var" else None,
                "kwargs": {"add_generation_prompt": True}}
        try:
            case["expected"] = hf_jinja.render(template, M, tools=case["tools"], add_generation_prompt=True)
        except hf_jinja.TemplateError as e:
            case["error"] = str(e)
        except Exception as e:  # noqa: BLE001 - any other failure: Spindle must fail too
            case["error"] = "*"
            case["python_error"] = f"{type(e).__name__}: {e}"
        out.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"{len(CASES)} cases")


if __name__ == "__main__":
    main()
