//! `std::sort` as GNU libstdc++ implements it (introsort: median-of-three quicksort down to
//! runs of 16, heapsort past twice the log depth, then one insertion sort), written from the
//! algorithm's description. TVM's samplers sort (logit, index) pairs with `std::sort`, which is
//! not stable: among equal logits the order it leaves decides which token is drawn. Following
//! the same steps gives the same order, so tvmrt draws the same token as TVM even on ties.
//!
//! `less(a, b)` must be a strict weak ordering (no NaN keys); the scans are bounded anyway, so
//! a bad ordering gives a wrong order, never an out-of-bounds access.

const THRESHOLD: usize = 16;

/// Sorts `v` by `less` as libstdc++'s `std::sort(v.begin(), v.end(), less)` does.
pub fn sort_by<T: Copy>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = v.len();
    if n < 2 {
        return;
    }
    let depth = 2 * (usize::BITS - 1 - n.leading_zeros()) as usize;
    introsort_loop(v, 0, n, depth, &less);
    final_insertion_sort(v, 0, n, &less);
}

fn introsort_loop<T: Copy>(
    v: &mut [T],
    first: usize,
    mut last: usize,
    mut depth: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    while last - first > THRESHOLD {
        if depth == 0 {
            heap_sort(&mut v[first..last], less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, first, last, less);
        introsort_loop(v, cut, last, depth, less);
        last = cut;
    }
}

fn partition_pivot<T: Copy>(
    v: &mut [T],
    first: usize,
    last: usize,
    less: &impl Fn(&T, &T) -> bool,
) -> usize {
    let mid = first + (last - first) / 2;
    move_median_to_first(v, first, first + 1, mid, last - 1, less);
    unguarded_partition(v, first + 1, last, first, less)
}

fn move_median_to_first<T: Copy>(
    v: &mut [T],
    result: usize,
    a: usize,
    b: usize,
    c: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(result, pick);
}

fn unguarded_partition<T: Copy>(
    v: &mut [T],
    mut first: usize,
    mut last: usize,
    pivot: usize,
    less: &impl Fn(&T, &T) -> bool,
) -> usize {
    loop {
        while first < v.len() && less(&v[first], &v[pivot]) {
            first += 1;
        }
        last -= 1;
        while last > 0 && less(&v[pivot], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn final_insertion_sort<T: Copy>(
    v: &mut [T],
    first: usize,
    last: usize,
    less: &impl Fn(&T, &T) -> bool,
) {
    if last - first > THRESHOLD {
        insertion_sort(v, first, first + THRESHOLD, less);
        for i in first + THRESHOLD..last {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, first, last, less);
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], first: usize, last: usize, less: &impl Fn(&T, &T) -> bool) {
    if first == last {
        return;
    }
    for i in first + 1..last {
        if less(&v[i], &v[first]) {
            let val = v[i];
            v.copy_within(first..i, first + 1);
            v[first] = val;
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

fn unguarded_linear_insert<T: Copy>(v: &mut [T], mut last: usize, less: &impl Fn(&T, &T) -> bool) {
    let val = v[last];
    while last > 0 && less(&val, &v[last - 1]) {
        v[last] = v[last - 1];
        last -= 1;
    }
    v[last] = val;
}

/// `std::make_heap` then `std::sort_heap` (libstdc++'s `__partial_sort` of the whole range).
fn heap_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len >= 2 {
        let mut parent = (len - 2) / 2;
        loop {
            let val = v[parent];
            adjust_heap(v, parent, len, val, less);
            if parent == 0 {
                break;
            }
            parent -= 1;
        }
    }
    let mut last = len;
    while last > 1 {
        last -= 1;
        let val = v[last];
        v[last] = v[0];
        adjust_heap(v, 0, last, val, less);
    }
}

fn adjust_heap<T: Copy>(
    v: &mut [T],
    mut hole: usize,
    len: usize,
    val: T,
    less: &impl Fn(&T, &T) -> bool,
) {
    let top = hole;
    let mut child = hole;
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len & 1 == 0 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    // push_heap
    let mut parent = hole.wrapping_sub(1) / 2;
    while hole > top && less(&v[parent], &val) {
        v[hole] = v[parent];
        hole = parent;
        parent = hole.wrapping_sub(1) / 2;
    }
    v[hole] = val;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn sorts_like_a_sort() {
        let mut seed = 7;
        for n in [0, 1, 2, 3, 15, 16, 17, 100, 1000, 5000] {
            let mut v: Vec<(i32, usize)> =
                (0..n).map(|i| ((lcg(&mut seed) % 50) as i32, i)).collect();
            let mut want = v.clone();
            sort_by(&mut v, |a, b| a.0 > b.0);
            want.sort_by_key(|a| std::cmp::Reverse(a.0));
            let keys: Vec<i32> = v.iter().map(|x| x.0).collect();
            let want_keys: Vec<i32> = want.iter().map(|x| x.0).collect();
            assert_eq!(keys, want_keys, "n = {n}");
            let mut idx: Vec<usize> = v.iter().map(|x| x.1).collect();
            idx.sort();
            assert_eq!(idx, (0..n).collect::<Vec<_>>(), "a permutation");
        }
    }

    #[test]
    fn heap_sort_sorts() {
        let mut seed = 3;
        let mut v: Vec<u64> = (0..257).map(|_| lcg(&mut seed) % 1000).collect();
        let mut want = v.clone();
        heap_sort(&mut v, &|a: &u64, b: &u64| a < b);
        want.sort();
        assert_eq!(v, want);
    }

    #[test]
    fn ties_are_left_in_libstdcxx_order() {
        // All keys equal: libstdc++ leaves a specific permutation (recorded from g++ 12's
        // std::sort of pairs (0, i) with `a.first > b.first` for n = 40).
        let mut v: Vec<(i32, usize)> = (0..40).map(|i| (0, i)).collect();
        sort_by(&mut v, |a, b| a.0 > b.0);
        let idx: Vec<usize> = v.iter().map(|x| x.1).collect();
        assert_eq!(idx, TIES_40.to_vec());
    }

    /// What g++ 12's std::sort leaves for 40 equal keys (see the test above).
    const TIES_40: [usize; 40] = [
        30, 21, 22, 23, 24, 25, 26, 27, 28, 29, 20, 31, 32, 33, 34, 35, 36, 37, 38, 39, 10, 1, 2,
        3, 4, 5, 6, 7, 8, 9, 0, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    ];
}
