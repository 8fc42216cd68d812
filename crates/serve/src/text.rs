//! Text in and out: the model directory's `tokenizer.json` (the `tokenizers` crate, as MLC's
//! tokenizer library reads it) and the incremental decoding of a sequence's tokens into text
//! deltas, holding back what may still become a stop string or an unfinished UTF-8 character.

use std::path::Path;

use tvmrt::{Error, Result};

/// The model's tokenizer.
pub struct TextCodec {
    tok: tokenizers::Tokenizer,
    /// `tokenizer_config.json`, where the model directory has one (else empty).
    config: serde_json::Map<String, serde_json::Value>,
}

impl TextCodec {
    /// Reads `MODEL_DIR/tokenizer.json` and, if present, `tokenizer_config.json`.
    pub fn load(model_dir: &Path) -> Result<TextCodec> {
        let path = model_dir.join("tokenizer.json");
        let tok = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| Error::value(format!("{}: {e}", path.display())))?;
        let path = model_dir.join("tokenizer_config.json");
        let config = match std::fs::read_to_string(&path) {
            Err(_) => serde_json::Map::new(),
            Ok(text) => match serde_json::from_str(&text) {
                Ok(serde_json::Value::Object(m)) => m,
                Ok(_) => tvmrt::bail_value!("{}: not a JSON object", path.display()),
                Err(e) => tvmrt::bail_value!("{}: {e}", path.display()),
            },
        };
        Ok(TextCodec { tok, config })
    }

    /// Token ids of `text` (special tokens written in the text are matched; none are added).
    pub fn encode(&self, text: &str) -> Result<Vec<i32>> {
        self.encode_with(text, false)
    }

    /// Token ids of `text`, with the tokenizer's own special tokens (its post-processor's,
    /// such as a BOS) where `add_special_tokens`.
    pub fn encode_with(&self, text: &str, add_special_tokens: bool) -> Result<Vec<i32>> {
        let enc = self
            .tok
            .encode(text, add_special_tokens)
            .map_err(|e| Error::value(format!("cannot tokenize the prompt: {e}")))?;
        Ok(enc.get_ids().iter().map(|&i| i as i32).collect())
    }

    /// The text of `ids`, special tokens left out.
    pub fn decode(&self, ids: &[i32]) -> String {
        self.decode_with(ids, true)
    }

    /// The text of `ids`, special tokens left out where `skip_special_tokens`.
    pub fn decode_with(&self, ids: &[i32], skip_special_tokens: bool) -> String {
        let ids: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
        self.tok
            .decode(&ids, skip_special_tokens)
            .unwrap_or_default()
    }

    /// `tokenizer_config.json` as read (empty where the model directory has none).
    pub fn config(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.config
    }

    /// The text of one token as a client sees it in `logprobs` (special tokens included).
    pub fn token_text(&self, id: i32) -> String {
        self.tok.decode(&[id as u32], false).unwrap_or_default()
    }
}

/// The text a sequence has produced and how much of it the client has been sent.
///
/// Tokens are decoded incrementally, as TGI and vLLM do: only the tokens since the last
/// released text (`prefix..`) are decoded each step, and new text is released once it no
/// longer ends in U+FFFD (the bytes of an unfinished character), so a step costs the same at
/// any length.
#[derive(Default, Debug)]
pub struct Detokenized {
    /// All of the text so far (cut at a stop string once one appears).
    pub text: String,
    /// Bytes of `text` already sent.
    pub sent: usize,
    /// Tokens before `prefix` are released text; `prefix..read` decoded to the last release.
    prefix: usize,
    read: usize,
}

impl Detokenized {
    /// Takes the sequence's tokens after a new one; `last` when no more will come (then
    /// everything is released). Returns the stop string found, if any (the text is cut
    /// before it).
    pub fn push(
        &mut self,
        codec: &TextCodec,
        tokens: &[i32],
        stops: &[String],
        last: bool,
    ) -> Option<String> {
        let before = codec.decode(&tokens[self.prefix..self.read]);
        let now = codec.decode(&tokens[self.prefix..]);
        if (now.len() > before.len() && !now.ends_with('\u{FFFD}')) || last {
            if let Some(delta) = now.get(before.len()..) {
                let delta = delta.to_string();
                self.prefix = self.read;
                self.read = tokens.len();
                return self.append(&delta, stops);
            }
        }
        None
    }

    /// Appends released text; returns the stop string found, if any (the text is cut
    /// before it).
    pub fn append(&mut self, delta: &str, stops: &[String]) -> Option<String> {
        // A stop string can only end in the new text: search from where it could start.
        let longest = stops.iter().map(String::len).max().unwrap_or(0);
        let mut from = self.text.len().saturating_sub(longest);
        while !self.text.is_char_boundary(from) {
            from -= 1;
        }
        self.text.push_str(delta);
        let hit = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| self.text[from..].find(s.as_str()).map(|at| (from + at, s)))
            .min_by_key(|(at, _)| *at);
        let (at, s) = hit?;
        // Text already sent stays sent (a stop string is found before it is released).
        let cut = at.max(self.sent);
        self.text.truncate(if self.text.is_char_boundary(cut) {
            cut
        } else {
            at
        });
        Some(s.clone())
    }

    /// The next delta to send: everything unsent when `finished`, otherwise up to what could
    /// still be the start of a stop string or an unfinished character (U+FFFD at the end).
    pub fn take_delta(&mut self, stops: &[String], finished: bool) -> String {
        let mut end = self.text.len();
        if !finished {
            // Bytes of an unfinished character decode as U+FFFD until the rest arrives.
            end = self.text.trim_end_matches('\u{FFFD}').len();
            let held = stops
                .iter()
                .map(|s| partial_suffix(&self.text[..end], s))
                .max()
                .unwrap_or(0);
            end -= held;
        }
        // Earlier text only changes where a replacement character was held back; should a
        // decoder do otherwise, nothing is sent twice or sliced inside a character.
        let Some(out) = self.text.get(self.sent..end) else {
            return String::new();
        };
        let out = out.to_string();
        self.sent = end;
        out
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `stop`.
fn partial_suffix(text: &str, stop: &str) -> usize {
    let mut best = 0;
    for (i, _) in stop.char_indices().skip(1) {
        if text.ends_with(&stop[..i]) {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_cut_and_hold_back() {
        let stops = vec!["END".to_string()];
        let mut d = Detokenized::default();
        assert_eq!(d.append("abc E", &stops), None);
        assert_eq!(d.take_delta(&stops, false), "abc ");
        assert_eq!(d.append("N", &stops), None);
        assert_eq!(d.take_delta(&stops, false), "");
        assert_eq!(d.append("x", &stops), None);
        assert_eq!(d.take_delta(&stops, false), "ENx");
        assert_eq!(d.append(" END more", &stops), Some("END".into()));
        assert_eq!(d.take_delta(&stops, true), " ");
        assert_eq!(d.text, "abc ENx ");
    }

    #[test]
    fn unfinished_characters_wait() {
        let mut d = Detokenized::default();
        d.append("a\u{FFFD}", &[]);
        assert_eq!(d.take_delta(&[], false), "a");
    }
}
