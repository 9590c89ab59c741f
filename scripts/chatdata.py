"""Generates Spindle's chat training data: short conversations in Nanbeige's chat format.

Kinds: arithmetic, comparisons (9.11 vs 9.8), counting letters, unit conversions,
dates (leap years, days in a month), tool use in the XML tool-call format with a tool
response and a final answer (weather, time, calculator), JSON replies when the system
prompt asks, and thinking-off turns. Every answer is computed, so held-out prompts of
the same kinds have checkable answers.

Usage: python3 chatdata.py N SEED  -> prints N rendered conversations as JSON lines
"""
import calendar
import json
import random
import sys

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current local time in a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calculate", "description": "Evaluate an arithmetic expression.",
                                      "parameters": {"type": "object", "properties": {
                                          "expression": {"type": "string"}}, "required": ["expression"]}}},
]
CITIES = ["Paris", "Tokyo", "London", "Berlin", "Madrid", "Rome", "Cairo", "Lima", "Oslo", "Seoul", "Sydney",
          "Toronto", "Mumbai", "Nairobi", "Beijing", "Shanghai", "Dubai", "Boston", "Chicago", "Denver"]
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"]
WORDS = ["strawberry", "banana", "apple", "letter", "mississippi", "balloon", "coffee", "committee", "bookkeeper",
         "pepper", "raspberry", "cherry", "parallel", "success", "address", "assessment", "giraffe", "hello",
         "tomorrow", "necessary", "programming", "engineer", "butterfly", "kitten", "puppy", "summer", "bubble"]
MONTHS = list(calendar.month_name)[1:]
SYSTEM_JSON = "Reply only with a JSON object of the form {\"answer\": ...}."


def add_steps(a, b):
    """Column addition, ones first: '7 + 8 = 15, write 5 carry 1; 3 + 4 + 1 = 8'."""
    xs, ys = str(a)[::-1], str(b)[::-1]
    steps, carry = [], 0
    for i in range(max(len(xs), len(ys))):
        x = int(xs[i]) if i < len(xs) else 0
        y = int(ys[i]) if i < len(ys) else 0
        t = x + y + carry
        steps.append(f"{x} + {y}" + (f" + {carry}" if carry else "") + f" = {t}" + (f", write {t % 10} carry 1" if t >= 10 else ""))
        carry = t // 10
    if carry:
        steps.append("write the carry 1")
    return "; ".join(steps)


def sub_steps(a, b):
    """Column subtraction (a >= b), ones first, with borrows spelled out."""
    xs, ys = str(a)[::-1], str(b)[::-1]
    steps, borrow = [], 0
    for i in range(len(xs)):
        x = int(xs[i]) - borrow
        y = int(ys[i]) if i < len(ys) else 0
        if x < y:
            steps.append(f"{x} - {y} needs a borrow: {x + 10} - {y} = {x + 10 - y}")
            borrow = 1
        else:
            steps.append(f"{x} - {y} = {x - y}")
            borrow = 0
    return "; ".join(steps)


def arithmetic(r):
    op = r.choice(["+", "-", "*"])
    a, b = (r.randint(2, 99), r.randint(2, 99)) if op != "*" else (r.randint(2, 30), r.randint(2, 12))
    v = a + b if op == "+" else a - b if op == "-" else a * b
    q = r.choice([f"What is {a} {op} {b}?", f"Compute {a} {op} {b}.", f"{a} {op} {b} = ?", f"Calculate {a} {op} {b}"])
    if op == "+":
        think = f"Add by columns: {add_steps(a, b)}. So {a} + {b} = {v}."
    elif op == "-":
        if a >= b:
            think = f"Subtract by columns: {sub_steps(a, b)}. So {a} - {b} = {v}."
        else:
            think = f"{b} is larger than {a}, so the result is negative. Subtract by columns: {sub_steps(b, a)}. So {b} - {a} = {b - a} and {a} - {b} = {v}."
    else:
        tens, ones = divmod(a, 10)
        think = (f"{a} * {b} = {tens * 10} * {b} + {ones} * {b} = {tens * 10 * b} + {ones * b} = {v}." if tens
                 else f"{a} * {b} = {v}.")
    return q, think, f"{a} {op} {b} = {v}", v


