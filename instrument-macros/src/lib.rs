//! `#[cabprof::profile]`: the instrumentation attribute (method, call, Ball-Larus path and memory
//! access instrumentation). Re-exported by the `cabprof` facade.
