//! A request's constraint from its fields: OpenAI's `response_format`, vLLM's
//! `structured_outputs` and its older `guided_json` / `guided_regex` / `guided_choice` /
//! `guided_grammar`. Shapes are checked here (a 400 naming the field); whether a schema or
//! grammar compiles is checked when the request is submitted (the engine has the tokenizer).

use serde_json::{Map, Value};

use super::Constraint;
use crate::api::ApiError;

type Res<T> = Result<T, ApiError>;

/// The constraint a request body asks for, if any. At most one of `response_format` (other
/// than `{"type": "text"}`), `structured_outputs` and the `guided_*` fields may be set.
pub fn constraint_from_body(body: &Map<String, Value>) -> Res<Option<Constraint>> {
    let mut found: Vec<(&'static str, Constraint)> = Vec::new();
    if let Some(c) = response_format(body.get("response_format"))? {
        found.push(("response_format", c));
    }
    match body.get("structured_outputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) => {
            if let Some(c) = vllm_fields(o, "structured_outputs", "")? {
                found.push(("structured_outputs", c));
            }
        }
        Some(_) => {
            return Err(ApiError::bad(
                "`structured_outputs` must be an object",
                Some("structured_outputs"),
            ))
        }
    }
    if let Some(c) = vllm_fields(body, "guided_json", "guided_")? {
        found.push(("guided_json", c));
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop().map(|f| f.1)),
        _ => Err(ApiError::bad(
            format!(
                "only one structured output constraint may be given, not {}",
                found.iter().map(|f| f.0).collect::<Vec<_>>().join(" and ")
            ),
            Some(found[1].0),
        )),
    }
}

/// OpenAI's `response_format` (and MLC's `{"type": "json_object", "schema": "..."}`).
fn response_format(v: Option<&Value>) -> Res<Option<Constraint>> {
    const P: Option<&str> = Some("response_format");
    let o = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ApiError::bad("`response_format` must be an object", P)),
    };
    match o.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => match o.get("schema") {
            None | Some(Value::Null) => Ok(Some(Constraint::JsonObject)),
            Some(s) => Ok(Some(Constraint::JsonSchema {
                schema: schema_value(s, "response_format")?,
                compact: true,
            })),
        },
        Some("json_schema") => {
            let js = match o.get("json_schema") {
                Some(Value::Object(js)) => js,
                _ => {
                    return Err(ApiError::bad(
                        "`response_format` of type `json_schema` needs a `json_schema` object \
                         (`name`, `schema`, `strict`)",
                        P,
                    ))
                }
            };
            if !matches!(js.get("name"), None | Some(Value::Null | Value::String(_))) {
                return Err(ApiError::bad("`json_schema.name` must be a string", P));
            }
            if !matches!(js.get("strict"), None | Some(Value::Null | Value::Bool(_))) {
                return Err(ApiError::bad("`json_schema.strict` must be a boolean", P));
            }
            // OpenAI's schema is optional: without one, any JSON value.
            let schema = match js.get("schema") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(s) => schema_value(s, "response_format")?,
            };
            Ok(Some(Constraint::JsonSchema {
                schema,
                compact: true,
            }))
        }
        Some(other) => Err(ApiError::bad(
            format!(
                "`response_format` type `{other}` is not supported (`text`, `json_object`, \
                 `json_schema`)"
            ),
            P,
        )),
        None => Err(ApiError::bad("`response_format` needs a string `type`", P)),
    }
}

/// vLLM's fields, named `{prefix}json`, `{prefix}regex`, `{prefix}choice`, `{prefix}grammar`
/// (and `json_object`, `whitespace_pattern`), in `o`; `param` names them in errors.
fn vllm_fields(
    o: &Map<String, Value>,
    param: &'static str,
    prefix: &str,
) -> Res<Option<Constraint>> {
    let field = |name: &str| match o.get(&format!("{prefix}{name}")) {
        None | Some(Value::Null) => None,
        Some(v) => Some(v),
    };
    let bad = |m: String| ApiError::bad(m, Some(param));
    let mut found = Vec::new();
    if let Some(v) = field("json") {
        let mut schema = schema_value(v, param)?;
        let compact = match field("whitespace_pattern") {
            None => true,
            Some(Value::String(p)) => {
                // A client that names its whitespace gets it (llguidance's own option).
                if let Value::Object(m) = &mut schema {
                    m.entry("x-guidance").or_insert_with(|| {
                        serde_json::json!({"whitespace_flexible": true, "whitespace_pattern": p})
                    });
                }
                false
            }
            Some(_) => {
                return Err(bad(format!(
                    "`{prefix}whitespace_pattern` must be a string"
                )))
            }
        };
        found.push(Constraint::JsonSchema { schema, compact });
    }
    if let Some(v) = field("regex") {
        let rx = v
            .as_str()
            .ok_or_else(|| bad(format!("`{prefix}regex` must be a string")))?;
        found.push(Constraint::Regex(rx.to_string()));
    }
    if let Some(v) = field("choice") {
        let options: Option<Vec<String>> = v
            .as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_string)).collect());
        match options {
            Some(options) if !options.is_empty() => found.push(Constraint::Choice(options)),
            _ => {
                return Err(bad(format!(
                    "`{prefix}choice` must be a non-empty list of strings"
                )))
            }
        }
    }
    if let Some(v) = field("grammar") {
        let g = v.as_str().ok_or_else(|| {
            bad(format!(
                "`{prefix}grammar` must be a string (a Lark grammar)"
            ))
        })?;
        found.push(Constraint::Lark(g.to_string()));
    }
    if prefix.is_empty() {
        match field("json_object") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => found.push(Constraint::JsonObject),
            Some(_) => return Err(bad("`json_object` must be a boolean".into())),
        }
        if field("structural_tag").is_some() {
            return Err(bad("`structural_tag` is not supported".into()));
        }
    }
    if found.len() > 1 {
        return Err(bad(format!(
            "only one of `{prefix}json`, `{prefix}regex`, `{prefix}choice`, `{prefix}grammar` \
             may be given"
        )));
    }
    Ok(found.pop())
}