def comparison(r):
    whole = r.randint(0, 20)
    a = round(whole + r.randint(1, 99) / 100, 2)
    b = round(whole + r.randint(1, 9) / 10, 1)
    if r.random() < 0.5:
        a, b = b, a
    if a == b:
        b = round(b + 0.1, 1)
    big = max(a, b)
    q = r.choice([f"Which is bigger, {a} or {b}?", f"Which number is larger: {a} or {b}?", f"Is {a} greater than {b}?"])
    fa, fb = f"{a:.2f}", f"{b:.2f}"
    think = f"Write both with two decimals: {a} = {fa} and {b} = {fb}. Compare {fa} and {fb}: {big:.2f} is larger."
    if q.startswith("Is"):
        return q, think, ("Yes" if a > b else "No") + f", {big} is bigger.", big
    return q, think, f"{big} is bigger.", big


def letters(r):
    w = r.choice(WORDS)
    c = r.choice(sorted(set(w)))
    n = w.count(c)
    q = r.choice([f"How many {c}'s are in {w}?", f"Count the letter {c} in \"{w}\".", f"How many times does {c} appear in {w}?"])
    spelled = "-".join(w)
    pos = ", ".join(str(i + 1) for i, ch in enumerate(w) if ch == c) or "none"
    think = f"Spell it: {spelled}. The letter {c} is at positions {pos}. That is {n}."
    return q, think, f"There {'is' if n == 1 else 'are'} {n} {c}'s in {w}." if n != 1 else f"There is 1 {c} in {w}.", n


def units(r):
    kind = r.choice(["km", "kg", "h", "c", "m"])
    if kind == "km":
        x = r.randint(1, 50)
        return f"How many meters are in {x} km?", f"1 km = 1000 m, so {x} km = {x} * 1000 = {x * 1000} m.", f"{x} km is {x * 1000} meters.", x * 1000
    if kind == "kg":
        x = r.randint(1, 50)
        return f"Convert {x} kg to grams.", f"1 kg = 1000 g, so {x} kg = {x * 1000} g.", f"{x} kg = {x * 1000} g.", x * 1000
    if kind == "h":
        x = r.randint(1, 24)
        return f"How many minutes are in {x} hours?", f"1 hour = 60 minutes, so {x} * 60 = {x * 60}.", f"{x} hours is {x * 60} minutes.", x * 60
    if kind == "m":
        x = r.randint(1, 20) * 60
        return f"How many hours is {x} minutes?", f"60 minutes = 1 hour, so {x} / 60 = {x // 60}.", f"{x} minutes is {x // 60} hours.", x // 60
    x = r.choice(range(-20, 101, 5))
    f = x * 9 // 5 + 32 if x * 9 % 5 == 0 else x * 9 / 5 + 32
    return f"What is {x}°C in Fahrenheit?", f"F = C * 9 / 5 + 32 = {x} * 9 / 5 + 32 = {f}.", f"{x}°C is {f}°F.", f


def dates(r):
    if r.random() < 0.5:
        y = r.randint(1900, 2100)
        leap = calendar.isleap(y)
        why = (f"{y} is divisible by 400" if y % 400 == 0 else f"{y} is divisible by 100 but not by 400" if y % 100 == 0
               else f"{y} is divisible by 4 and not by 100" if y % 4 == 0 else f"{y} is not divisible by 4")
        return f"Is {y} a leap year?", f"{why}, so it is {'' if leap else 'not '}a leap year.", f"{'Yes' if leap else 'No'}, {y} is {'' if leap else 'not '}a leap year.", leap
    y = r.randint(1990, 2030)
    m = r.randint(1, 12)
    d = calendar.monthrange(y, m)[1]
    extra = f" {y} is {'' if calendar.isleap(y) else 'not '}a leap year, so February has {d} days." if m == 2 else ""
    return (f"How many days are in {MONTHS[m - 1]} {y}?", f"{MONTHS[m - 1]} has {d} days.{extra}",
            f"{MONTHS[m - 1]} {y} has {d} days.", d)


