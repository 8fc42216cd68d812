//! One response over several engine requests: a completion whose `prompt` is a list of
//! prompts (OpenAI's batch form) submits one request per prompt, and its choices are numbered
//! across them, prompt by prompt: prompt `p`'s choice `c` is choice `p * n + c`, as OpenAI and
//! vLLM number them.

use std::future::poll_fn;
use std::task::Poll;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::engine::Event;

/// The events of a response's engine requests, merged into one stream of [`Event`]s: choice
/// indexes renumbered, one `Done` when every request is done (its usage the sum). Dropping it
/// drops every receiver, which cancels the requests still running.
pub struct Events {
    receivers: Vec<UnboundedReceiver<Event>>,
    done: Vec<bool>,
    /// Choices per prompt (`n`).
    per_prompt: usize,
    prompt_tokens: usize,
    completion_tokens: usize,
}

impl Events {
    /// Merges the receivers of the requests of prompts 0, 1, ... with `per_prompt` choices
    /// each.
    pub fn new(receivers: Vec<UnboundedReceiver<Event>>, per_prompt: usize) -> Events {
        Events {
            done: vec![false; receivers.len()],
            receivers,
            per_prompt,
            prompt_tokens: 0,
            completion_tokens: 0,
        }
    }

    /// The choices of the whole response: `n` for each prompt.
    pub fn choices(&self) -> usize {
        self.receivers.len() * self.per_prompt
    }

    /// The next event of any request, renumbered; `None` when a request's channel closed
    /// before it was done (the engine stopped), or after the last `Done`.
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            if self.done.iter().all(|&d| d) {
                return None;
            }
            let (p, event) = poll_fn(|cx| {
                for (p, rx) in self.receivers.iter_mut().enumerate() {
                    if self.done[p] {
                        continue;
                    }
                    if let Poll::Ready(e) = rx.poll_recv(cx) {
                        return Poll::Ready((p, e));
                    }
                }
                Poll::Pending
            })
            .await;
            let mut event = event?;
            match &mut event {
                Event::Delta { choice, .. }
                | Event::Prompt { choice, .. }
                | Event::Finish { choice, .. } => {
                    *choice += p * self.per_prompt;
                }
                Event::Done {
                    prompt_tokens,
                    completion_tokens,
                } => {
                    self.done[p] = true;
                    self.prompt_tokens += *prompt_tokens;
                    self.completion_tokens += *completion_tokens;
                    if !self.done.iter().all(|&d| d) {
                        continue;
                    }
                    *prompt_tokens = self.prompt_tokens;
                    *completion_tokens = self.completion_tokens;
                }
                Event::Error(_) => {}
            }
            return Some(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::FinishReason;
    use tokio::sync::mpsc::unbounded_channel;

    fn delta(choice: usize, text: &str) -> Event {
        Event::Delta {
            choice,
            token: 1,
            text: text.into(),
            logprob: None,
        }
    }

    #[tokio::test]
    async fn choices_are_numbered_across_prompts_and_done_waits_for_all() {
        let (a, ra) = unbounded_channel();
        let (b, rb) = unbounded_channel();
        let mut events = Events::new(vec![ra, rb], 2);
        b.send(Event::Prompt {
            choice: 0,
            logprobs: Default::default(),
        })
        .unwrap();
        b.send(delta(1, "y")).unwrap();
        b.send(Event::Done {
            prompt_tokens: 3,
            completion_tokens: 4,
        })
        .unwrap();
        a.send(delta(0, "x")).unwrap();
        a.send(Event::Finish {
            choice: 1,
            reason: FinishReason::Length,
        })
        .unwrap();
        a.send(Event::Done {
            prompt_tokens: 5,
            completion_tokens: 6,
        })
        .unwrap();
        let mut seen = Vec::new();
        while let Some(e) = events.recv().await {
            match e {
                Event::Delta { choice, text, .. } => seen.push(format!("{choice}:{text}")),
                Event::Prompt { choice, .. } => seen.push(format!("{choice}:prompt")),
                Event::Finish { choice, .. } => seen.push(format!("{choice}:finish")),
                Event::Done {
                    prompt_tokens,
                    completion_tokens,
                } => {
                    seen.push(format!("done {prompt_tokens} {completion_tokens}"));
                    break;
                }
                Event::Error(f) => panic!("{f}"),
            }
        }
        seen.sort();
        assert_eq!(seen, ["0:x", "1:finish", "2:prompt", "3:y", "done 8 10"]);
        assert!(events.recv().await.is_none(), "nothing after the last Done");
    }

    #[tokio::test]
    async fn a_closed_request_ends_the_stream_and_dropping_cancels_the_rest() {
        let (a, ra) = unbounded_channel::<Event>();
        let (b, rb) = unbounded_channel::<Event>();
        let mut events = Events::new(vec![ra, rb], 1);
        drop(b);
        assert!(events.recv().await.is_none());
        drop(events);
        assert!(a.is_closed());
    }
}
