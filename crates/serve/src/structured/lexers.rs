//! A compiled grammar's parsers at its start, each with a lexer of its own, handed out to new
//! sequences so that the masks of many sequences of one grammar are computed at once.
//!
//! llguidance's parser clones share one lexer (the automaton it builds lazily as answers
//! explore it) behind a mutex that a mask holds for its whole computation: with every sequence
//! cloned from one parser, the masks of 16 sequences of one schema were computed one after
//! another whatever the threads (on the H200 machine, 16 constrained streams ran at 0.51x the
//! free ones with the jump-forward off; on 2 cores, two threads' masks 1.24x one thread's). A
//! deep clone has a lexer of its own, but a cold one that builds its automaton again (the
//! first answer about 2.5x the work of a warm one, and 50-150 KiB a copy for a JSON schema).
//! So a grammar keeps up to as many lexers ("shards") as the mask threads, each shared by the
//! sequences given it and warming with them: a new sequence takes an idle shard, else a new
//! one while there are fewer than the threads, else the least used. A new shard is a copy of
//! the lexer, milliseconds for a large grammar: requests take their matchers when they are
//! submitted, not on the engine thread.

use std::sync::Arc;

use llguidance::TokenParser;
use parking_lot::Mutex;

/// The shards of one compiled grammar.
pub struct Lexers {
    /// Never given to a sequence: new shards are copied from it, so a copy never waits for a
    /// mask in progress (a slow grammar's takes milliseconds, its forced runs far longer).
    pristine: TokenParser,
    shards: Mutex<Vec<Shard>>,
    most: usize,
}

/// A parser at the grammar's start with a lexer of its own, and the holds on it.
struct Shard {
    parser: TokenParser,
    users: ShardUse,
}

/// A sequence's hold on its shard (its matcher's clones hold it too): the shard counts as in
/// use while one lives.
#[derive(Clone, Default)]
pub struct ShardUse(Arc<()>);

impl ShardUse {
    fn holders(&self) -> usize {
        Arc::strong_count(&self.0) - 1
    }
}

impl Lexers {
    /// The shards of the grammar `parser` is at the start of (its lexer already warmed by the
    /// opening mask: the copies start from there), at most `most` of them.
    pub fn new(parser: TokenParser, most: usize) -> Lexers {
        Lexers {
            pristine: parser.deep_clone(),
            shards: Mutex::new(vec![Shard {
                parser,
                users: ShardUse::default(),
            }]),
            most: most.max(1),
        }
    }

    /// A parser at the grammar's start for a new sequence, and its hold on the parser's shard.
    pub fn take(&self) -> (TokenParser, ShardUse) {
        let mut shards = self.shards.lock();
        let least = shards
            .iter()
            .min_by_key(|s| s.users.holders())
            .expect("one shard at least");
        if least.users.holders() == 0 || shards.len() >= self.most {
            return (least.parser.clone(), least.users.clone());
        }
        let shard = Shard {
            parser: self.pristine.deep_clone(),
            users: ShardUse::default(),
        };
        let taken = (shard.parser.clone(), shard.users.clone());
        shards.push(shard);
        taken
    }

    /// How many shards the grammar has.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.shards.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use llguidance::toktrie::ApproximateTokEnv;
    use llguidance::{Matcher, ParserFactory};

    use super::*;
    use crate::structured::Constraint;

    fn lexers(most: usize) -> Lexers {
        let env = ApproximateTokEnv::single_byte_env();
        let factory = ParserFactory::new_simple(&env).unwrap();
        let rx = Constraint::Regex("(ab|cd)+[0-9]{2}".into());
        let parser = factory.create_parser(rx.to_grammar()).unwrap();
        Lexers::new(parser, most)
    }

    #[test]
    fn sequences_at_once_get_shards_of_their_own_up_to_the_most() {
        let l = lexers(3);
        let a = l.take();
        assert_eq!(
            l.count(),
            1,
            "the first sequence takes the grammar's own parser"
        );
        let b = l.take();
        let c = l.take();
        assert_eq!(l.count(), 3, "one shard per sequence running at once");
        let d = l.take();
        assert_eq!(l.count(), 3, "no more than the most");
        assert_eq!(
            [&a, &b, &c, &d].map(|t| t.1.holders()),
            [2, 1, 1, 2],
            "the fourth shares the least used (the first)"
        );
        // A matcher's clones hold its shard too.
        let a_clone = a.1.clone();
        drop(a);
        assert_eq!(a_clone.holders(), 2);
        drop(b);
        let e = l.take();
        assert_eq!(l.count(), 3, "an idle shard is taken again, not copied");
        assert_eq!(e.1.holders(), 1);
        drop((c, d, e, a_clone));
    }

    #[test]
    fn every_shard_gives_the_grammar_s_own_masks() {
        let l = lexers(4);
        let held: Vec<_> = (0..4).map(|_| l.take()).collect();
        assert_eq!(l.count(), 4);
        let masks: Vec<_> = held
            .iter()
            .map(|(parser, _)| {
                let mut m = Matcher::new(Ok(parser.clone()));
                let mut seen = Vec::new();
                for &t in b"abcdab4" {
                    seen.push(m.compute_mask().unwrap().as_slice().to_vec());
                    m.consume_token(t as u32).unwrap();
                }
                seen
            })
            .collect();
        assert!(masks.iter().all(|m| m == &masks[0]));
        // After "ab": "a", "c" or a digit, nothing else.
        let allowed = |mask: &[u32]| {
            (0..256u32)
                .filter(|t| mask[*t as usize / 32] >> (t % 32) & 1 == 1)
                .map(|t| t as u8)
                .collect::<Vec<u8>>()
        };
        let mut want = b"ac0123456789".to_vec();
        want.sort();
        assert_eq!(allowed(&masks[0][2]), want);
    }
}
