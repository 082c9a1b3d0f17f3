//! Workload 5, memory stress: dense `f64` matrix multiply, naive (i-j-k, a column walk of `B`)
//! and blocked (32×32 tiles, i-k-j inside a tile), checked against each other.
//!
//! Entries are small integers, so every sum is exact and the two products agree to the bit.
//!
//! Instrumentation: the kernels `naive` and `tile` are `#[profile(memory)]` — every
//! `a[i * n + k]`-style index expression is a memory event, the cache simulator's stress test
//! (the naive kernel's stride-`n` walk of `B` misses where the blocked one hits); the tile
//! driver `blocked` is `#[profile]`.

use crate::rng::Rng;
use crate::Size;

/// Matrix dimension at `size`.
pub fn dim(size: Size) -> usize {
    size.pick(48, 192, 448)
}

/// Tile edge of the blocked kernel.
pub const TILE: usize = 32;

/// `(A, B)`, row-major `n × n`, entries in `0..16`.
pub fn inputs(size: Size) -> (Vec<f64>, Vec<f64>) {
    let n = dim(size);
    let mut rng = Rng::new(0x3A7_819C);
    let mut gen = || (0..n * n).map(|_| rng.below(16) as f64).collect::<Vec<_>>();
    let a = gen();
    let b = gen();
    (a, b)
}

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use super::TILE;
        use crate::rng::mix;
        use crate::Size;

        $(#[$memory])?
        fn naive(a: &[f64], b: &[f64], c: &mut [f64], n: usize) {
            for i in 0..n {
                for j in 0..n {
                    let mut s = 0.0;
                    for k in 0..n {
                        s += a[i * n + k] * b[k * n + j];
                    }
                    c[i * n + j] = s;
                }
            }
        }

        /// `C[i0.., j0..] += A[i0.., k0..] · B[k0.., j0..]` over one tile.
        $(#[$memory])?
        fn tile(a: &[f64], b: &[f64], c: &mut [f64], n: usize, i0: usize, k0: usize, j0: usize) {
            let (i1, k1, j1) = ((i0 + TILE).min(n), (k0 + TILE).min(n), (j0 + TILE).min(n));
            for i in i0..i1 {
                for k in k0..k1 {
                    let aik = a[i * n + k];
                    for j in j0..j1 {
                        c[i * n + j] += aik * b[k * n + j];
                    }
                }
            }
        }

        $(#[$call])?
        fn blocked(a: &[f64], b: &[f64], c: &mut [f64], n: usize) {
            for i0 in (0..n).step_by(TILE) {
                for k0 in (0..n).step_by(TILE) {
                    for j0 in (0..n).step_by(TILE) {
                        tile(a, b, c, n, i0, k0, j0);
                    }
                }
            }
        }

        /// Multiply the inputs for `size` both ways; the checksum of the product.
        pub fn run(size: Size) -> u64 {
            let n = super::dim(std::hint::black_box(size));
            let (a, b) = super::inputs(size);
            let mut c1 = vec![0.0; n * n];
            naive(&a, &b, &mut c1, n);
            let mut c2 = vec![0.0; n * n];
            blocked(&a, &b, &mut c2, n);
            assert!(c1 == c2, "naive and blocked products differ");
            let mut h = n as u64;
            for row in c1.chunks(n) {
                let mut acc = 0u64;
                for x in row {
                    acc = acc.wrapping_mul(31).wrapping_add(x.to_bits());
                }
                h = mix(h, acc);
            }
            h
        }
    };
}

twins!(code);