def tool_call_xml(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


def tool_conversation(r):
    kind = r.choice(["weather", "time", "calc"])
    if kind == "weather":
        city = r.choice(CITIES)
        unit = r.choice(["celsius", "fahrenheit", None])
        temp = r.randint(-5, 35)
        cond = r.choice(CONDITIONS)
        q = r.choice([f"What's the weather in {city}?", f"How is the weather in {city} today?", f"Is it cold in {city} right now?"])
        args = {"city": city} if unit is None else {"city": city, "unit": unit}
        shown = temp if unit != "fahrenheit" else temp * 9 // 5 + 32
        sym = "°F" if unit == "fahrenheit" else "°C"
        result = json.dumps({"city": city, "temperature": shown, "unit": sym, "condition": cond})
        think1 = f"The user asks about the weather in {city}. I should call get_weather with city {city}."
        final = f"It is {shown}{sym} and {cond} in {city}."
        think2 = f"The tool says {shown}{sym} and {cond}."
        call = ("get_weather", args)
    elif kind == "time":
        city = r.choice(CITIES)
        hh, mm = r.randint(0, 23), r.randint(0, 59)
        q = r.choice([f"What time is it in {city}?", f"Tell me the current time in {city}."])
        result = json.dumps({"city": city, "time": f"{hh:02d}:{mm:02d}"})
        think1 = f"The user wants the local time in {city}. I will call get_time."
        final = f"It is {hh:02d}:{mm:02d} in {city}."
        think2 = f"The tool returned {hh:02d}:{mm:02d}."
        call = ("get_time", {"city": city})
    else:
        a, b = r.randint(100, 9999), r.randint(100, 9999)
        op = r.choice(["+", "*"])
        v = a + b if op == "+" else a * b
        q = r.choice([f"Use the calculator: what is {a} {op} {b}?", f"Please calculate {a} {op} {b} with the tool."])
        result = json.dumps({"result": v})
        think1 = f"The user wants {a} {op} {b}. I will use the calculate tool."
        final = f"{a} {op} {b} = {v}."
        think2 = f"The result is {v}."
        call = ("calculate", {"expression": f"{a} {op} {b}"})
    msgs = [{"role": "user", "content": q},
            {"role": "assistant", "reasoning_content": think1, "content": "", "tool_calls": [tool_call_xml(*call)]},
            {"role": "tool", "content": result},
            {"role": "assistant", "reasoning_content": think2, "content": final}]
    return {"kind": "tool_" + kind, "messages": msgs, "tools": TOOLS, "kwargs": {}}


def plain_conversation(r, kind):
    q, think, answer, value = {"arithmetic": arithmetic, "comparison": comparison, "letters": letters,
                               "units": units, "dates": dates}[kind](r)
    mode = r.random()
    kwargs = {}
    msgs = []
    if mode < 0.15:
        msgs.append({"role": "system", "content": SYSTEM_JSON})
        answer = json.dumps({"answer": value})
        kind = kind + "_json"
    elif mode < 0.3:
        kwargs = {"enable_thinking": False}
        think = ""
        kind = kind + "_nothink"
    msgs += [{"role": "user", "content": q}, {"role": "assistant", "reasoning_content": think, "content": answer}]
    return {"kind": kind, "messages": msgs, "tools": None, "kwargs": kwargs, "answer": value}


KINDS = ["arithmetic", "comparison", "letters", "units", "dates", "tool"]


def conversation(r):
    kind = r.choice(KINDS)
    return tool_conversation(r) if kind == "tool" else plain_conversation(r, kind)


def render_training(conv, template):
    """The full conversation text as the template writes it (no generation prompt)."""
    from hf_jinja import render
    kw = dict(conv["kwargs"])
    msgs = conv["messages"]
    if kw.get("enable_thinking") is False:
        # the template writes past turns with their (empty) reasoning; the thinking-off
        # generation prompt pre-fills an empty think block the same way
        pass
    return render(template, msgs, tools=conv["tools"], add_generation_prompt=False, **kw)


if __name__ == "__main__":
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    template = open(sys.argv[3]).read() if len(sys.argv) > 3 else None
    r = random.Random(seed)
    for _ in range(n):
        c = conversation(r)
        if template:
            c["text"] = render_training(c, template)
        print(json.dumps(c, ensure_ascii=False))
