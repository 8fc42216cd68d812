"""End-to-end tests of `tvmrt serve`'s structured output on the MLC-LLM fixture (random weights:
free text is garbage, so these check that the constraint holds, which must hold for any weights).
Started by tests/serve/run.sh:

    python tests/serve/test_structured.py TVMRT_BINARY

Starts the server on 127.0.0.1 (a free port), checks, stops it by its process id:
- bounded strict JSON schemas (required fields of each type, enums, nested objects, arrays with
  min/max items, patterns), greedy and seeded, through `response_format` with OpenAI's client
  and vLLM's `guided_json` / `structured_outputs`: every answer ends with `stop` and validates
  (jsonschema); compact JSON (no whitespace) as OpenAI writes it;
- `json_object` answers parse; regex, choice and Lark constraints hold; top_logprobs list only
  tokens the grammar allows;
- streamed answers equal non-streamed ones;
- 8 constrained + 4 free requests at once, each equal to its solo run; n = 3;
- preemption with constrained sequences (a second server with a small KV cache): answers equal
  to the first server's;
- bad input (unknown response_format type, invalid or unsatisfiable schema, bad regex or
  grammar, two constraints, a grammar past --max-grammar-size, a schema no answer can start):
  400 in OpenAI's error shape, and the server still serves;
- grammars that fail a later step (past --max-grammar-step-fuel, past the parser's row): 400
  too, streamed as an error event, llguidance's reason without its parser state.
"""

import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai

from server import KEY, Server

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "height": {"type": "number", "minimum": 0, "maximum": 3},
        "member": {"type": "boolean"},
        "pet": {"enum": ["cat", "dog", "none"]},
        "note": {"type": "null"},
    },
    "required": ["name", "age", "height", "member", "pet", "note"],
    "additionalProperties": False,
}
NESTED = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        "owner": {
            "type": "object",
            "properties": {"first": {"type": "string", "maxLength": 6},
                           "level": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["first", "level"], "additionalProperties": False,
        },
        "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                   "minItems": 2, "maxItems": 4},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1,
                 "maxItems": 2},
    },
    "required": ["id", "owner", "scores", "tags"],
    "additionalProperties": False,
}
POINTS = {
    "type": "object",
    "properties": {
        "points": {
            "type": "array", "minItems": 1, "maxItems": 3,
            "items": {"type": "object",
                      "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                     "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                      "required": ["x", "y"], "additionalProperties": False},
        },
        "label": {"type": "string", "pattern": "^[a-z]{1,4}$"},
        "kind": {"const": "polygon"},
    },
    "required": ["points", "label", "kind"],
    "additionalProperties": False,
}
SCHEMAS = {"person": PERSON, "nested": NESTED, "points": POINTS}
MAX_TOKENS = 160
CHECKS = []


def check(f):
    CHECKS.append(f)
    return f


def chat(text):
    return [{"role": "user", "content": text}]


