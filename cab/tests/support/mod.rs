//! What several of the runtime's integration tests share.

use cabprof_cab::runtime::EventAnalysis;

/// The least analysis: how many words it was given.
#[derive(Default)]
pub(crate) struct Count(pub(crate) u64);

impl EventAnalysis for Count {
    fn consume(&mut self, words: &[u64]) {
        self.0 += words.len() as u64;
    }
    fn merge(&mut self, other: Self) {
        self.0 += other.0;
    }
}
