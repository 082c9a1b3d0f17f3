//! cabprof: concurrent dynamic analysis for Rust, built on CAB (Cache-friendly Asymmetric
//! Buffering, Ha et al., OOPSLA 2009).
//!
//! This facade re-exports the ring and runtime ([`cab`]), the analyses ([`analyses`]) and the
//! instrumentation attribute, and will hold the report writers and the command-line tool.

pub use analyses;
pub use cab;
pub use cab::event::{Event, EventKind, MethodId};
pub use cab::{ConfigError, Mode, RingConfig};
