//! `config.pbtxt` texts read, and malformed ones refused with their line.

use serde_json::json;

use super::*;

#[test]
fn a_full_configuration_reads_as_triton_s_json() {
    let text = r#"
# A comment.
name: "batch_mlp"
backend: "tvmrt"
max_batch_size: 8
input [
  {
name: "x"
data_type: TYPE_FP32
dims: [ 16 ]
  }
]
output { name: "output0", data_type: TYPE_FP32, dims: [ -1, 4 ] reshape: { shape: [ ] } }
output < name: 'output1' data_type: TYPE_INT64 dims: 2 >
dynamic_batching {
  max_queue_delay_microseconds: 2000
  preferred_batch_size: [ 4, 8 ]
}
instance_group [ { count: 2, kind: KIND_CPU } ]
parameters: { key: "device" value: { string_value: "cpu" } }
parameters { key: "threads", value { string_value: "2" } };
version_policy: { latest { num_versions: 1 } }
"#;
    assert_eq!(
        parse(text).unwrap(),
        json!({
            "name": "batch_mlp",
            "backend": "tvmrt",
            "max_batch_size": 8,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}],
            "output": [
                {"name": "output0", "data_type": "TYPE_FP32", "dims": [-1, 4],
                 "reshape": {"shape": []}},
                {"name": "output1", "data_type": "TYPE_INT64", "dims": [2]},
            ],
            "dynamic_batching": {
                "max_queue_delay_microseconds": 2000,
                "preferred_batch_size": [4, 8],
            },
            "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
            "parameters": {
                "device": {"string_value": "cpu"},
                "threads": {"string_value": "2"},
            },
            "version_policy": {"latest": {"num_versions": 1}},
        })
    );
}

#[test]
fn settings_read_from_parsed_text() {
    let c = parse(
        "max_batch_size: 4\nparameters { key: \"function\" value { string_value: \"add\" } }",
    )
    .unwrap();
    let s = crate::Settings::from_config(&c).unwrap();
    assert_eq!((s.max_batch_size, s.function.as_deref()), (4, Some("add")));
    assert_eq!(parse("").unwrap(), json!({}));
    assert_eq!(parse("  # only a comment\n").unwrap(), json!({}));
}

#[test]
fn scalars_strings_and_numbers() {
    let c = parse(
        r#"name: "a\"b\n\x41\101" 'c' default_model_filename: "m.so"
           optional: true allow_ragged_batch: False
           max_queue_delay_microseconds: 0x10 priority_levels: 010
           gather_kernel_buffer_threshold: 12 count: -3 busy_wait_events: t
           dims: [1.5, -2.5e-1, 3f]"#,
    )
    .unwrap();
    assert_eq!(c["name"], json!("a\"b\nAAc"));
    assert_eq!(c["optional"], json!(true));
    assert_eq!(c["allow_ragged_batch"], json!(false));
    assert_eq!(c["busy_wait_events"], json!(true));
    assert_eq!(c["max_queue_delay_microseconds"], json!(16));
    assert_eq!(c["priority_levels"], json!(8));
    assert_eq!(c["count"], json!(-3));
    assert_eq!(c["dims"], json!([1.5, -0.25, 3.0]));
    let big = parse("max_batch_size: 18446744073709551615").unwrap();
    assert_eq!(big["max_batch_size"], json!(u64::MAX));
}

#[test]
fn maps_of_strings_and_numbers() {
    let c = parse(
        r#"cc_model_filenames [ { key: "7.5" value: "a.so" }, { key: "8.0" value: "b.so" } ]
           dynamic_batching { priority_queue_policy { key: 1 value { max_queue_size: 4 } } }
           optimization { cuda { graph_spec { batch_size: 2 input { key: "x" value { dim: [3] } } } } }
           parameters { key: "empty" }"#,
    )
    .unwrap();
    assert_eq!(
        c["cc_model_filenames"],
        json!({"7.5": "a.so", "8.0": "b.so"})
    );
    assert_eq!(
        c["dynamic_batching"]["priority_queue_policy"],
        json!({"1": {"max_queue_size": 4}})
    );
    assert_eq!(
        c["optimization"]["cuda"]["graph_spec"],
        json!([{"batch_size": 2, "input": {"x": {"dim": [3]}}}])
    );
    assert_eq!(c["parameters"], json!({"empty": {}}));
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn malformed_text_names_its_line() {
    assert_eq!(
        err("name: \"m\"\nmax_batch_sizes: 8"),
        "line 2: unknown field `max_batch_sizes`"
    );
    assert_eq!(
        err("max_batch_size: 8\n\nmax_batch_size: 4"),
        "line 3: field `max_batch_size` takes one value; it was given on line 1 already"
    );
    assert_eq!(
        err("input {\n  name: \"x\"\n"),
        "line 2: the message opened on line 1 is not closed by `}`"
    );
    assert_eq!(
        err("name: \"abc\nbackend: 1"),
        "line 1: a string is not closed on its line"
    );
    assert_eq!(
        err("max_batch_size 8"),
        "line 1: expected `:` or `{` after `max_batch_size`, found the number 8"
    );
    assert_eq!(
        err("max_batch_size: }"),
        "line 1: expected a value for `max_batch_size`, found `}`"
    );
    assert_eq!(
        err("input [ { name: \"x\" }\n  { name: \"y\" } ]"),
        "line 2: expected `,` or `]` in the list `input` opened on line 1, found `{`"
    );
    assert_eq!(err("max_batch_size: 8x"), "line 1: `8x` is not a number");
    assert_eq!(err("\n\n}"), "line 3: expected a field name, found `}`");
    assert_eq!(
        err("name: \"a\\qb\""),
        "line 1: unknown escape `\\q` in a string"
    );
    assert_eq!(err("name: \"x\" @"), "line 1: unexpected character `@`");
    assert_eq!(
        err("max_batch_size: [1, 2]"),
        "line 1: field `max_batch_size` takes one value, not a list"
    );
    assert_eq!(
        err("parameters { value { string_value: \"x\" } }"),
        "line 1: an entry of `parameters` has no `key`"
    );
    assert_eq!(
        err("parameters: \"x\""),
        "line 1: `parameters` is a map: each entry is `{ key: ... value: ... }`"
    );
    assert_eq!(err("count: -inf"), "line 1: `-inf` has no JSON number");
    assert_eq!(
        err("count: 99999999999999999999"),
        "line 1: `99999999999999999999` is not a number"
    );
}
