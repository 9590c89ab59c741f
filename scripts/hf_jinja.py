"""Renders chat templates the way HF transformers' apply_chat_template does.

Sandboxed Jinja2 environment with trim_blocks, lstrip_blocks and the loop-controls
extension; tojson = json.dumps(ensure_ascii=False) keeping key order; globals
raise_exception and strftime_now. Used to make goldens and training data.
"""
import json
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateError(Exception):
    pass


def _raise(message):
    raise TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


_compiled = {}


def render(template_text, messages, tools=None, **kwargs):
    t = _compiled.get(template_text)
    if t is None:
        t = _compiled[template_text] = environment().from_string(template_text)
    return t.render(messages=messages, tools=tools, bos_token="<|im_start|>", eos_token="<|im_end|>", **kwargs)
