//! Tool calling's request checks, prompt, grammar and reading of answers.

use llguidance::toktrie::ApproximateTokEnv;
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Map, Value};

use super::calls::{read_answer, CallReader, Piece};
use super::prompt::{assistant_with_calls, call_text, for_template};
use super::*;
use crate::conversation::{ConvTemplate, Message};

fn body(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// The tool fields of `b` under the default `--max-grammar-bytes`.
fn parse(b: &Map<String, Value>) -> Res<Option<Tools>> {
    super::parse(b, 128 << 10)
}

/// Parameters whose compilation recurses far past a test thread's 2 MiB stack (a chain of
/// 3000 `$ref`s) are checked on the compile thread's; longer ones are refused by the limit.
#[test]
fn deep_parameters_are_checked_on_a_deep_stack() {
    let tool = |n: usize| {
        let mut defs: Map<String, Value> = (0..n)
            .map(|i| {
                (
                    format!("d{i}"),
                    json!({"$ref": format!("#/$defs/d{}", i + 1)}),
                )
            })
            .collect();
        defs.insert(format!("d{n}"), json!({"type": "integer"}));
        json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}}}]})
    };
    assert_eq!(tools(tool(3000)).functions.len(), 1);
    let e = parse(&body(tool(6000))).unwrap_err();
    assert!(e.message.contains("--max-grammar-bytes"), "{}", e.message);
}

fn weather() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 8},
            "unit": {"enum": ["c", "f"]}},
          "required": ["city", "unit"], "additionalProperties": false}}})
}

fn time() -> Value {
    json!({"type": "function", "function": {"name": "get_time"}})
}

fn tools(v: Value) -> Tools {
    parse(&body(v)).unwrap().unwrap()
}

#[test]
fn good_tool_fields_are_typed() {
    let t = tools(json!({"tools": [weather(), time()]}));
    assert_eq!(t.choice, ToolChoice::Auto);
    assert!(t.parallel && t.active() && !t.forced());
    assert_eq!(
        t.functions[1].parameters,
        json!({"type": "object", "properties": {}})
    );
    let t = tools(
        json!({"tools": [weather(), time()], "parallel_tool_calls": false,
        "tool_choice": {"type": "function", "function": {"name": "get_time"}}}),
    );
    assert_eq!(t.choice, ToolChoice::Named("get_time".into()));
    assert!(t.forced() && !t.several_calls());
    assert_eq!(t.callable().len(), 1);
    assert_eq!(t.callable()[0].name, "get_time");
    let t = tools(json!({"tools": [weather()], "tool_choice": "required"}));
    assert!(t.forced() && t.several_calls());
    let t = tools(json!({"tools": [weather()], "tool_choice": "none"}));
    assert!(!t.active());
    assert!(parse(&body(json!({"tools": []}))).unwrap().is_none());
    assert!(parse(&body(json!({"tool_choice": "none"})))
        .unwrap()
        .is_none());
}

#[test]
fn bad_tool_fields_are_400s_naming_the_parameter() {
    let schema = |p: Value| json!({"type": "function", "function": {"name": "f", "parameters": p}});
    let cases = [
        (json!({"tools": {}}), "tools", "must be a list"),
        (json!({"tools": [5]}), "tools", "must be an object"),
        (
            json!({"tools": [{"type": "retrieval"}]}),
            "tools",
            "not supported",
        ),
        (
            json!({"tools": [{"type": "function"}]}),
            "tools",
            "`function` object",
        ),
        (
            json!({"tools": [{"type": "function", "function": {}}]}),
            "tools",
            "`name`",
        ),
        (
            json!({"tools": [{"type": "function", "function": {"name": "a b"}}]}),
            "tools",
            "a b",
        ),
        (json!({"tools": [time(), time()]}), "tools", "twice"),
        (
            json!({"tools": [schema(json!(5))]}),
            "tools",
            "not a valid JSON schema",
        ),
        (
            json!({"tools": [schema(json!({"type": "string"}))]}),
            "tools",
            "must be \"object\"",
        ),
        (
            json!({"tools": [schema(json!({"type": "object",
                                        "properties": {"a": {"type": "bogus"}}}))]}),
            "tools",
            "function `f` are not a valid JSON schema",
        ),
        (
            json!({"tools": [schema(json!({"type": "object",
                                        "properties": {"a": {"pattern": "("}}}))]}),
            "tools",
            "not a valid JSON schema",
        ),
        (
            json!({"tool_choice": "required"}),
            "tool_choice",
            "only allowed",
        ),
        (
            json!({"tool_choice": {"type": "function", "function": {"name": "f"}}}),
            "tool_choice",
            "only allowed",
        ),
        (
            json!({"tools": [time()], "tool_choice": "always"}),
            "tool_choice",
            "always",
        ),
        (
            json!({"tools": [time()], "tool_choice": 3}),
            "tool_choice",
            "string or an object",
        ),
        (
            json!({"tools": [time()], "tool_choice": {"type": "function"}}),
            "tool_choice",
            "as an object",
        ),
        (
            json!({"tools": [time(), weather()],
                   "tool_choice": {"type": "function", "function": {"name": "get_news"}}}),
            "tool_choice",
            "`get_news`, which is not in `tools` (get_time, get_weather)",
        ),
        (
            json!({"tools": [time()], "parallel_tool_calls": "yes"}),
            "parallel_tool_calls",
            "boolean",
        ),
    ];
    for (b, param, words) in cases {
        let e = parse(&body(b.clone())).unwrap_err();
        assert_eq!((e.status, e.param), (400, Some(param)), "{b}");
        assert!(e.message.contains(words), "{b}: {}", e.message);
        assert_eq!(e.body()["error"]["type"], "invalid_request_error");
    }
}

