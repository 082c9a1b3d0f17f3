//! The workload on the annotated copy of miniz_oxide 0.9.1. Run it with `CABPROF=1
//! CABPROF_ANALYSES=time` (and `CABPROF_OUTPUT=<file>.json`): the first instrumented call
//! starts a process-wide session and the report is written at exit. Without `CABPROF` it runs
//! with profiling idle.

fn main() {
    cabprof_crate_shares::run::<cabprof_crate_shares::Profiled>();
}
