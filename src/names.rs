//! Names for reports: method names and decoded paths, from the registry the instrumentation
//! fills (`cabprof_cab::registry`), so that reports print names and source lines, never raw
//! ids; and the program's own name, which reports and served profiles are named after.
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
        name: readable(&info.qualified_name(), info.module_path),
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

/// One naming for trait methods, whatever form the compiler's type name took: `<Type as
/// Trait>::method` (the form of Rust's own backtraces), the trait by its last path segment
/// (`Display`, not `core::fmt::Display`), the type without the function's own module prefix.
/// `<impl Trait for Type>::method` is rewritten to the same form.
pub(crate) fn readable(name: &str, module: &str) -> String {
    let Some(rest) = name.strip_prefix('<') else {
        return name.to_string();
    };
    // The `<…>` head: find its closing `>` at nesting depth zero.
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in rest.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if depth == 0 => {
                close = Some(i);
                break;
            }
            '>' => depth -= 1,
            _ => {}
        }
    }
    let Some(close) = close else {
        return name.to_string();
    };
    let (head, tail) = (&rest[..close], &rest[close + 1..]);
    let (ty, tr) = if let Some(impl_) = head.strip_prefix("impl ") {
        match split_top(impl_, " for ") {
            Some((tr, ty)) => (ty, tr),
            None => return name.to_string(),
        }
    } else {
        match split_top(head, " as ") {
            Some((ty, tr)) => (ty, tr),
            None => return name.to_string(),
        }
    };
    let ty = ty
        .strip_prefix(module)
        .and_then(|t| t.strip_prefix("::"))
        .unwrap_or(ty);
    format!("<{ty} as {}>{tail}", last_segment(tr))
}

/// Split `s` at the first `sep` outside angle brackets.
fn split_top<'a>(s: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(sep) => {
                return Some((&s[..i], &s[i + sep.len()..]));
            }
            _ => {}
        }
    }
    None
}

/// `core::fmt::Display` → `Display`; `a::Tr<b::X>` → `Tr<b::X>` (generic arguments kept).
fn last_segment(path: &str) -> &str {
    let base_end = path.find('<').unwrap_or(path.len());
    match path[..base_end].rfind("::") {
        Some(i) => &path[i + 2..],
        None => path,
    }
}

/// The executable's name without the `-<16 hex digits>` cargo gives test binaries.
pub(crate) fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(|p| p.file_stem())
        .map_or_else(|| "cabprof".into(), |s| s.to_string_lossy().into_owned());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem,
    }
}

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn trait_methods_read_one_way() {
        assert_eq!(
            readable("<app::Foo as core::fmt::Display>::fmt", "app"),
            "<Foo as Display>::fmt"
        );
        assert_eq!(
            readable("<impl core::fmt::Display for app::Foo>::fmt", "app"),
            "<Foo as Display>::fmt"
        );
        assert_eq!(
            readable("<app::G<_> as core::ops::drop::Drop>::drop", "app"),
            "<G<_> as Drop>::drop"
        );
        assert_eq!(
            readable("<other::T as app::Conv<u8>>::conv", "app"),
            "<other::T as Conv<u8>>::conv"
        );
        assert_eq!(readable("Stack<_>::push", "app"), "Stack<_>::push");
        assert_eq!(readable("app::f", "app"), "app::f");
    }
}
