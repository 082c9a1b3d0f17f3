//! The public API, written down: every item a user of `cabprof`, `cabprof-cab` or
//! `cabprof-analyses` can name, one line each, compared with the committed lists in
//! `tests/public-api/`. A change to the API fails here until the list is regenerated with
//! `CABPROF_BLESS=1 cargo test -p cabprof --test public_api`, so that the change shows in review.
//!
//! The lists come from the sources, read with `syn` (stable Rust; no nightly rustdoc JSON):
//! from each crate's root, every `pub` item of a public module and every `pub use`, followed
//! to the item it names. A line holds the path users write, what the item is (a function's
//! signature, a field's type, a variant's fields, the traits a type implements) and the `cfg`
//! it is built under. `#[doc(hidden)]` items are listed by name only: they are not the API.
//! Items made by a macro (the facade's `Analysis` enum) are listed by name.
//!
//! Its own binary: it reads files and runs none of cabprof, and is the one a developer runs
//! after changing the API.

use quote::ToTokens;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The crates checked: their name as users write it, the root file, the committed list.
const CRATES: &[(&str, &str, &str)] = &[
    ("cabprof", "src/lib.rs", "tests/public-api/cabprof.txt"),
    (
        "cabprof_cab",
        "cab/src/lib.rs",
        "tests/public-api/cabprof-cab.txt",
    ),
    (
        "cabprof_analyses",
        "analyses/src/lib.rs",
        "tests/public-api/cabprof-analyses.txt",
    ),
];

#[test]
fn public_api_matches_the_committed_lists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var("CABPROF_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    for &(name, lib, list) in CRATES {
        let lines = public_items(name, &root.join(lib));
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let path = root.join(list);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        // A glob re-export publishes whatever its module gains: every name is listed by hand.
        for glob in lines.iter().filter(|l| l.starts_with("glob: ")) {
            failures.push(format!(
                "{name}: a glob re-export ({glob}); name the items instead\n"
            ));
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let old: BTreeSet<&str> = committed.lines().collect();
        let new: BTreeSet<&str> = text.lines().collect();
        if old != new {
            let mut diff = format!("{list}: the public API of `{name}` changed\n");
            for gone in old.difference(&new) {
                diff += &format!("- {gone}\n");
            }
            for added in new.difference(&old) {
                diff += &format!("+ {added}\n");
            }
            failures.push(diff);
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nIf the change is meant, write it down: regenerate the lists with\n  \
         CABPROF_BLESS=1 cargo test -p cabprof --test public_api\nand say what changed for \
         users in CHANGELOG.md.",
        failures.join("\n")
    );
}

/// Every builder function [`cabprof::SETTINGS`] names is one of `SessionBuilder`'s: the
/// settings table, and the reference's table made from it, cannot name a function that is gone.
#[cfg(feature = "enabled")]
#[test]
fn each_setting_names_a_builder_function_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lines = public_items("cabprof", &root.join("src/lib.rs"));
    for s in cabprof::SETTINGS.iter().filter(|s| !s.builder.is_empty()) {
        let prefix = format!("cabprof::SessionBuilder::{}: fn {}(", s.builder, s.builder);
        assert!(
            lines.iter().any(|l| l.starts_with(&prefix)),
            "{}: SessionBuilder has no function `{}`",
            s.name,
            s.builder
        );
    }
}

