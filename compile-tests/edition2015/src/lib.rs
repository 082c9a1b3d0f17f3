//! Functions of an edition-2015 crate under `#[cabprof::profile]`: a plain one, one with
//! Ball-Larus paths, one with memory accesses, and an `impl`'s methods, in a module.

extern crate cabprof;

/// Sum of the odd numbers below `n`, counted by path.
#[cabprof::profile(paths)]
pub fn odd_sum(n: u64) -> u64 {
    let mut s = 0;
    for i in 0..n {
        if i % 2 == 1 {
            s += i;
        }
    }
    s
}

/// Twice `x`.
#[cabprof::profile]
pub fn twice(x: u64) -> u64 {
    x * 2
}

/// The sum of `v`, its loads recorded.
#[cabprof::profile(memory)]
pub fn total(v: &[u64]) -> u64 {
    let mut s = 0;
    for x in v {
        s += *x;
    }
    s
}

/// A type whose `impl` is annotated.
pub mod counter {
    /// A counter.
    #[derive(Debug, Default)]
    pub struct Counter {
        n: u64,
    }

    #[cabprof::profile]
    impl Counter {
        /// Add `k` and return the count.
        pub fn add(&mut self, k: u64) -> u64 {
            self.n += k;
            for _ in 0..k {
                self.n = ::std::hint::black_box(self.n);
            }
            self.n
        }
    }
}
