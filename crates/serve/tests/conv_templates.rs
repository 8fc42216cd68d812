//! Every conversation template MLC-LLM registers (tests/fixtures/mlc/conv_templates.json, recorded
//! from MLC's own `Conversation.as_prompt` by conv_templates.py): each chat, parsed as the chat
//! endpoint parses it, renders to MLC's prompt text, or is refused where MLC refuses it, and the
//! template's prefix token ids are the ones MLC puts first.

use serde_json::{json, Value};
use tvmrt_serve::api;
use tvmrt_serve::conversation::ConvTemplate;

#[test]
fn every_mlc_template_renders_every_chat_as_mlc_does() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/mlc/conv_templates.json"
    );
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let chats = recorded["chats"].as_array().unwrap();
    let templates = recorded["templates"].as_array().unwrap();
    assert!(templates.len() >= 50, "{} templates", templates.len());
    let (mut rendered, mut refused, mut prefixed) = (0, 0, 0);
    for t in templates {
        let name = t["name"].as_str().unwrap();
        let template: ConvTemplate =
            serde_json::from_value(t["template"].clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want_prefix: Vec<i32> = match &t["template"]["system_prefix_token_ids"] {
            Value::Array(ids) => ids.iter().map(|v| v.as_i64().unwrap() as i32).collect(),
            _ => Vec::new(),
        };
        assert_eq!(template.prefix_ids(), want_prefix, "{name}");
        prefixed += usize::from(!want_prefix.is_empty());
        for (chat, want) in chats.iter().zip(t["prompts"].as_array().unwrap()) {
            let body = json!({ "messages": chat });
            let messages = api::messages(body.as_object().unwrap()).unwrap();
            let got = template.render(&messages);
            match want.as_str() {
                Some(want) => {
                    assert_eq!(got.as_deref().ok(), Some(want), "{name}: {chat}");
                    rendered += 1;
                }
                None => {
                    assert!(
                        got.is_err(),
                        "{name}: MLC refuses {chat}, tvmrt gave {got:?}"
                    );
                    refused += 1;
                }
            }
        }
    }
    // The set exercises both outcomes and the prefix ids (most templates' BOS).
    assert!(rendered > 300 && refused > 100 && prefixed > 25);
}