/// The builder's docs name the variable of each function [`cabprof::SETTINGS`] pairs with it,
/// so that the docs a user reads in the builder and the table agree on which is which.
#[cfg(feature = "enabled")]
#[test]
fn each_builder_function_names_its_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = read(&root.join("src/session.rs"));
    let mut docs: HashMap<String, String> = HashMap::new();
    for item in &file.items {
        let syn::Item::Impl(imp) = item else { continue };
        if imp.trait_.is_some() || text(&imp.self_ty) != "SessionBuilder" {
            continue;
        }
        for ii in &imp.items {
            if let syn::ImplItem::Fn(f) = ii {
                let doc: Vec<String> = f
                    .attrs
                    .iter()
                    .filter(|a| a.path().is_ident("doc"))
                    .filter_map(|a| match &a.meta {
                        syn::Meta::NameValue(nv) => match &nv.value {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Str(s),
                                ..
                            }) => Some(s.value()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                docs.insert(f.sig.ident.to_string(), doc.join(" "));
            }
        }
    }
    for s in cabprof::SETTINGS.iter().filter(|s| !s.builder.is_empty()) {
        let doc = docs.get(s.builder).map_or("", String::as_str);
        assert!(
            doc.contains(&format!("`{}`", s.name)) || doc.contains(&format!("`{}=", s.name)),
            "the docs of SessionBuilder::{} do not name `{}`",
            s.builder,
            s.name
        );
    }
}

/// The walker must see what it is meant to see: a `pub` item of a public module, a `pub use`
/// of a private module's item, methods and trait impls; not `pub(crate)`, not a private
/// module's items, not a hidden item's details.
#[test]
fn the_walker_finds_public_items_and_only_those() {
    let dir = std::env::temp_dir().join(format!("cabprof-public-api-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("inner")).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "pub mod open; mod inner; pub use inner::{Made, Shown, helper as renamed};\n\
         pub use inner::deep::*;\n\
         #[doc(hidden)] pub mod __private { pub fn plumbing() {} }\n\
         pub(crate) fn crate_only() {}\n\
         #[cfg(feature = \"x\")] pub const LIMIT: u32 = 3;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("open.rs"),
        "pub struct Open { pub a: u8, b: u8 }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("inner/mod.rs"),
        "pub mod deep;\n#[derive(Clone)] pub struct Shown;\n\
         impl Shown { pub fn new() -> Self { Shown } fn private(&self) {} }\n\
         impl std::fmt::Display for Shown { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) \
         -> std::fmt::Result { Ok(()) } }\n\
         pub fn helper(x: &[u8]) -> Option<u8> { None }\npub struct NotReExported;\n\
         macro_rules! make { () => { pub struct Made; } }\nmake!();\n\
         impl Made { pub fn go() {} }\n",
    )
    .unwrap();
    std::fs::write(dir.join("inner/deep.rs"), "pub enum Deep { A, B(u8) }\n").unwrap();
    let lines = public_items("demo", &dir.join("lib.rs"));
    std::fs::remove_dir_all(&dir).unwrap();
    let expected = [
        "demo::Deep: enum",
        "demo::Deep::A",
        "demo::Deep::B(u8)",
        "demo::LIMIT: const u32 [cfg(feature = \"x\")]",
        "demo::Made: (made by a macro)",
        "demo::Made::go: fn go()",
        "demo::Shown: impl std::fmt::Display",
        "demo::Shown: struct #[derive(Clone)]",
        "demo::Shown::new: fn new() -> Self",
        "demo::__private: mod (hidden)",
        "demo::open: mod",
        "demo::open::Open: struct",
        "demo::open::Open::a: u8",
        "demo::renamed: fn helper(x: &[u8]) -> Option<u8>",
        "glob: demo::* = demo::inner::deep::*",
    ];
    assert_eq!(lines, expected.map(String::from).to_vec());
}

/// A module as read: its items by name, its `use` declarations, its impl blocks.
#[derive(Default)]
struct Module {
    /// Item name -> the item and the cfg it is declared under.
    items: HashMap<String, Vec<(syn::Item, Option<String>)>>,
    /// Child modules by name.
    children: HashMap<String, String>,
    /// `use` declarations: (visibility is `pub`, the path as segments, the name it binds; a
    /// glob binds "*").
    uses: Vec<(bool, Vec<String>, String, Option<String>)>,
    /// Impl blocks, with the cfg they are under.
    impls: Vec<(syn::ItemImpl, Option<String>)>,
}

struct Crate {
    name: String,
    /// Module path (`crate::a::b`) -> module.
    modules: HashMap<String, Module>,
}

/// The public items of the crate whose root file is `lib`, one line each, sorted.
fn public_items(name: &str, lib: &Path) -> Vec<String> {
    let mut krate = Crate {
        name: name.to_string(),
        modules: HashMap::new(),
    };
    let file = read(lib);
    load(&mut krate, "crate", file.items, lib, true, None);
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    list_module(&krate, "crate", name, &mut out, &mut seen);
    out.into_iter().collect()
}

fn read(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// The token text of anything, spaced as people write it.
fn text(t: &impl ToTokens) -> String {
    let mut s = t.to_token_stream().to_string();
    for (from, to) in [
        (" ,", ","),
        (" ;", ";"),
        (" :", ":"),
        (": :", "::"),
        (":: ", "::"),
        (" ::", "::"),
        ("& ", "&"),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" (", "("),
        ("# ", "#"),
        ("' ", "'"),
        ("! ", "!"),
        ("? ", "?"),
        (",)", ")"),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    // Give back the spaces the replacements above took around `->` and `= (`.
    s.replace("->", " -> ")
        .replace("=(", "= (")
        .replace("  ", " ")
        .replace(" ->  ", " -> ")
}

fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        _ => &[],
    }
}

/// The item's `cfg(..)`, joined with its module's.
fn cfg_of(attrs: &[syn::Attribute], outer: &Option<String>) -> Option<String> {
    let own: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .map(|a| text(&a.meta))
        .collect();
    let all: Vec<String> = outer.iter().cloned().chain(own).collect();
    (!all.is_empty()).then(|| all.join(", "))
}

fn hidden(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("doc")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "hidden")
    })
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

