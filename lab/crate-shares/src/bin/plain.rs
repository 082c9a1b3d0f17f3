//! The workload on miniz_oxide 0.9.1 from crates.io: what `perf record` samples in
//! `benches/self_shares/`, and the wall times cabprof's figures are compared with.

fn main() {
    cabprof_crate_shares::run::<cabprof_crate_shares::Plain>();
}
