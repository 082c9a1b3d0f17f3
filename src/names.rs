//! Method names and decoded paths for reports, from the registry the instrumentation fills
//! (`cab::registry`): reports print names and source lines, never raw ids.

use crate::report::MethodEntry;
use cab::event::MethodId;

/// The registry's entry for `id`, or a placeholder naming the id if it is unknown (for
/// instance a report rebuilt from events of another process).
pub(crate) fn method_entry(id: u32) -> MethodEntry {
    let info = MethodId::new(id).ok().and_then(cab::registry::lookup);
    match info {
        Some(m) => MethodEntry {
            id,
            name: m.qualified_name(),
            module: m.module_path.to_string(),
            file: m.file.to_string(),
            line: m.line,
        },
        None => MethodEntry {
            id,
            name: format!("method#{id}"),
            module: String::new(),
            file: String::new(),
            line: 0,
        },
    }
}

/// Path `path` of `method` as readable steps with source lines, if its numbering is known.
pub(crate) fn decode_path(method: MethodId, path: u32) -> Option<Vec<String>> {
    cab::registry::decode_path(method, path)
        .map(|steps| steps.iter().map(|s| s.to_string()).collect())
}