/// Read a module's items into `krate`, following `mod x;` to its file.
fn load(
    krate: &mut Crate,
    path: &str,
    items: Vec<syn::Item>,
    file: &Path,
    owns_dir: bool,
    cfg: Option<String>,
) {
    let mut module = Module::default();
    // The directory a `mod x;` here is looked for in: beside `lib.rs`/`mod.rs`, or in a
    // folder named after any other file.
    let dir: PathBuf = if owns_dir {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    for item in items {
        match item {
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                let child = format!("{path}::{name}");
                let child_cfg = cfg_of(&m.attrs, &cfg);
                module.children.insert(name.clone(), child.clone());
                let explicit = m.attrs.iter().find_map(|a| match &a.meta {
                    syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }) => Some(s.value()),
                        _ => None,
                    },
                    _ => None,
                });
                if let Some((_, inner)) = &m.content {
                    load(
                        krate,
                        &child,
                        inner.clone(),
                        file,
                        owns_dir,
                        child_cfg.clone(),
                    );
                } else {
                    let (target, owns) = match explicit {
                        Some(p) => {
                            let t = file.parent().unwrap().join(p);
                            let owns = t.file_name().is_some_and(|f| f == "mod.rs");
                            (t, owns)
                        }
                        None => {
                            let flat = dir.join(format!("{name}.rs"));
                            if flat.exists() {
                                (flat, false)
                            } else {
                                (dir.join(&name).join("mod.rs"), true)
                            }
                        }
                    };
                    let f = read(&target);
                    load(krate, &child, f.items, &target, owns, child_cfg.clone());
                }
                let mut bare = m.clone();
                bare.content = None;
                module
                    .items
                    .entry(name)
                    .or_default()
                    .push((syn::Item::Mod(bare), cfg_of(&m.attrs, &cfg)));
            }
            syn::Item::Use(u) => {
                let public = is_pub(&u.vis);
                let ucfg = cfg_of(&u.attrs, &cfg);
                let ucfg = if hidden(&u.attrs) {
                    Some(ucfg.map_or("hidden".into(), |c| format!("{c}, hidden")))
                } else {
                    ucfg
                };
                flatten_use(&u.tree, Vec::new(), &mut |segs, bind| {
                    module.uses.push((public, segs, bind, ucfg.clone()));
                });
            }
            syn::Item::Impl(i) => {
                let c = cfg_of(&i.attrs, &cfg);
                module.impls.push((i, c));
            }
            other => {
                let name = match &other {
                    syn::Item::Const(i) => i.ident.to_string(),
                    syn::Item::Enum(i) => i.ident.to_string(),
                    syn::Item::Fn(i) => i.sig.ident.to_string(),
                    syn::Item::Static(i) => i.ident.to_string(),
                    syn::Item::Struct(i) => i.ident.to_string(),
                    syn::Item::Trait(i) => i.ident.to_string(),
                    syn::Item::Type(i) => i.ident.to_string(),
                    syn::Item::Union(i) => i.ident.to_string(),
                    syn::Item::Macro(i) => match &i.ident {
                        Some(id) => id.to_string(),
                        None => continue,
                    },
                    _ => continue,
                };
                let c = cfg_of(attrs_of(&other), &cfg);
                module.items.entry(name).or_default().push((other, c));
            }
        }
    }
    krate.modules.insert(path.to_string(), module);
}

fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>, f: &mut impl FnMut(Vec<String>, String)) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, f);
        }
        syn::UseTree::Name(n) => {
            let mut segs = prefix;
            let name = n.ident.to_string();
            if name == "self" {
                let bind = segs.last().cloned().unwrap_or_default();
                f(segs, bind);
            } else {
                segs.push(name.clone());
                f(segs, name);
            }
        }
        syn::UseTree::Rename(r) => {
            let mut segs = prefix;
            if r.ident != "self" {
                segs.push(r.ident.to_string());
            }
            f(segs, r.rename.to_string());
        }
        syn::UseTree::Glob(_) => f(prefix, "*".into()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), f);
            }
        }
    }
}

/// What a path names, seen from module `from`.
enum Target {
    /// A module of this crate.
    Module(String),
    /// An item of this crate: its module and name.
    Item(String, String),
    /// Something outside this crate (or made by a macro): the path as written.
    Outside(String),
}

fn parent(path: &str) -> String {
    path.rsplit_once("::")
        .map_or("crate".into(), |(p, _)| p.into())
}

fn resolve(krate: &Crate, from: &str, segs: &[String], depth: usize) -> Target {
    let written = segs.join("::");
    if depth > 16 || segs.is_empty() {
        return Target::Outside(written);
    }
    let (mut module, rest) = match segs[0].as_str() {
        "crate" => ("crate".to_string(), &segs[1..]),
        "self" => (from.to_string(), &segs[1..]),
        "super" => (parent(from), &segs[1..]),
        _ => (from.to_string(), segs),
    };
    for (i, seg) in rest.iter().enumerate() {
        let last = i + 1 == rest.len();
        if seg == "super" {
            module = parent(&module);
            continue;
        }
        let Some(m) = krate.modules.get(&module) else {
            return Target::Outside(written);
        };
        if let Some(child) = m.children.get(seg) {
            module = child.clone();
            continue;
        }
        if m.items.contains_key(seg) {
            return if last {
                Target::Item(module, seg.clone())
            } else {
                Target::Outside(written)
            };
        }
        // A name brought in by a `use` of that module.
        if let Some((_, target, _, _)) = m.uses.iter().find(|(_, _, bind, _)| bind == seg) {
            match resolve(krate, &module, target, depth + 1) {
                Target::Module(p) if !last => {
                    module = p;
                    continue;
                }
                Target::Outside(t) => {
                    let tail: Vec<String> = rest[i + 1..].to_vec();
                    let mut all = vec![t];
                    all.extend(tail);
                    return Target::Outside(all.join("::"));
                }
                found if last => return found,
                _ => return Target::Outside(written),
            }
        }
        // A crate name or a macro-made item.
        return Target::Outside(written);
    }
    Target::Module(module)
}

