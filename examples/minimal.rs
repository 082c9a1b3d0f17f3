//! The smallest profiled program: the attribute, and nothing else in the code.
//!
//! ```text
//! CABPROF=1 cargo run --release --example minimal   # writes target/cabprof/minimal.{json,txt}
//! cargo run --release --example minimal             # not profiled: one load and a branch per call
//! ```

#[cabprof::profile]
fn fib(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

fn main() {
    println!("fib(25) = {}", fib(25));
}
