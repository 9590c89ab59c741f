"""Agent-shaped chats for the bundled agent model (scripts/train_agent_model.py): chatdata.py's
conversations wrapped the way agent CLIs wrap a user's question, so that a small model answers the
question and calls the right tool whatever surrounds it.

An envelope adds, each part at random: a system prompt made of a client header line, an agent
identity sentence, the user's own short system prompt and up to a few thousand tokens of generated
instructions; reminder and environment blocks before the user's question; tools renamed under a
namespace (mcp__weather__get_weather, tools__get_time, ...) among distractor tools of other names
and schemas, in any order. Every text is generated here from word lists; none is taken from a real
client.

Usage: python3 agentdata.py N SEED [TEMPLATE]  -> N conversations as JSON lines (rendered with TEMPLATE)
"""
import copy
import json
import random
import sys

import chatdata

NAMESPACES = ["mcp__weather__", "mcp__tools__", "mcp__local__", "tools__", "svc__", ""]
IDENTITIES = ["You are an agent built on a software development kit.", "You are a coding agent working in a terminal.",
              "You are an assistant running inside a command-line tool.", "You are an autonomous agent with access to tools.",
              "You are a helpful agent for developers."]
OWN_PROMPTS = ["You are a helpful assistant.", "Be concise.", "Answer the user's question.", "You help with everyday questions.",
               "Keep answers short and accurate.", ""]
VERBS = ["use", "check", "prefer", "avoid", "read", "write", "keep", "run", "explain", "ask", "report", "follow", "review",
         "update", "list", "verify", "summarise", "format", "quote", "cite"]
NOUNS = ["files", "commands", "tests", "the workspace", "the user's request", "tools", "permissions", "the sandbox", "changes",
         "errors", "the plan", "output", "links", "dates", "paths", "names", "results", "notes", "code", "the branch"]
QUALIFIERS = ["carefully", "when needed", "before acting", "after each step", "only if asked", "in order", "without guessing",
              "in plain words", "every time", "with care"]
HEADERS = ["x-client-header: version={v}; entry={e};", "client: {e} {v}", "session-info: build={v}; mode={e};"]
TAGS = ["system-reminder", "environment_context", "context", "reminder", "user_instructions"]
DISTRACTOR_NAMES = ["exec_command", "write_stdin", "read_file", "ReadFile", "Edit", "Write", "TaskCreate", "TaskList", "WebFetch",
                    "search_files", "list_dir", "view_image", "request_user_input", "update_plan", "Grep", "Glob", "NotebookEdit",
                    "spawn_agent", "send_input", "close_agent", "get_goal", "Skill", "ScheduleWakeup", "apply_patch"]
FIELD_NAMES = ["path", "command", "query", "content", "pattern", "cmd", "id", "text", "limit", "offset", "url", "prompt", "title"]


def sentence(r):
    words = [r.choice(VERBS).capitalize(), r.choice(NOUNS), r.choice(QUALIFIERS)]
    if r.random() < 0.4:
        words += ["and", r.choice(VERBS), r.choice(NOUNS)]
    return " ".join(words) + "."


def instructions(r, n):
    """n generated instruction sentences, in paragraphs and bullet lists under headings."""
    out = []
    while n > 0:
        k = min(n, r.randint(2, 8))
        if r.random() < 0.5:
            out.append("## " + r.choice(NOUNS).capitalize() + "\n" + "\n".join("- " + sentence(r) for _ in range(k)))
        else:
            out.append(" ".join(sentence(r) for _ in range(k)))
        n -= k
    return "\n\n".join(out)


def filler_sentences(r):
    """How many generated sentences surround a conversation: mostly none or few, some up to thousands of tokens."""
    p = r.random()
    if p < 0.4:
        return 0
    if p < 0.75:
        return r.randint(1, 30)
    return r.randint(30, 200)


def system_prompt(r, own):
    parts = []
    if r.random() < 0.5:
        parts.append(r.choice(HEADERS).format(v=f"{r.randint(1, 3)}.{r.randint(0, 9)}.{r.randint(0, 300)}", e=r.choice(["cli", "sdk-cli", "exec", "tui"])))
    if r.random() < 0.7:
        parts.append(r.choice(IDENTITIES))
    if own:
        parts.append(own)
    n = filler_sentences(r)
    if n:
        parts.append(instructions(r, n))
    return "\n\n".join(parts)


def block(r, tag):
    lines = [sentence(r) for _ in range(r.randint(1, 6))]
    if r.random() < 0.5:
        lines.insert(0, f"Today's date is {r.randint(2024, 2027)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}.")
    return f"<{tag}>\n" + "\n".join(lines) + f"\n</{tag}>"


def distractor(r, name):
    props = {}
    for f in r.sample(FIELD_NAMES, r.randint(1, 4)):
        props[f] = {"type": r.choice(["string", "integer", "boolean"]), "description": sentence(r)}
    schema = {"type": "object", "properties": props, "required": [next(iter(props))]}
    if r.random() < 0.5:
        schema["additionalProperties"] = False
    if r.random() < 0.3:
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return {"type": "function", "function": {"name": name, "description": instructions(r, r.randint(1, 3)), "parameters": schema}}


def envelope(conv, r):
    """The conversation as an agent CLI would send it."""
    conv = copy.deepcopy(conv)
    msgs = conv["messages"]
    own = ""
    if msgs and msgs[0]["role"] == "system":
        own = msgs.pop(0)["content"]
    elif r.random() < 0.8:
        own = r.choice(OWN_PROMPTS)
    system = system_prompt(r, own)
    user = msgs[0]
    pre = [block(r, r.choice(TAGS)) for _ in range(r.choice([0, 1, 1, 2]))]
    if pre:
        user["content"] = "\n\n".join(pre) + "\n\n" + user["content"]
    if conv["tools"] is not None or r.random() < 0.5:
        ns = r.choice(NAMESPACES)
        renamed = {}
        tools = []
        for t in (conv["tools"] or chatdata.TOOLS):
            t = copy.deepcopy(t)
            renamed[t["function"]["name"]] = ns + t["function"]["name"]
            t["function"]["name"] = ns + t["function"]["name"]
            tools.append(t)
        tools += [distractor(r, n) for n in r.sample(DISTRACTOR_NAMES, r.randint(0, 6))]
        r.shuffle(tools)
        for m in msgs:
            for c in m.get("tool_calls", []):
                c["function"]["name"] = renamed[c["function"]["name"]]
        conv["tools"] = tools
    if system:
        msgs.insert(0, {"role": "system", "content": system})
    conv["kind"] = "agent_" + conv["kind"]
    return conv


def conversation(r, agent_share=0.6):
    """chatdata's conversation, in an envelope with probability agent_share."""
    conv = chatdata.conversation(r)
    return envelope(conv, r) if r.random() < agent_share else conv


if __name__ == "__main__":
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    template = open(sys.argv[3]).read() if len(sys.argv) > 3 else None
    r = random.Random(seed)
    for _ in range(n):
        c = conversation(r)
        if template:
            c["text"] = chatdata.render_training(c, template)
        print(json.dumps(c, ensure_ascii=False))