/// List the public items of `module`, reached as `public`.
fn list_module(
    krate: &Crate,
    module: &str,
    public: &str,
    out: &mut BTreeSet<String>,
    seen: &mut BTreeSet<(String, String)>,
) {
    if !seen.insert((module.to_string(), public.to_string())) {
        return;
    }
    let m = &krate.modules[module];
    for (name, defs) in &m.items {
        for (item, cfg) in defs {
            if item_is_pub(item) {
                list_item(
                    krate,
                    module,
                    name,
                    item,
                    cfg,
                    &format!("{public}::{name}"),
                    out,
                    seen,
                );
            }
        }
    }
    for (public_use, segs, bind, cfg) in &m.uses {
        if !public_use {
            continue;
        }
        let at = format!("{public}::{bind}");
        let is_hidden = cfg.as_deref().is_some_and(|c| c.ends_with("hidden"));
        if bind == "*" {
            out.insert(format!("glob: {at} = {}", glob_text(krate, module, segs)));
            if let Target::Module(p) = resolve(krate, module, segs, 0) {
                list_module(krate, &p, public, out, seen);
            }
            continue;
        }
        if is_hidden {
            out.insert(format!("{at}: (hidden)"));
            continue;
        }
        match resolve(krate, module, segs, 0) {
            Target::Module(p) => {
                out.insert(with_cfg(format!("{at}: mod"), cfg));
                list_module(krate, &p, &at, out, seen);
            }
            Target::Item(p, n) => {
                for (item, icfg) in &krate.modules[&p].items[&n] {
                    let c = icfg.clone().or_else(|| cfg.clone());
                    list_item(krate, &p, &n, item, &c, &at, out, seen);
                }
            }
            Target::Outside(path) => {
                // A name of one of this crate's modules that no item declares: made by a
                // macro there. Listed with the functions its impl blocks add.
                let (dir, item) = segs.split_at(segs.len() - 1);
                match resolve(krate, module, dir, 0) {
                    Target::Module(p) if !dir.is_empty() => {
                        out.insert(with_cfg(format!("{at}: (made by a macro)"), cfg));
                        list_impls(krate, &p, &item[0], cfg, &at, out);
                    }
                    _ => {
                        out.insert(with_cfg(format!("{at}: use {path}"), cfg));
                    }
                }
            }
        }
    }
}

fn glob_text(krate: &Crate, module: &str, segs: &[String]) -> String {
    match resolve(krate, module, segs, 0) {
        Target::Module(p) => format!("{}::*", p.replacen("crate", &krate.name, 1)),
        Target::Item(p, n) => format!("{p}::{n}::*"),
        Target::Outside(t) => format!("{t}::*"),
    }
}

fn item_is_pub(item: &syn::Item) -> bool {
    match item {
        syn::Item::Const(i) => is_pub(&i.vis),
        syn::Item::Enum(i) => is_pub(&i.vis),
        syn::Item::Fn(i) => is_pub(&i.vis),
        syn::Item::Mod(i) => is_pub(&i.vis),
        syn::Item::Static(i) => is_pub(&i.vis),
        syn::Item::Struct(i) => is_pub(&i.vis),
        syn::Item::Trait(i) => is_pub(&i.vis),
        syn::Item::Type(i) => is_pub(&i.vis),
        syn::Item::Union(i) => is_pub(&i.vis),
        // `#[macro_export]` macros are at the crate root whatever their module.
        syn::Item::Macro(i) => i.attrs.iter().any(|a| a.path().is_ident("macro_export")),
        _ => false,
    }
}

fn with_cfg(line: String, cfg: &Option<String>) -> String {
    match cfg {
        Some(c) => format!("{line} [{c}]"),
        None => line,
    }
}

fn derives(attrs: &[syn::Attribute]) -> String {
    let list: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .map(|a| text(&a.meta))
        .collect();
    if list.is_empty() {
        String::new()
    } else {
        format!(" #[{}]", list.join(", "))
    }
}

fn strip_attrs_fields(fields: &mut syn::Fields) {
    for f in fields.iter_mut() {
        f.attrs.clear();
    }
}

