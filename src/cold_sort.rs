//! One stable sort for the code that sorts rarely and little (names, lists for messages, device
//! lists, report rows): each `slice::sort_by` with its own element type or comparator is a copy
//! of the standard library's driftsort (8-12 KB of code each; BENCHMARKS.md, "Library size").
//! These all share one copy: the sort runs over indices with the comparison behind a `dyn`
//! call, then the elements move into place. The sorts on a model's path have their own:
//! contrib's sort, argsort, topk and unique sort (order key, index) pairs of every dtype with
//! one sort (`contrib::elements::sort_pairs`), the LLM samplers follow libstdc++'s `std::sort`
//! (`llm::std_sort`); the global registry, which names only the core (`function`, `value`,
//! `error`: CI checks it), keeps the standard sort. [`ordered`] builds ordered maps and sets
//! without the sort their `collect` runs.

use std::cmp::Ordering;

/// The order of `len` elements, stably sorted by `cmp` on their indices (the one copy).
pub(crate) fn sorted_order(len: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// `v.sort_by(cmp)`, stable, through the shared sort.
pub fn sort_by<T>(v: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = sorted_order(v.len(), &|a, b| cmp(&v[a], &v[b]));
    let mut slots: Vec<Option<T>> = std::mem::take(v).into_iter().map(Some).collect();
    v.extend(order.into_iter().filter_map(|i| slots[i].take()));
}

/// `v.sort()`, stable, through the shared sort.
pub fn sort<T: Ord>(v: &mut Vec<T>) {
    sort_by(v, T::cmp);
}

/// `v.sort_by_key(key)`, stable, through the shared sort.
pub fn sort_by_key<T, K: Ord>(v: &mut Vec<T>, key: impl Fn(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// `iter.collect()` into an ordered map or set (`BTreeMap`, `BTreeSet`, `serde_json::Map`)
/// without the sort: `FromIterator` sorts its input first, one copy of the standard sort for
/// each key, value and iterator type (5-6 KB each); inserting one by one (`Extend`) builds the
/// same collection (of equal keys, the later value stays in both).
pub fn ordered<C: Default + Extend<T>, T>(iter: impl IntoIterator<Item = T>) -> C {
    let mut c = C::default();
    c.extend(iter);
    c
}

#[cfg(test)]
mod tests {
    #[test]
    fn stable_as_the_standard_sort() {
        let mut v: Vec<(u8, usize)> = (0..200).map(|i| ((i * 37 % 11) as u8, i)).collect();
        let mut want = v.clone();
        want.sort_by_key(|p| p.0);
        super::sort_by_key(&mut v, |p| p.0);
        assert_eq!(v, want);
        let mut s = vec!["b".to_string(), "a".into(), "c".into()];
        super::sort(&mut s);
        assert_eq!(s, ["a", "b", "c"]);
        let mut e: Vec<u8> = Vec::new();
        super::sort(&mut e);
        assert!(e.is_empty());
    }
}
