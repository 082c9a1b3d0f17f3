//! The one contract between the runtime and an analysis.
//!
//! It lives outside [`runtime`](crate::runtime) because the analyses (`cabprof_analyses`)
//! implement it without using the runtime: they only need the event layout, and the same
//! code runs inline in the application thread or on an analyzer thread.

/// A dynamic analysis over CAB event words: a plain single-threaded consumer that the
/// runtime runs, one instance per stream.
///
/// Results never depend on where the stream is cut (consuming `a` then `b` equals consuming
/// `a ++ b`), because a ring hands over chunks of any size.
pub trait EventAnalysis: Send + 'static {
    /// Analyze the next words of this instance's stream (any length; chunk boundaries carry
    /// no meaning). Words of kinds the analysis does not use, and words that are not events,
    /// are skipped.
    fn consume(&mut self, words: &[u64]);

    /// Fold `other`'s results into `self` (its in-flight state, such as open frames, is
    /// dropped).
    fn merge(&mut self, other: Self)
    where
        Self: Sized;
}
