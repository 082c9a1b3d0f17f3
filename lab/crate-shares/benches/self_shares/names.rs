//! Function names of both builds, as keys the two profiles and cabprof's reports share.

/// The name of a function of the crate relative to the crate's root, the same for both
/// builds (`inflate::core::decompress` from `miniz_oxide::inflate::core::decompress` and from
/// `cabprof_crate_shares::miniz_oxide::inflate::core::decompress`), or `None` outside it.
/// Hashes, generic arguments and `<T as Trait>` are dropped: cabprof names one function once,
/// whatever its instantiation, and a trait method by its type.
pub(crate) fn key(name: &str) -> Option<String> {
    let name = demangle_legacy(name);
    let name = strip_hash(&name);
    let name = untrait(name);
    let name = drop_generics(&name);
    let at = name.rfind("miniz_oxide::")?;
    let rest = name[at + "miniz_oxide::".len()..].trim_end_matches("::");
    (!rest.is_empty()).then(|| rest.to_string())
}

/// llvm-symbolizer decodes the legacy mangling's `_ZN...E` but not its escapes.
pub(crate) fn demangle_legacy(name: &str) -> String {
    let name = name
        .strip_prefix('_')
        .filter(|n| n.starts_with('$'))
        .unwrap_or(name);
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if c == '$' {
            if let Some(end) = rest[1..].find('$') {
                let code = &rest[1..1 + end];
                let decoded = match code {
                    "LT" => Some('<'),
                    "GT" => Some('>'),
                    "RF" => Some('&'),
                    "BP" => Some('*'),
                    "C" => Some(','),
                    "SP" => Some('@'),
                    "LP" => Some('('),
                    "RP" => Some(')'),
                    _ => code
                        .strip_prefix('u')
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .and_then(char::from_u32),
                };
                if let Some(d) = decoded {
                    out.push(d);
                    rest = &rest[end + 2..];
                    continue;
                }
            }
        }
        if rest.starts_with("..") {
            out.push_str("::");
            rest = &rest[2..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

pub(crate) fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

/// `<T as Trait>::f` → `T::f` (the form cabprof's method table uses, with the module put in
/// front by [`Report::read`]).
pub(crate) fn untrait(name: &str) -> String {
    let Some(inner) = name.strip_prefix('<') else {
        return name.to_string();
    };
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            '>' => {
                let head = &inner[..i];
                let ty = head.split(" as ").next().unwrap_or(head);
                return format!("{ty}{}", &inner[i + 1..]);
            }
            _ => {}
        }
    }
    name.to_string()
}

/// Generic arguments (`<...>`, `::<...>`) out of a path.
pub(crate) fn drop_generics(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.replace("::::", "::")
}

/// The function a closure's name is in (`f` of `f::{{closure}}`, or of the `f::_{{closure}}`
/// the legacy mangling's escapes decode to).
pub(crate) fn closure_owner(name: &str) -> Option<String> {
    let name = demangle_legacy(name);
    let at = ["{{closure}}", "{closure#"]
        .iter()
        .filter_map(|c| name.find(c))
        .min()?;
    Some(
        name[..at]
            .trim_end_matches('_')
            .trim_end_matches("::")
            .to_string(),
    )
}

/// A function of cabprof itself (its entry and exit code, the ring, the analyzers).
pub(crate) fn is_cabprof(name: &str) -> bool {
    let name = untrait(&demangle_legacy(name));
    ["cabprof::", "cabprof_cab::", "cabprof_analyses::"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// What a function of a sample's stack is to the attribution.
pub(crate) enum Role {
    /// A function of the crate: its key.
    Crate(String),
    /// A closure of the crate: the key of the function it is in. A closure's own frame is no
    /// instrumented function: cabprof counts its time in whichever instrumented function runs
    /// it, except that in the profiled build an instrumented function's body is a closure
    /// that cabprof's recorded copy calls: that closure is the function.
    Closure(String),
    /// cabprof's own code (its entry and exit, the ring, the analyzers).
    Cabprof,
    /// Anything else (the standard library, a dependency).
    Other,
}

pub(crate) fn role(name: &str) -> Role {
    let owner = closure_owner(name);
    let of = owner.as_deref().unwrap_or(name);
    match key(of) {
        Some(k) if owner.is_some() => Role::Closure(k),
        Some(k) => Role::Crate(k),
        None if is_cabprof(of) => Role::Cabprof,
        None => Role::Other,
    }
}

impl Role {
    /// The crate's or cabprof's: what decides whose code a sample is in.
    pub(crate) fn decides(&self) -> bool {
        !matches!(self, Role::Other)
    }
}
