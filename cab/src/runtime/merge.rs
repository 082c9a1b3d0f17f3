//! Folding analyses' results together: what the analyzers and the session both do with the
//! parts they collect.

use super::EventAnalysis;

/// Fold `other` (if any) into `acc` with `merge`; into nothing, `other` is taken as it is,
/// not merged into an empty instance (that would copy it: for a deep calling-context tree,
/// double the analysis' memory at `finish`).
pub fn merge_options<T>(acc: &mut Option<T>, other: Option<T>, merge: impl FnOnce(&mut T, T)) {
    match (acc.as_mut(), other) {
        (Some(a), Some(o)) => merge(a, o),
        (None, o) => *acc = o,
        (Some(_), None) => {}
    }
}

/// [`merge_options`] of two analyses' results.
pub(super) fn merge_into<A: EventAnalysis>(acc: &mut Option<A>, other: Option<A>) {
    merge_options(acc, other, A::merge);
}