fn chatml() -> ConvTemplate {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/mlc/model/mlc-chat-config.json"
    );
    let config: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(config["conv_template"].clone()).unwrap()
}

#[test]
fn chatml_gets_the_tools_in_its_system_message_and_tool_results_as_user_turns() {
    let template = chatml();
    let t = tools(json!({"tools": [weather()], "tool_choice": "auto"}));
    let call = assistant_with_calls(
        None,
        &json!([{"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]),
    )
    .unwrap();
    assert_eq!(
        call,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>"
    );
    let messages = [
        Message::text("user", "Weather?"),
        Message::text("assistant", &call),
        Message::text("tool", "{\"t\": 3}"),
    ];
    let (adapted, function_string) = for_template(&template, &messages, Some(&t));
    assert_eq!(function_string, "");
    let prompt = template.render(&adapted).unwrap();
    let function = json!({"type": "function", "function": {"name": "get_weather",
        "description": "Weather.", "parameters": weather()["function"]["parameters"]}});
    let want = format!(
        "<|im_start|>system\n{}\n\n# Tools\n\nYou may call functions:\n<tools>\n{function}\n\
         </tools>\nFor each call, answer:\n<tool_call>\n\
         {{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n\
         {call}<|im_end|>\n<|im_start|>user\n<tool_response>\n{{\"t\": 3}}\n</tool_response>\
         <|im_end|>\n<|im_start|>assistant\n",
        template.system_message
    );
    assert_eq!(prompt, want);
    // A system message of the request's own takes the block; `none` leaves the tools out.
    let (adapted, _) = for_template(
        &template,
        &[Message::text("system", "S"), Message::text("user", "u")],
        Some(&t),
    );
    assert!(template
        .render(&adapted)
        .unwrap()
        .starts_with("<|im_start|>system\nS\n\n# Tools"));
    let none = tools(json!({"tools": [weather()], "tool_choice": "none"}));
    let (adapted, _) = for_template(&template, &messages[..1], Some(&none));
    assert_eq!(
        template.render(&adapted).unwrap(),
        template.render(&messages[..1]).unwrap()
    );
}

#[test]
fn a_template_with_mlcs_placeholder_gets_mlcs_function_string() {
    // Gorilla's template (MLC's conversation_template/gorilla.py).
    let template: ConvTemplate = serde_json::from_value(json!({
        "name": "gorilla", "system_template": "{system_message}", "system_message": "S",
        "roles": {"user": "USER", "assistant": "ASSISTANT", "tool": "USER"},
        "role_templates": {"user": "<<question>> {user_message} <<function>> {function_string}",
                           "assistant": "{assistant_message}", "tool": "{tool_message}"},
        "seps": ["\n", "</s>"], "role_content_sep": ": ", "role_empty_sep": ":"
    }))
    .unwrap();
    let t = tools(json!({"tools": [time(), weather()],
        "tool_choice": {"type": "function", "function": {"name": "get_time"}}}));
    let messages = [
        Message::text("user", "a"),
        Message::text("assistant", "b"),
        Message::text("user", "c"),
    ];
    let (adapted, function_string) = for_template(&template, &messages, Some(&t));
    assert_eq!(
        function_string,
        r#"{"name":"get_time","parameters":{"type":"object","properties":{}}}"#
    );
    assert_eq!(
        template
            .render_with_functions(&adapted, &function_string)
            .unwrap(),
        format!(
            "SUSER: <<question>> a <<function>> \nASSISTANT: b</s>USER: <<question>> c \
             <<function>> {function_string}\nASSISTANT:"
        )
    );
    // `auto`: the list of every function.
    let t = tools(json!({"tools": [time(), weather()]}));
    let (_, function_string) = for_template(&template, &messages, Some(&t));
    let list: Value = serde_json::from_str(&function_string).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2);
    // Its `tool` role takes tool results as they are.
    let (adapted, _) = for_template(&template, &[Message::text("tool", "r")], Some(&t));
    assert_eq!(adapted[0].role, "tool");
}

/// Whether `text` is a whole answer of `grammar` (on a byte-level vocabulary).
fn grammar_accepts(grammar: &str, text: &str) -> bool {
    let env = ApproximateTokEnv::single_byte_env();
    let factory = ParserFactory::new_simple(&env).unwrap();
    let constraint = crate::structured::Constraint::Lark(grammar.to_string());
    let mut m = Matcher::new(factory.create_parser(constraint.to_grammar()));
    assert!(!m.is_error(), "{grammar}: {:?}", m.get_error());
    let tokens: Vec<u32> = text.bytes().map(u32::from).collect();
    m.validate_tokens(&tokens).unwrap() == tokens.len()
        && m.consume_tokens(&tokens).is_ok()
        && m.is_accepting().unwrap()
}

#[test]
fn the_grammar_of_a_forced_call_takes_exactly_valid_calls() {
    let named = tools(json!({"tools": [weather(), time()],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}));
    let g = grammar::lark(&named);
    let good = call_text("get_weather", r#"{"city":"Oslo","unit":"c"}"#);
    assert!(grammar_accepts(&g, &good), "{g}");
    for bad in [
        call_text("get_time", "{}"),
        call_text("get_weather", r#"{"city":"Oslo"}"#),
        call_text("get_weather", r#"{"city":"Oslo","unit":"k"}"#),
        call_text("get_weather", r#"{"city":"Trondheim!","unit":"c"}"#),
        call_text("get_weather", r#"{"city": "Oslo", "unit": "c"}"#),
        format!("{good}\n{good}"),
        "hello".to_string(),
    ] {
        assert!(!grammar_accepts(&g, &bad), "{bad}");
    }
    // `required`: any function, several calls unless parallel_tool_calls is false.
    let required = tools(json!({"tools": [weather(), time()], "tool_choice": "required"}));
    let g = grammar::lark(&required);
    let two = format!("{good}\n{}", call_text("get_time", "{}"));
    assert!(grammar_accepts(&g, &good) && grammar_accepts(&g, &two));
    let single = tools(
        json!({"tools": [weather(), time()], "tool_choice": "required",
                              "parallel_tool_calls": false}),
    );
    let g = grammar::lark(&single);
    assert!(grammar_accepts(&g, &call_text("get_time", "{}")) && !grammar_accepts(&g, &two));
}

fn names() -> Vec<String> {
    vec!["get_weather".into(), "get_time".into()]
}

fn read(text: &str) -> (Option<String>, Vec<calls::Call>, usize) {
    read_answer(CallReader::new(names()), text)
}

#[test]
fn answers_are_read_into_text_and_calls() {
    let a = call_text("get_weather", r#"{"city":"O\"}","unit":"c"}"#);
    let b = call_text("get_time", "{}");
    let (content, calls, complete) = read(&format!("{a}\n{b}"));
    assert_eq!((content, complete), (None, 2));
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect::<Vec<_>>(),
        [
            ("get_weather", r#"{"city":"O\"}","unit":"c"}"#),
            ("get_time", "{}")
        ]
    );
    // Text before a call is content; plain text is content alone.
    let (content, calls, _) = read(&format!("Let me see.\n{b}"));
    assert_eq!(
        (content.as_deref(), calls.len()),
        (Some("Let me see.\n"), 1)
    );
    let (content, calls, _) = read("It is <b>sunny</b> <tool");
    assert_eq!(
        (content.as_deref(), calls.len()),
        (Some("It is <b>sunny</b> <tool"), 0)
    );
    // Another key order, spaces, arguments as a JSON string: read when the block closes.
    let odd =
        "<tool_call>\n{ \"arguments\": \"{\\\"x\\\": 1}\", \"name\": \"get_time\" }\n</tool_call>";
    let (content, calls, complete) = read(odd);
    assert_eq!((content, complete), (None, 1));
    assert_eq!(calls[0].arguments, r#"{"x":1}"#);
    // An unknown function, or a block that is not JSON, stays text.
    for text in [
        call_text("get_news", "{}"),
        "<tool_call>\nnot json\n</tool_call>".to_string(),
        "<tool_call>\n{\"name\": \"get_time\", \"argu".to_string(),
    ] {
        let (content, calls, _) = read(&text);
        assert_eq!((content.as_deref(), calls.len()), (Some(text.as_str()), 0));
    }
    // Without parallel calls: the first call alone, nothing after it.
    let one = CallReader::new(names()).with_max_calls(1);
    let (content, calls, complete) = read_answer(one, &format!("{a}\n{b} and more"));
    assert_eq!((content, calls.len(), complete), (None, 1, 1));
    // A call cut short keeps what it gave, and is not complete.
    let (_, calls, complete) = read("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"a\":");
    assert_eq!((calls[0].arguments.as_str(), complete), ("{\"a\":", 0));
}

#[test]
fn a_streamed_answer_gives_the_same_calls_in_fragments() {
    let text = format!(
        "{}\n{}",
        call_text("get_weather", r#"{"city":"Oslo","unit":"c"}"#),
        call_text("get_time", "{}")
    );
    // Byte by byte (as a byte-level model streams): the name comes whole, the arguments in
    // fragments, no text leaks out of a call.
    let mut reader = CallReader::new(names());
    let mut pieces = Vec::new();
    for ch in text.chars() {
        pieces.extend(reader.push(&ch.to_string()));
    }
    pieces.extend(reader.finish());
    assert!(
        pieces.iter().all(|p| !matches!(p, Piece::Text(_))),
        "{pieces:?}"
    );
    let starts: Vec<_> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::CallStart { index, name } => Some((*index, name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(0, "get_weather"), (1, "get_time")]);
    let fragments = pieces
        .iter()
        .filter(|p| matches!(p, Piece::Arguments { index: 0, .. }));
    assert!(fragments.count() > 10);
    let joined = |i: usize| -> String {
        pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Arguments { index, fragment } if *index == i => Some(fragment.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(joined(0), r#"{"city":"Oslo","unit":"c"}"#);
    assert_eq!(joined(1), "{}");
    assert_eq!(reader.calls(), 2);
}

#[test]
fn answers_in_openais_shapes() {
    let t = tools(json!({"tools": [weather(), time()],
        "tool_choice": {"type": "function", "function": {"name": "get_time"}}}));
    let answers = answer::ToolAnswers::new(&t, 1);
    let stop = Some(crate::engine::FinishReason::Stop);
    let (message, finish) = answers.message(&call_text("get_time", "{}"), stop);
    assert_eq!(finish, "stop");
    assert_eq!(message["content"], Value::Null);
    let call = &message["tool_calls"][0];
    assert_eq!(
        (call["type"].as_str(), call["function"]["name"].as_str()),
        (Some("function"), Some("get_time"))
    );
    assert_eq!(call["function"]["arguments"], "{}");
    let id = call["id"].as_str().unwrap();
    assert!(id.starts_with("call_") && id.len() == 29, "{id}");
    let auto = answer::ToolAnswers::new(&tools(json!({"tools": [weather(), time()]})), 2);
    assert_eq!(
        auto.message(&call_text("get_time", "{}"), stop).1,
        "tool_calls"
    );
    let (message, finish) = auto.message("hello", stop);
    assert_eq!(
        (message["content"].as_str(), finish),
        (Some("hello"), json!("stop"))
    );
    assert!(message.get("tool_calls").is_none());
    let length = Some(crate::engine::FinishReason::Length);
    assert_eq!(auto.message("<tool_call>\n{", length).1, "length");
    // Streamed: the call's head, then argument fragments, then the finish.
    let mut auto = auto;
    let head = auto
        .delta(1, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {")
        .unwrap();
    let c = &head["tool_calls"][0];
    assert_eq!(
        (c["index"].as_u64(), c["function"]["name"].as_str()),
        (Some(0), Some("get_time"))
    );
    assert_eq!(c["function"]["arguments"], "{");
    assert!(c["id"].as_str().unwrap().starts_with("call_"));
    let more = auto.delta(1, "}\n</tool_call>").unwrap();
    assert_eq!(
        more["tool_calls"][0],
        json!({"index": 0, "function": {"arguments": "}"}})
    );
    let (delta, finish) = auto.finish(1, crate::engine::FinishReason::Stop);
    assert_eq!((delta, finish), (json!({}), "tool_calls"));
}
