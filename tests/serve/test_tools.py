"""End-to-end tests of tool calling in `tvmrt serve` on the MLC-LLM fixture, with OpenAI's
Python client. Started by tests/serve/run.sh:

    python tests/serve/test_tools.py TVMRT_BINARY

The fixture has random weights, so its free text is noise: the checks are about what must hold
for any weights. Its context window is 512 tokens (about as many characters), so the tools are
small, and two servers run: the fixture as it is (ChatML: the tools in the system message's
block) for a call forced by name, `none`, `auto` and bad input; and a copy whose template has
MLC's `{function_string}` placeholder (where only the functions' JSON goes) for `required`
over two tools and the following turn. A call forced by name or `required` is constrained by the grammar of the
tools' schemas, so it always parses and its arguments validate (jsonschema) against the
function's parameters; streamed, its deltas re-assembled are the non-streamed call (greedy);
`none` leaves the tools out of the prompt, `auto` puts them in; a following turn with the
assistant's calls and a tool message is accepted; bad tool fields are 400s in OpenAI's error
shape, and the server goes on serving.
"""

import json
import os
import sys
import tempfile

import jsonschema
import openai

from server import KEY, MODEL, Server
from test_serve import model_with_config, run_checks

# Small tools: the fixture's context window is 512 tokens, and the prompt holds the tools.
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                     "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}},
    "required": ["zone"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"}]
# A call is about 40 to 60 tokens of the fixture's vocabulary.
KW = dict(model="model", messages=MESSAGES, tools=TOOLS, max_tokens=100, temperature=0)
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def valid_calls(message, names=tuple(SCHEMAS)):
    """The message's calls as (name, arguments) after checking their shape and arguments."""
    assert message.content is None, message
    calls = []
    for c in message.tool_calls:
        assert c.type == "function" and c.id.startswith("call_") and len(c.id) > 10, c
        assert c.function.name in names, c
        arguments = json.loads(c.function.arguments)
        jsonschema.validate(arguments, SCHEMAS[c.function.name])
        calls.append((c.function.name, c.function.arguments))
    return calls


def streamed(client, **kw):
    """A streamed chat re-assembled: its calls by index, content, finish reason, and how many
    argument fragments came."""
    calls, content, finish, fragments = {}, None, None, 0
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            d = ch.delta
            if d.content:
                content = (content or "") + d.content
            for tc in d.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    assert call["id"] is None and tc.id.startswith("call_"), tc
                    assert tc.type == "function" and tc.function.name, tc
                    call["id"], call["name"] = tc.id, tc.function.name
                if tc.function and tc.function.arguments:
                    call["arguments"] += tc.function.arguments
                    fragments += 1
            finish = ch.finish_reason or finish
    assert list(calls) == list(range(len(calls))), calls
    assert all(c["id"] for c in calls.values()), calls
    return [(c["name"], c["arguments"]) for c in calls.values()], content, finish, fragments


def check_forced(client):
    """A call forced by name: one call of that function, `stop`, streamed the same."""
    r = client.chat.completions.create(tool_choice=NAMED, **KW)
    c = r.choices[0]
    assert c.finish_reason == "stop", c
    calls = valid_calls(c.message, names=("get_weather",))
    assert len(calls) == 1, calls
    got, content, finish, fragments = streamed(client, tool_choice=NAMED, **KW)
    assert (got, content, finish) == (calls, None, "stop"), (got, calls)
    assert fragments > 3, fragments
    # Sampled (seeded, n = 2): each choice still one valid call.
    r = client.chat.completions.create(tool_choice=NAMED, n=2, seed=7,
                                       **{**KW, "temperature": 1.0})
    for c in r.choices:
        assert c.finish_reason == "stop" and len(valid_calls(c.message, ("get_weather",))) == 1


def check_required(client):
    """`required`: calls of any offered function, `tool_calls`; one call without parallel."""
    for seed in [1, 2, 3]:
        kw = {**KW, "temperature": 0.8, "seed": seed}
        r = client.chat.completions.create(tool_choice="required", parallel_tool_calls=False,
                                           **kw)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c
        calls = valid_calls(c.message)
        assert len(calls) == 1, calls
        got, content, finish, _ = streamed(client, tool_choice="required",
                                           parallel_tool_calls=False, **kw)
        assert (got, content, finish) == (calls, None, "tool_calls"), (got, calls)
    # Parallel calls allowed: every complete call is valid (the last may be cut by max_tokens).
    r = client.chat.completions.create(tool_choice="required", **KW)
    c = r.choices[0]
    assert c.finish_reason in ("tool_calls", "length"), c
    if c.finish_reason == "length":
        # Cut by max_tokens: a call cut in its head stays text, one cut in its arguments is
        # the last call; every call before is whole.
        assert c.message.content is None or c.message.content.startswith("<tool_call>"), c
        if c.message.content is None:
            c.message.tool_calls = c.message.tool_calls[:-1]
        c.message.content = None
    assert len(valid_calls(c.message)) >= 1, c


def rendered(s, **body):
    """The prompt text of a chat through vLLM's /tokenize (as the chat endpoint renders it)."""
    status, _, text = s.request("POST", "/tokenize", {"messages": MESSAGES,
                                                      "return_token_strs": True, **body})
    assert status == 200, text
    return "".join(json.loads(text)["token_strs"])


def compact(v):
    return json.dumps(v, separators=(",", ":"))


def check_chatml_prompt(s):
    """ChatML (no placeholder): the tools in the system message's block."""
    prompt = rendered(s, tools=[WEATHER])
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n"), prompt
    assert f"<tools>\n{compact(WEATHER)}\n</tools>\n" in prompt, prompt
    assert "<tool_call>\n{\"name\": <function-name>" in prompt, prompt
    assert rendered(s, tools=[WEATHER], tool_choice="none") == rendered(s)


def check_placeholder_prompt(s):
    """MLC's placeholder: its function string, the list of functions or the named one."""
    prompt = rendered(s, tools=TOOLS)
    functions = [t["function"] for t in TOOLS]
    assert prompt.startswith(f"<|im_start|>system\nBe brief.{compact(functions)}<|im_end|>"), prompt
    prompt = rendered(s, tools=TOOLS, tool_choice=NAMED)
    assert f"Be brief.{compact(WEATHER['function'])}<|im_end|>" in prompt, prompt


def check_none_and_auto(client):
    """`none`: no calls, the prompt without the tools; `auto`: the tools in the prompt, the
    answer text or valid calls."""
    plain = client.chat.completions.create(model="model", messages=MESSAGES, max_tokens=8,
                                           temperature=0)
    kw = {**KW, "tools": [WEATHER]}
    r = client.chat.completions.create(tool_choice="none", **{**kw, "max_tokens": 8})
    c = r.choices[0]
    assert c.message.tool_calls is None and c.message.content == plain.choices[0].message.content
    assert r.usage.prompt_tokens == plain.usage.prompt_tokens
    assert c.finish_reason in ("stop", "length")
    r = client.chat.completions.create(**{**kw, "max_tokens": 24})
    assert r.usage.prompt_tokens > plain.usage.prompt_tokens + 200, r.usage
    c = r.choices[0]
    if c.message.tool_calls:
        assert c.finish_reason == "tool_calls"
        valid_calls(c.message)
    else:
        assert isinstance(c.message.content, str) and c.finish_reason in ("stop", "length")
    got, content, finish, _ = streamed(client, **{**kw, "max_tokens": 24})
    assert finish == c.finish_reason and content == c.message.content, (content, c.message)


def check_follow_up(client):
    """The assistant's calls and the tool's result in the next turn (the message object as
    OpenAI's client returned it, as its users send it back)."""
    r = client.chat.completions.create(tool_choice=NAMED, **KW)
    message = r.choices[0].message
    call = message.tool_calls[0]
    history = MESSAGES + [message, {"role": "tool", "tool_call_id": call.id,
                                    "content": json.dumps({"temp": 3})}]
    named = {"type": "function", "function": {"name": "get_time"}}
    before = client.chat.completions.create(tool_choice=named, **{**KW, "max_tokens": 100})
    after = client.chat.completions.create(tool_choice=named,
                                           **{**KW, "messages": history, "max_tokens": 100})
    # The call and the result are in the prompt, and the forced call still holds.
    grown = after.usage.prompt_tokens - before.usage.prompt_tokens
    assert grown > len(call.function.arguments) + 40, grown
    for r in [before, after]:
        assert r.choices[0].finish_reason == "stop"
        assert len(valid_calls(r.choices[0].message, ("get_time",))) == 1


def check_bad_input(s, client):
    """Bad tool fields: 400 in OpenAI's error shape naming the field; the server unharmed."""
    bad_schema = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "bogus"}}}}}
    cases = [
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_news"}}},
         "tool_choice", "get_news"),
        ({"tool_choice": "required"}, "tool_choice", "tools"),
        ({"tool_choice": NAMED}, "tool_choice", "tools"),
        ({"tools": [bad_schema]}, "tools", "not a valid JSON schema"),
        ({"tools": [bad_schema], "tool_choice": "required"}, "tools", "not a valid JSON schema"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "string"}}}]}, "tools", "object"),
        ({"tools": [{"type": "function"}]}, "tools", "function"),
        ({"tools": [{"type": "code_interpreter"}]}, "tools", "code_interpreter"),
        ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools", "name"),
        ({"tools": "get_weather"}, "tools", "list"),
        ({"tools": [WEATHER, WEATHER]}, "tools", "twice"),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "sometimes"),
        ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "boolean"),
        ({"tools": TOOLS, "tool_choice": "required",
          "response_format": {"type": "json_object"}}, "tool_choice", "response_format"),
        ({"messages": [{"role": "user", "content": "a", "tool_calls": []}]}, "messages",
         "tool_calls"),
        ({"messages": [{"role": "user", "content": "a", "tool_call_id": "x"}]}, "messages",
         "tool_call_id"),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None,
                                                          "tool_calls": [{"id": "c"}]}]},
         "messages", "tool_calls"),
    ]
    for extra, param, words in cases:
        body = {"model": "model", "messages": MESSAGES, "max_tokens": 4, **extra}
        status, _, text = s.request("POST", "/v1/chat/completions", body)
        err = json.loads(text)["error"]
        assert status == 400, (extra, status, text)
        assert err["type"] == "invalid_request_error" and err["param"] == param, (extra, err)
        assert words in err["message"], (extra, err)
    # Parameters whose check recurses deep (a chain of `$ref`s: 600 aborted the server on an
    # async worker's stack) are checked on a deep stack; past --max-grammar-bytes, refused.
    def deep(n):
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
        defs[f"d{n}"] = {"type": "integer"}
        return [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}}}]
    for n, status_wanted in ((3000, 200), (6000, 400)):
        status, _, text = s.request("POST", "/v1/chat/completions", {
            "model": "model", "messages": MESSAGES, "max_tokens": 4, "tools": deep(n),
            "tool_choice": "none"})
        assert status == status_wanted, (n, status, text[:300])
    err = json.loads(text)["error"]
    assert err["param"] == "tools" and "--max-grammar-bytes" in err["message"], err
    # Through OpenAI's client: its BadRequestError with the message.
    try:
        client.chat.completions.create(tool_choice={"type": "function",
                                                    "function": {"name": "get_news"}}, **KW)
        raise AssertionError("an unknown function was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and "get_news" in e.message, e
    assert s.request("GET", "/health", key=None)[0] == 200
    r = client.chat.completions.create(tool_choice=NAMED, **KW)
    valid_calls(r.choices[0].message, ("get_weather",))


def placeholder_model(tmp):
    """The fixture with MLC's function-string placeholder in its system template."""
    with open(os.path.join(MODEL, "mlc-chat-config.json"), encoding="utf-8") as f:
        template = json.load(f)["conv_template"]
    template["system_template"] = "<|im_start|>system\n{system_message}{function_string}<|im_end|>\n"
    return model_with_config(os.path.join(tmp, "model"), conv_template=template)


def main():
    binary = sys.argv[1]
    run_checks(Server(binary, "--api-key", KEY), [
        ("ChatML: the tools in the system message", lambda s, c: check_chatml_prompt(s)),
        ("ChatML: a call forced by name, streamed and not", lambda s, c: check_forced(c)),
        ("ChatML: tool_choice none and auto", lambda s, c: check_none_and_auto(c)),
        ("bad tool fields are 400s", check_bad_input),
    ])
    with tempfile.TemporaryDirectory() as tmp:
        run_checks(Server(binary, "--api-key", KEY, model=placeholder_model(tmp)), [
            ("MLC's placeholder: its function string", lambda s, c: check_placeholder_prompt(s)),
            ("MLC's placeholder: tool_choice required", lambda s, c: check_required(c)),
            ("MLC's placeholder: a following turn with the calls and a tool message",
             lambda s, c: check_follow_up(c)),
        ])
    print("all 7 tool checks passed")


if __name__ == "__main__":
    main()
