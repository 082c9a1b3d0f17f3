//! Workload 3, recursive and memory-heavy: merge sort and quicksort of the same fixed-seed
//! array of `u64`s (with duplicates), checked against each other.
//!
//! Merge sort is top-down with a scratch buffer and an insertion-sort cutoff; quicksort uses a
//! median-of-three pivot, Lomuto partitioning, recursion on the smaller side and a loop on the
//! larger, and the same cutoff.
//!
//! Instrumentation: the element-moving kernels `merge`, `partition` and `insertion_sort` are
//! `#[profile(memory)]` (every index expression is a memory event: the cache simulator's
//! input); the recursive drivers `merge_sort` and `quick_sort` are `#[profile]`; the pivot
//! choice `median_of_three` is `#[profile(paths)]`.

use crate::rng::Rng;
use crate::Size;

/// Elements sorted (by each algorithm) at `size`.
pub fn len(size: Size) -> usize {
    size.pick(5_000, 100_000, 1_200_000)
}

/// The input for `size`: uniform values in `0..4n` (so some repeat).
pub fn input(size: Size) -> Vec<u64> {
    let n = len(size);
    let mut rng = Rng::new(0x5027_0001);
    (0..n).map(|_| rng.below(4 * n as u64)).collect()
}

/// Below this length both sorts finish with insertion sort.
pub const CUTOFF: usize = 24;

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use super::CUTOFF;
        use crate::rng::mix;
        use crate::Size;

        $(#[$memory])?
        fn insertion_sort(v: &mut [u64]) {
            for i in 1..v.len() {
                let x = v[i];
                let mut j = i;
                while j > 0 && v[j - 1] > x {
                    v[j] = v[j - 1];
                    j -= 1;
                }
                v[j] = x;
            }
        }

        /// Merge the sorted halves `v[..mid]` and `v[mid..]` through `buf` (same length).
        $(#[$memory])?
        fn merge(v: &mut [u64], mid: usize, buf: &mut [u64]) {
            let n = v.len();
            for i in 0..n {
                buf[i] = v[i];
            }
            let (mut i, mut j, mut k) = (0, mid, 0);
            while i < mid && j < n {
                if buf[i] <= buf[j] {
                    v[k] = buf[i];
                    i += 1;
                } else {
                    v[k] = buf[j];
                    j += 1;
                }
                k += 1;
            }
            // If the right run ran out first, copy the rest of the left one; if the left one
            // did, the right one's tail is already in place.
            while i < mid {
                v[k] = buf[i];
                i += 1;
                k += 1;
            }
        }

        $(#[$call])?
        fn merge_sort(v: &mut [u64], buf: &mut [u64]) {
            let n = v.len();
            if n <= CUTOFF {
                insertion_sort(v);
                return;
            }
            let mid = n / 2;
            {
                let (a, b) = v.split_at_mut(mid);
                let (ba, bb) = buf.split_at_mut(mid);
                merge_sort(a, ba);
                merge_sort(b, bb);
            }
            if v[mid - 1] > v[mid] {
                merge(v, mid, buf);
            }
        }

        /// The index (of `a`, `b`, `c`) holding the median of the three values.
        $(#[$paths])?
        fn median_of_three(v: &[u64], a: usize, b: usize, c: usize) -> usize {
            let (x, y, z) = (v[a], v[b], v[c]);
            if x < y {
                if y < z {
                    b
                } else if x < z {
                    c
                } else {
                    a
                }
            } else if x < z {
                a
            } else if y < z {
                c
            } else {
                b
            }
        }

        /// Partition around a median-of-three pivot; returns the pivot's final index.
        // Swaps are written out as index expressions so `memory` sees every access.
        #[allow(clippy::manual_swap)]
        $(#[$memory])?
        fn partition(v: &mut [u64]) -> usize {
            let n = v.len();
            let m = median_of_three(v, 0, n / 2, n - 1);
            let pivot = v[m];
            v[m] = v[n - 1];
            v[n - 1] = pivot;
            let mut store = 0;
            for i in 0..n - 1 {
                let x = v[i];
                if x < pivot {
                    v[i] = v[store];
                    v[store] = x;
                    store += 1;
                }
            }
            v[n - 1] = v[store];
            v[store] = pivot;
            store
        }

        $(#[$call])?
        fn quick_sort(v: &mut [u64]) {
            let mut v = v;
            loop {
                if v.len() <= CUTOFF {
                    insertion_sort(v);
                    return;
                }
                let p = partition(v);
                let (lo, hi) = v.split_at_mut(p);
                let hi = &mut hi[1..];
                if lo.len() < hi.len() {
                    quick_sort(lo);
                    v = hi;
                } else {
                    quick_sort(hi);
                    v = lo;
                }
            }
        }

        /// Sort the input for `size` both ways; the checksum of the sorted array.
        pub fn run(size: Size) -> u64 {
            let input = super::input(std::hint::black_box(size));
            let mut a = input.clone();
            let mut buf = vec![0u64; a.len()];
            merge_sort(&mut a, &mut buf);
            let mut b = input;
            quick_sort(&mut b);
            assert!(a == b, "merge sort and quicksort disagree");
            assert!(a.windows(2).all(|w| w[0] <= w[1]), "not sorted");
            let mut h = a.len() as u64;
            let mut acc = 0u64;
            for (i, &x) in a.iter().enumerate() {
                acc = acc.wrapping_mul(31).wrapping_add(x ^ i as u64);
            }
            h = mix(h, acc);
            mix(h, a[a.len() / 2])
        }
    };
}

twins!(code);
