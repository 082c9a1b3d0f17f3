//! Method names and decoded paths for reports, from the registry the instrumentation fills
//! (`cabprof_cab::registry`): reports print names and source lines, never raw ids.
//!
//! A leaf: it reads the registry and returns plain values; the report conversion and the
//! path analysis's descriptor turn them into report data.

use cabprof_cab::event::MethodId;

/// What the registry knows of one method.
pub(crate) struct MethodName {
    /// Qualified name (with its `impl` type for methods).
    pub(crate) name: String,
    /// `module_path!()` of its definition.
    pub(crate) module: &'static str,
    /// Source file.
    pub(crate) file: &'static str,
    /// Source line.
    pub(crate) line: u32,
}

/// The registry's entry for `id`, or `None` if it is unknown (for instance a report rebuilt
/// from events of another process).
pub(crate) fn lookup(id: u32) -> Option<MethodName> {
    let info = cabprof_cab::registry::lookup(MethodId::new(id).ok()?)?;
    Some(MethodName {
        name: info.qualified_name(),
        module: info.module_path,
        file: info.file,
        line: info.line,
    })
}

/// Path `path` of `method` as readable steps with source lines, if its numbering is known.
pub(crate) fn decode_path(method: MethodId, path: u32) -> Option<Vec<String>> {
    cabprof_cab::registry::decode_path(method, path)
        .map(|steps| steps.iter().map(|s| s.to_string()).collect())
}
