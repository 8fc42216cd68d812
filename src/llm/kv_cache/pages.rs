//! The free-page list of the paged KV cache, with an undo journal so a batch that fails
//! half-way (no page left for its last sequence) can give back exactly the pages it took.

use crate::error::{Error, Result};

enum PageOp {
    Popped(i32),
    Pushed,
}

/// Free page ids, used as a stack (TVM's `free_page_ids_`: the last freed page is reused
/// first, and a new cache hands out page 0 first).
#[derive(Default)]
pub struct FreePages {
    ids: Vec<i32>,
    journal: Option<Vec<PageOp>>,
}

impl FreePages {
    /// All of `0..num_pages` free.
    pub fn all(num_pages: i64) -> FreePages {
        FreePages {
            ids: (0..num_pages as i32).rev().collect(),
            journal: None,
        }
    }

    /// Number of free pages.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no page is free.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Takes a page (`GetFreePage`).
    pub fn pop(&mut self) -> Result<i32> {
        let id = self
            .ids
            .pop()
            .ok_or_else(|| Error::runtime("The KV cache is full. No page can be allocated."))?;
        if let Some(j) = &mut self.journal {
            j.push(PageOp::Popped(id));
        }
        Ok(id)
    }

    /// Gives a page back.
    pub fn push(&mut self, id: i32) {
        self.ids.push(id);
        if let Some(j) = &mut self.journal {
            j.push(PageOp::Pushed);
        }
    }

    /// Starts recording changes so [`FreePages::rollback`] can undo them.
    pub fn begin(&mut self) {
        self.journal = Some(Vec::new());
    }

    /// Keeps the changes made since [`FreePages::begin`].
    pub fn commit(&mut self) {
        self.journal = None;
    }

    /// Undoes the changes made since [`FreePages::begin`].
    pub fn rollback(&mut self) {
        let Some(journal) = self.journal.take() else {
            return;
        };
        for op in journal.into_iter().rev() {
            match op {
                PageOp::Popped(id) => self.ids.push(id),
                PageOp::Pushed => {
                    self.ids.pop();
                }
            }
        }
    }

    /// A copy of the list (for snapshots of rare operations).
    pub fn snapshot(&self) -> Vec<i32> {
        self.ids.clone()
    }

    /// Restores a snapshot.
    pub fn restore(&mut self, ids: Vec<i32>) {
        self.ids = ids;
        self.journal = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_out_lowest_first_and_rollback_restores_order() {
        let mut f = FreePages::all(4);
        assert_eq!(f.pop().unwrap(), 0);
        f.begin();
        assert_eq!(f.pop().unwrap(), 1);
        f.push(0);
        assert_eq!(f.pop().unwrap(), 0);
        assert_eq!(f.pop().unwrap(), 2);
        f.rollback();
        assert_eq!(f.snapshot(), vec![3, 2, 1]);
        assert_eq!(f.pop().unwrap(), 1);
        f.pop().unwrap();
        f.pop().unwrap();
        let e = f.pop().unwrap_err();
        assert_eq!(e.message, "The KV cache is full. No page can be allocated.");
    }
}
