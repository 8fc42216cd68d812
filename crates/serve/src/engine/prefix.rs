//! Prefix sharing: finished sequences stay in the KV cache for a while (MLC-LLM's "recycling"
//! sequences), and a new prompt that starts with the tokens of one of them, or of a live
//! sequence, forks that sequence's KV cache at the shared length instead of prefilling it
//! again. The cache's fork shares whole pages (copy-on-write by block) and copies only the
//! page the fork falls in.

use std::collections::VecDeque;

use super::sequence::common_prefix;
use super::PAGE_SIZE;

/// A finished sequence kept for its tokens.
pub struct Cached {
    pub seq: i64,
    /// The tokens its KV cache holds.
    pub tokens: Vec<i32>,
}

/// Finished sequences, oldest first; bounded (the oldest is removed first).
#[derive(Default)]
pub struct PrefixPool {
    pub entries: VecDeque<Cached>,
    pub capacity: usize,
}

/// The best sequence to fork for a prompt: its id and how many tokens to take from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    pub seq: i64,
    pub len: usize,
}

impl PrefixPool {
    pub fn new(capacity: usize) -> PrefixPool {
        PrefixPool {
            entries: VecDeque::new(),
            capacity,
        }
    }

    /// Keeps a finished sequence; returns the sequences that no longer fit (to remove from the
    /// cache). With capacity 0, returns `seq` itself.
    pub fn insert(&mut self, seq: i64, tokens: Vec<i32>) -> Vec<i64> {
        if self.capacity == 0 || tokens.len() < PAGE_SIZE as usize {
            return vec![seq];
        }
        self.entries.push_back(Cached { seq, tokens });
        let mut out = Vec::new();
        while self.entries.len() > self.capacity {
            out.extend(self.pop_oldest());
        }
        out
    }

    /// Removes the oldest entry; returns its sequence.
    pub fn pop_oldest(&mut self) -> Option<i64> {
        self.entries.pop_front().map(|c| c.seq)
    }

    /// Marks `seq` as just used (it is removed last).
    pub fn touch(&mut self, seq: i64) {
        if let Some(i) = self.entries.iter().position(|c| c.seq == seq) {
            let c = self.entries.remove(i).expect("found");
            self.entries.push_back(c);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The longest shared prefix of `want` among `candidates` (sequence, tokens in its KV cache),
/// worth a fork: at least a page, and leaving at least one token of `want` to compute (its
/// logits are needed).
pub fn best_hit<'a>(
    want: &[i32],
    candidates: impl IntoIterator<Item = (i64, &'a [i32])>,
) -> Option<Hit> {
    let mut best: Option<Hit> = None;
    for (seq, tokens) in candidates {
        let len = common_prefix(want, tokens).min(want.len().saturating_sub(1));
        if len >= PAGE_SIZE as usize && best.is_none_or(|b| len > b.len) {
            best = Some(Hit { seq, len });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_need_a_page_and_leave_a_token() {
        let a: Vec<i32> = (0..40).collect();
        let mut b = a[..20].to_vec();
        b.push(99);
        assert_eq!(best_hit(&a[..10], [(1, &a[..])]), None);
        assert_eq!(
            best_hit(&a[..30], [(1, &a[..])]),
            Some(Hit { seq: 1, len: 29 })
        );
        assert_eq!(
            best_hit(&a, [(1, &b[..]), (2, &a[..17])]),
            Some(Hit { seq: 1, len: 20 })
        );
    }

    #[test]
    fn the_pool_is_bounded_and_lru() {
        let t: Vec<i32> = (0..20).collect();
        let mut p = PrefixPool::new(2);
        assert!(p.insert(1, t.clone()).is_empty());
        assert!(p.insert(2, t.clone()).is_empty());
        p.touch(1);
        assert_eq!(p.insert(3, t.clone()), vec![2]);
        assert_eq!(p.insert(4, t[..3].to_vec()), vec![4]);
        assert_eq!(PrefixPool::new(0).insert(5, t), vec![5]);
    }
}