def response_format(name):
    return {"type": "json_schema",
            "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}}


def metric(s, name):
    text = s.request("GET", "/metrics", key=None)[2]
    return float(re.search(rf"^{re.escape(name)} (\S+)$", text, re.M).group(1))


def outside_strings(text):
    """The characters of a JSON text outside its strings."""
    out, in_string, escaped = [], False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            out.append(ch)
    return "".join(out)


def valid(text, schema):
    """Parses and validates an answer; it must be compact (no whitespace outside strings), as
    OpenAI writes JSON."""
    value = json.loads(text)
    jsonschema.validate(value, schema)
    assert not re.search(r"\s", outside_strings(text)), text
    return value


@check
def schemas_validate_greedy_and_seeded(s, client):
    for name, schema in SCHEMAS.items():
        for seed in [None, 1, 2]:
            temperature = 0 if seed is None else 0.9
            r = client.chat.completions.create(
                model="model", messages=chat(f"a {name}"), max_tokens=MAX_TOKENS, seed=seed,
                temperature=temperature, response_format=response_format(name))
            c = r.choices[0]
            assert c.finish_reason == "stop", (name, seed, c)
            valid(c.message.content, schema)
            # The same through vLLM's fields on the completions endpoint.
            r = client.completions.create(
                model="model", prompt=f"a {name}:", max_tokens=MAX_TOKENS, seed=seed,
                temperature=temperature, extra_body={"guided_json": schema})
            assert r.choices[0].finish_reason == "stop", (name, seed, r)
            valid(r.choices[0].text, schema)
    # MLC's form: the schema as a string beside `json_object`.
    r = client.chat.completions.create(
        model="model", messages=chat("x"), max_tokens=MAX_TOKENS, temperature=0,
        response_format={"type": "json_object", "schema": json.dumps(PERSON)})
    valid(r.choices[0].message.content, PERSON)


@check
def json_object_regex_choice_and_lark_hold(s, client):
    # Any JSON object: its strings are unbounded, and random weights rarely close one, so a
    # logit bias toward `"` and `}` (applied before the mask, as every sampler is) ends them.
    ids = [json.loads(s.request("POST", "/tokenize", {"prompt": t})[2])["tokens"][0]
           for t in ['"', "}"]]
    for seed in range(6):
        bias = {str(t): 6 for t in ids} if seed % 2 else None
        r = client.chat.completions.create(
            model="model", messages=chat("json"), max_tokens=MAX_TOKENS, seed=seed,
            temperature=0.9, response_format={"type": "json_object"}, logit_bias=bias)
        c = r.choices[0]
        if bias or c.finish_reason == "stop":
            assert c.finish_reason == "stop", c
            assert isinstance(json.loads(c.message.content), dict), c.message.content
        else:
            assert c.finish_reason == "length" and c.message.content.startswith('{"')
    for seed in [None, 3, 4]:
        temperature = 0 if seed is None else 1.0
        ask = dict(model="model", prompt="x", max_tokens=40, seed=seed, temperature=temperature)
        r = client.completions.create(**ask, extra_body={"guided_regex": r"[0-9]{3}-[a-c]{2}"})
        assert re.fullmatch(r"[0-9]{3}-[a-c]{2}", r.choices[0].text), r.choices[0].text
        assert r.choices[0].finish_reason == "stop"
        r = client.completions.create(
            **ask, extra_body={"structured_outputs": {"choice": ["alpha", "beta", "gamma"]}})
        assert r.choices[0].text in ("alpha", "beta", "gamma"), r.choices[0].text
        r = client.completions.create(
            **ask, extra_body={"guided_grammar": 'start: "(" D ("+" D)* ")"\nD: /[1-9]/\n'})
        text = r.choices[0].text
        assert r.choices[0].finish_reason == "length" or re.fullmatch(r"\([1-9](\+[1-9])*\)", text), text
    # top_logprobs only list tokens the grammar allows: prefixes of the choices.
    r = client.chat.completions.create(
        model="model", messages=chat("?"), max_tokens=10, temperature=0, logprobs=True,
        top_logprobs=5, extra_body={"guided_choice": ["yes", "no"]})
    first = r.choices[0].logprobs.content[0]
    assert first.top_logprobs, first
    for alt in first.top_logprobs:
        assert "yes".startswith(alt.token) or "no".startswith(alt.token), alt


@check
def streams_equal_whole_answers(s, client):
    for name in SCHEMAS:
        ask = dict(model="model", messages=chat(name), max_tokens=MAX_TOKENS, seed=9,
                   temperature=0.8, response_format=response_format(name))
        whole = client.chat.completions.create(**ask).choices[0]
        parts, finish = [], None
        for chunk in client.chat.completions.create(**ask, stream=True):
            for c in chunk.choices:
                parts.append(c.delta.content or "")
                finish = c.finish_reason or finish
        assert "".join(parts) == whole.message.content and finish == whole.finish_reason == "stop"


def constrained(k):
    name = list(SCHEMAS)[k % 3]
    return dict(model="model", messages=chat(f"{name} {k}"), max_tokens=MAX_TOKENS,
                seed=k, temperature=0.7, response_format=response_format(name))


def free(k):
    return dict(model="model", messages=chat(f"free {k}"), max_tokens=24, temperature=0)


def answer(client, ask):
    c = client.chat.completions.create(**ask).choices[0]
    return c.message.content, c.finish_reason


@check
def batched_equal_solo_and_n_choices(s, client):
    asks = [constrained(k) for k in range(8)] + [free(k) for k in range(4)]
    solo = [answer(client, a) for a in asks]
    with ThreadPoolExecutor(12) as pool:
        together = list(pool.map(lambda a: answer(client, a), asks))
    assert together == solo
    for (text, finish), ask in zip(solo[:8], asks):
        assert finish == "stop"
        valid(text, ask["response_format"]["json_schema"]["schema"])
    r = client.chat.completions.create(**{**constrained(1), "n": 3})
    assert len(r.choices) == 3
    for c in r.choices:
        assert c.finish_reason == "stop"
        valid(c.message.content, NESTED)


@check
def bad_inputs_are_400s_and_the_server_still_serves(s, client):
    hi = chat("hi")
    bad = [
        ({"response_format": {"type": "yaml"}}, "response_format", "yaml"),
        ({"response_format": {"type": "json_schema"}}, "response_format", "json_schema"),
        ({"response_format": {"type": "json_schema",
                              "json_schema": {"name": "x", "schema": {"type": "strnig"}}}},
         "response_format", "strnig"),
        ({"response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "integer", "minimum": 5, "maximum": 1}}}},
         "response_format", "nsatisfiable"),
        ({"guided_regex": "(["}, "response_format", "regex"),
        ({"guided_grammar": "start: nothing_here"}, "response_format", "nothing_here"),
        ({"guided_choice": []}, "guided_json", "choice"),
        ({"guided_regex": "a", "response_format": {"type": "json_object"}}, "guided_json", "one"),
        ({"structured_outputs": "json"}, "structured_outputs", "object"),
        # Compiles, but no answer can start (llguidance finds out at the first mask).
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}}}},
         "response_format", "at the answer's first token"),
    ]
    for extra, param, word in bad:
        status, _, text = s.request("POST", "/v1/chat/completions",
                                    {"messages": hi, "max_tokens": 8, **extra})
        err = json.loads(text)["error"]
        assert status == 400 and err["type"] == "invalid_request_error", (extra, status, text)
        assert err["param"] == param and word.lower() in err["message"].lower(), (extra, err)
        assert set(err) >= {"message", "type", "param"}
        r = client.chat.completions.create(model="model", messages=hi, max_tokens=4)
        assert r.choices[0].finish_reason in ("stop", "length")
    # The official client raises the 400 too.
    try:
        client.chat.completions.create(model="model", messages=hi, max_tokens=4,
                                       response_format={"type": "xml"})
        raise AssertionError("accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400


@check
def grammars_failing_mid_answer_are_400s(s, client):
    """A grammar that fails a later step (past the operator's per-token lexer fuel, past the
    parser's row) fails its request with a 400 naming why, streamed as an error event: the
    client's grammar to fix, not a 500 that clients retry. Nothing else is disturbed."""
    hi = chat("hi")
    wide = {"anyOf": [{"required": [f"k{i}"], "properties": {f"k{i}": {"type": "string"}}}
                      for i in range(1100)]}
    cases = [({"guided_regex": "a{1000000000}"}, "--max-grammar-step-fuel"),
             ({"guided_json": wide}, "max is 2000")]
    free = client.chat.completions.create(model="model", messages=hi, max_tokens=6,
                                          temperature=0)
    for extra, words in cases:
        status, _, text = s.request("POST", "/v1/chat/completions",
                                    {"messages": hi, "max_tokens": 8, **extra})
        err = json.loads(text)["error"]
        assert status == 400 and err["type"] == "invalid_request_error", (status, text)
        assert words in err["message"] and len(err["message"]) < 200, err
        assert "<state>" not in text, text
        status, _, text = s.request("POST", "/v1/chat/completions",
                                    {"messages": hi, "max_tokens": 8, "stream": True, **extra})
        events = [json.loads(line[6:]) for line in text.splitlines()
                  if line.startswith("data: {")]
        assert status == 200 and events[-1]["error"]["type"] == "invalid_request_error", text
        assert words in events[-1]["error"]["message"], events[-1]
        assert text.rstrip().endswith("data: [DONE]"), text
        try:
            client.chat.completions.create(model="model", messages=hi, max_tokens=8,
                                           extra_body=extra)
            raise AssertionError(f"{extra} accepted")
        except openai.BadRequestError as e:
            assert words in str(e), e
    again = client.chat.completions.create(model="model", messages=hi, max_tokens=6,
                                           temperature=0)
    assert again.choices[0].message.content == free.choices[0].message.content


def deep_grammar(kind, n):
    """The request fields of a constraint whose compilation recurses about `n` deep (the shapes
    that overflowed a 2 MiB stack and aborted the whole server: 600 `$ref`s was enough)."""
    def chain(link):
        defs = {f"d{i}": link(i) for i in range(n)}
        defs[f"d{n}"] = {"type": "integer"}
        return {"guided_json": {"$ref": "#/$defs/d0", "$defs": defs}}
    if kind == "refs":
        return chain(lambda i: {"$ref": f"#/$defs/d{i + 1}"})
    if kind == "objects":
        return chain(lambda i: {"type": "object", "required": ["a"],
                                "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}}})
    if kind == "all_of":
        return chain(lambda i: {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]})
    if kind == "properties":
        props = {f"f{i}": {"type": "integer"} for i in range(n)}
        return {"guided_json": {"type": "object", "properties": props, "required": list(props)}}
    if kind == "prefix_items":
        return {"guided_json": {"type": "array", "prefixItems": [{"type": "integer"}] * n,
                                "items": False}}
    if kind == "lark_rules":
        rules = "\n".join(f"r{i}: r{i + 1}" for i in range(n))
        return {"guided_grammar": f'start: r0\n{rules}\nr{n}: "a"'}
    raise ValueError(kind)


def largest(kind, limit):
    """The deepest `deep_grammar(kind, n)` whose JSON stays under `limit` bytes."""
    lo, hi = 1, 2
    while len(json.dumps(deep_grammar(kind, hi))) < limit:
        lo, hi = hi, hi * 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if len(json.dumps(deep_grammar(kind, mid))) < limit else (lo, mid)
    return lo


@check
def deep_grammars_neither_crash_nor_stall(s, client):
    """Constraints that make llguidance recurse deep, up to the default --max-grammar-bytes
    (128 KiB): each compiles on a thread with a deep stack and is answered (200) or refused
    with llguidance's reason (400), three at once beside a free request, and the server serves
    on; one past the limit is refused by it, naming the option."""
    hi = chat("hi")
    free = lambda: client.chat.completions.create(  # noqa: E731
        model="model", messages=hi, max_tokens=6, temperature=0).choices[0].message.content
    before = free()
    kinds = ["refs", "objects", "all_of", "properties", "prefix_items", "lark_rules"]
    sizes = {k: largest(k, 120 << 10) for k in kinds}

    def ask(kind):
        status, _, text = s.request("POST", "/v1/chat/completions", {
            "messages": hi, "max_tokens": 4, **deep_grammar(kind, sizes[kind])})
        if status != 200:
            err = json.loads(text)["error"]
            assert status == 400 and err["type"] == "invalid_request_error", (kind, status, text)
        return kind, status

    with ThreadPoolExecutor(4) as pool:
        answered = dict(pool.map(ask, kinds[:3]))
        during = pool.submit(free)
        answered.update(pool.map(ask, kinds[3:]))
        assert during.result() == before
    assert answered["refs"] == 200 and answered["lark_rules"] == 200, answered
    status, _, text = s.request("POST", "/v1/chat/completions", {
        "messages": hi, "max_tokens": 4, **deep_grammar("refs", 2 * sizes["refs"])})
    err = json.loads(text)["error"]
    assert status == 400 and "--max-grammar-bytes" in err["message"], (status, text)
    assert free() == before
    print(f"  depths at 120 KiB: {sizes}; answers {answered}")


def guided(client, k):
    """Request k of the preemption check: a seeded `guided_json` completion of up to 100 tokens."""
    r = client.completions.create(
        model="model", prompt=f"p{k}", max_tokens=100, seed=k, temperature=0.7,
        extra_body={"guided_json": list(SCHEMAS.values())[k % 3]})
    return r.choices[0].text, r.choices[0].finish_reason


def check_small_server(binary, reference):
    """Preemption with constrained sequences, and a grammar past the operator's size limit."""
    s = Server(binary, "--max-num-sequence", "8", "--max-total-seq-length", "192",
               "--max-grammar-size", "2000", "--jump-forward", "on")
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda k: guided(client, k), range(8)))
        assert metric(s, "tvmrt_preemptions_total") > 0
        assert got == reference, (got, reference)
        big = {"type": "object", "properties": {
            f"field_{i}": {"type": "string", "pattern": "^[a-z]{1,8}$"} for i in range(300)}}
        status, _, text = s.request("POST", "/v1/completions", {
            "prompt": "x", "max_tokens": 8, "guided_json": big}, key=None)
        err = json.loads(text)["error"]
        assert status == 400 and err["param"] == "response_format", (status, text)
        assert "size" in err["message"] or "limit" in err["message"], err
        assert guided(client, 0) == reference[0]
    finally:
        s.stop()
    print("ok: preemption with constrained sequences; a grammar past --max-grammar-size is a 400")


def main():
    binary = sys.argv[1]
    # Forced tokens appended at once (on the CPU `auto` decodes them one by one).
    s = Server(binary, "--api-key", KEY, "--max-num-sequence", "16", "--jump-forward", "on")
    client = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    try:
        for f in CHECKS:
            t = time.time()
            f(s, client)
            print(f"ok: {f.__name__} ({time.time() - t:.1f} s)")
        reference = [guided(client, k) for k in range(8)]
        for k, (text, finish) in enumerate(reference):
            assert finish == "stop", (k, text)
            valid(text, list(SCHEMAS.values())[k % 3])
    finally:
        s.stop()
    check_small_server(binary, reference)
    print(f"all {len(CHECKS) + 1} structured-output checks passed")


if __name__ == "__main__":
    main()