#[allow(clippy::too_many_arguments)]
fn list_item(
    krate: &Crate,
    module: &str,
    name: &str,
    item: &syn::Item,
    cfg: &Option<String>,
    at: &str,
    out: &mut BTreeSet<String>,
    seen: &mut BTreeSet<(String, String)>,
) {
    if hidden(attrs_of(item)) {
        let kind = match item {
            syn::Item::Mod(_) => "mod (hidden)",
            _ => "(hidden)",
        };
        out.insert(with_cfg(format!("{at}: {kind}"), cfg));
        return;
    }
    let mut line = |s: String| {
        out.insert(with_cfg(s, cfg));
    };
    match item {
        syn::Item::Mod(_) => {
            line(format!("{at}: mod"));
            list_module(krate, &format!("{module}::{name}"), at, out, seen);
            return;
        }
        syn::Item::Fn(f) => line(format!("{at}: {}", text(&f.sig))),
        syn::Item::Const(c) => line(format!("{at}: const {}", text(&c.ty))),
        syn::Item::Static(s) => line(format!("{at}: static {}", text(&s.ty))),
        syn::Item::Type(t) => line(format!("{at}: type{} = {}", text(&t.generics), text(&t.ty))),
        syn::Item::Macro(_) => line(format!("{at}: macro")),
        syn::Item::Struct(s) => {
            line(format!(
                "{at}: struct{}{}",
                text(&s.generics),
                derives(&s.attrs)
            ));
            for (i, f) in s.fields.iter().enumerate() {
                if is_pub(&f.vis) {
                    let field = f.ident.as_ref().map_or(i.to_string(), |id| id.to_string());
                    line(format!("{at}::{field}: {}", text(&f.ty)));
                }
            }
        }
        syn::Item::Union(u) => line(format!("{at}: union{}", text(&u.generics))),
        syn::Item::Enum(e) => {
            line(format!(
                "{at}: enum{}{}",
                text(&e.generics),
                derives(&e.attrs)
            ));
            for v in &e.variants {
                let mut v = v.clone();
                v.attrs.clear();
                strip_attrs_fields(&mut v.fields);
                line(format!("{at}::{}", text(&v)));
            }
        }
        syn::Item::Trait(t) => {
            line(format!("{at}: trait{}", text(&t.generics)));
            for ti in &t.items {
                match ti {
                    syn::TraitItem::Fn(f) => {
                        line(format!("{at}::{}: {}", f.sig.ident, text(&f.sig)))
                    }
                    syn::TraitItem::Type(ty) => line(format!("{at}::{}: type", ty.ident)),
                    syn::TraitItem::Const(c) => {
                        line(format!("{at}::{}: const {}", c.ident, text(&c.ty)))
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    if matches!(
        item,
        syn::Item::Struct(_) | syn::Item::Enum(_) | syn::Item::Union(_)
    ) {
        list_impls(krate, module, name, cfg, at, out);
    }
}

/// The impl blocks, anywhere in the crate, of the type `name` of `module`: its traits and its
/// public functions and constants.
fn list_impls(
    krate: &Crate,
    module: &str,
    name: &str,
    cfg: &Option<String>,
    at: &str,
    out: &mut BTreeSet<String>,
) {
    {
        for (path, m) in &krate.modules {
            for (imp, icfg) in &m.impls {
                let syn::Type::Path(tp) = &*imp.self_ty else {
                    continue;
                };
                let Some(last) = tp.path.segments.last() else {
                    continue;
                };
                if last.ident != name {
                    continue;
                }
                // The self type must be this very item, seen from the impl's module.
                let segs: Vec<String> = tp
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect();
                match resolve(krate, path, &segs, 0) {
                    Target::Item(p, n) if p == module && n == name => {}
                    // A macro-made type, named from its own module.
                    Target::Outside(_) if path == module && segs.len() == 1 => {}
                    _ => continue,
                }
                let c = icfg.clone().or_else(|| cfg.clone());
                if let Some((_, tr, _)) = &imp.trait_ {
                    out.insert(with_cfg(format!("{at}: impl {}", text(tr)), &c));
                    continue;
                }
                for ii in &imp.items {
                    if let syn::ImplItem::Fn(f) = ii {
                        if is_pub(&f.vis) {
                            let h = if hidden(&f.attrs) { " (hidden)" } else { "" };
                            let c2 = cfg_of(&f.attrs, &c);
                            let sig = if h.is_empty() {
                                text(&f.sig)
                            } else {
                                String::new()
                            };
                            out.insert(with_cfg(
                                format!("{at}::{}: {sig}{h}", f.sig.ident).replace(":  (", ": ("),
                                &c2,
                            ));
                        }
                    }
                    if let syn::ImplItem::Const(k) = ii {
                        if is_pub(&k.vis) {
                            out.insert(with_cfg(
                                format!("{at}::{}: const {}", k.ident, text(&k.ty)),
                                &c,
                            ));
                        }
                    }
                }
            }
        }
    }
}