/// A JSON schema given as an object (or `true`), or as a string holding one (MLC's form).
fn schema_value(v: &Value, param: &'static str) -> Res<Value> {
    let v = match v {
        Value::String(s) => serde_json::from_str(s).map_err(|e| {
            ApiError::bad(
                format!("the JSON schema is not valid JSON: {e}"),
                Some(param),
            )
        })?,
        v => v.clone(),
    };
    match v {
        Value::Object(_) | Value::Bool(true) => Ok(v),
        _ => Err(ApiError::bad(
            "a JSON schema must be an object",
            Some(param),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Res<Option<Constraint>> {
        constraint_from_body(v.as_object().unwrap())
    }

    #[test]
    fn every_form_reads_as_its_constraint() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let js = |schema: &Value| Constraint::JsonSchema {
            schema: schema.clone(),
            compact: true,
        };
        let cases = [
            (json!({}), None),
            (json!({"response_format": {"type": "text"}}), None),
            (
                json!({"response_format": {"type": "json_object"}}),
                Some(Constraint::JsonObject),
            ),
            (
                json!({"response_format": {"type": "json_object", "schema": schema.to_string()}}),
                Some(js(&schema)),
            ),
            (
                json!({"response_format": {"type": "json_schema",
                       "json_schema": {"name": "x", "schema": schema, "strict": true}}}),
                Some(js(&schema)),
            ),
            (json!({"guided_json": schema}), Some(js(&schema))),
            (
                json!({"structured_outputs": {"json": schema}}),
                Some(js(&schema)),
            ),
            (
                json!({"guided_regex": "[a-z]+"}),
                Some(Constraint::Regex("[a-z]+".into())),
            ),
            (
                json!({"structured_outputs": {"choice": ["a", "b"]}}),
                Some(Constraint::Choice(vec!["a".into(), "b".into()])),
            ),
            (
                json!({"guided_grammar": "start: \"x\""}),
                Some(Constraint::Lark("start: \"x\"".into())),
            ),
            (
                json!({"structured_outputs": {"json_object": true}}),
                Some(Constraint::JsonObject),
            ),
        ];
        for (body, want) in cases {
            assert_eq!(parse(body.clone()).unwrap(), want, "{body}");
        }
        // A named whitespace pattern is llguidance's option in the schema.
        let got =
            parse(json!({"guided_json": {"type": "object"}, "guided_whitespace_pattern": " ?"}));
        let Some(Constraint::JsonSchema { schema, compact }) = got.unwrap() else {
            panic!("a schema")
        };
        assert!(!compact);
        assert_eq!(schema["x-guidance"]["whitespace_pattern"], " ?");
    }

    #[test]
    fn bad_forms_are_400s_naming_the_field() {
        let cases = [
            (json!({"response_format": "json"}), "response_format"),
            (
                json!({"response_format": {"type": "yaml"}}),
                "response_format",
            ),
            (json!({"response_format": {}}), "response_format"),
            (
                json!({"response_format": {"type": "json_schema"}}),
                "response_format",
            ),
            (
                json!({"response_format": {"type": "json_schema", "json_schema": {"schema": 3}}}),
                "response_format",
            ),
            (
                json!({"response_format": {"type": "json_object", "schema": "{nope"}}),
                "response_format",
            ),
            (json!({"guided_regex": 5}), "guided_json"),
            (json!({"guided_choice": []}), "guided_json"),
            (json!({"guided_choice": ["a", 1]}), "guided_json"),
            (
                json!({"guided_json": {}, "guided_regex": "a"}),
                "guided_json",
            ),
            (json!({"structured_outputs": 1}), "structured_outputs"),
            (
                json!({"structured_outputs": {"structural_tag": "{}"}}),
                "structured_outputs",
            ),
            (
                json!({"response_format": {"type": "json_object"}, "guided_regex": "a"}),
                "guided_json",
            ),
        ];
        for (body, param) in cases {
            let e = parse(body.clone()).unwrap_err();
            assert_eq!((e.status, e.param), (400, Some(param)), "{body}");
            assert_eq!(e.kind, "invalid_request_error");
        }
    }

    #[test]
    fn json_options_are_compact_unless_the_schema_says() {
        let g = |c: &Constraint| serde_json::to_value(c.to_grammar()).unwrap().to_string();
        let compact = Constraint::JsonSchema {
            schema: json!({"type": "object"}),
            compact: true,
        };
        assert!(
            g(&compact).contains(r#""key_separator":":""#),
            "{}",
            g(&compact)
        );
        let own = json!({"type": "object", "x-guidance": {"whitespace_flexible": true}});
        assert_eq!(super::super::with_json_options(own.clone(), true), own);
    }
}
