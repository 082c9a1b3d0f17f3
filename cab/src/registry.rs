//! The method registry: who each method id is, and how to read its path numbers.
//!
//! # Contract
//!
//! - Every instrumented function owns one static [`Site`] (emitted by `#[cabprof::profile]`).
//!   Its [`MethodId`] is assigned once, at the function's first call while a session runs, and
//!   never changes for the life of the process. Ids are dense, from 1 (0 is the root).
//! - [`lookup`] and [`all`] name ids for reports: function name, module path, file, line, and
//!   the Ball-Larus [`PathNumbering`] when the function was instrumented with `paths`.
//! - Ids fit an event word (`1..MAX_METHOD_ID`). Should a process register more functions than
//!   that, every further function shares the id [`OVERFLOW_ID`]; [`lookup`] of it says so and
//!   [`overflowed`] counts the functions folded into it. Nothing panics.
//! - The hot path ([`Site::id`]) is one `Relaxed` load and a branch; registration takes a lock
//!   and happens once per function.
//!
//! # Path numberings
//!
//! Ball & Larus, "Efficient Path Profiling" (MICRO 1996): the macro builds the control-flow
//! graph of a function body, turns it into a DAG (each loop back edge `v -> head` becomes
//! `v -> EXIT` plus `ENTRY -> head`), and gives every edge a value such that the sum of the
//! values along each ENTRY-to-EXIT path is a distinct number in `0..num_paths`. The application
//! adds edge values to a register and emits the sum at back edges and at exit. A
//! [`PathNumbering`] is that DAG, as static data the macro emits beside the function, so a
//! number can be [decoded](PathNumbering::decode) back into the branch choices that produced
//! it, with their source lines.

use crate::event::{MethodId, MAX_METHOD_ID, MAX_PATH_NUMBER};
use parking_lot::Mutex;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

// ---------------------------------------------------------------------------------------------
// Sites and the registry

/// The id every function registered after the id space ran out shares.
pub const OVERFLOW_ID: MethodId = match MethodId::new(MAX_METHOD_ID) {
    Ok(id) => id,
    Err(_) => panic!("MAX_METHOD_ID fits"),
};

/// One instrumented function, as a `static` the macro emits inside it. Generic functions share
/// one site (and so one id) across all their instantiations.
pub struct Site {
    /// The assigned id, or 0 while unassigned. Only [`register`] stores a non-zero value, once,
    /// under the registry lock; it is always `<= MAX_METHOD_ID`.
    id: AtomicU32,
    /// `std::any::type_name` of an item nested in the function: its full path plus a suffix.
    path: fn() -> &'static str,
    module_path: &'static str,
    file: &'static str,
    line: u32,
    paths: Option<&'static PathNumbering>,
    /// What the process's first instrumented event runs before anything is recorded: it
    /// decides whether a session the process starts by itself runs (the facade's `CABPROF=1`
    /// session) and says whether one records now. The generated code names it, so the code
    /// every event runs through has no path to what starts sessions.
    first_event: fn() -> bool,
}

/// [`Site::first_event`] of a site that never starts anything.
fn starts_nothing() -> bool {
    false
}

impl Site {
    /// A site for the function whose nested marker item's type name `path` returns. Called by
    /// generated code only.
    #[doc(hidden)]
    pub const fn new(
        path: fn() -> &'static str,
        module_path: &'static str,
        file: &'static str,
        line: u32,
        paths: Option<&'static PathNumbering>,
        first_event: fn() -> bool,
    ) -> Site {
        Site {
            id: AtomicU32::new(0),
            path,
            module_path,
            file,
            line,
            paths,
            first_event,
        }
    }

    /// A site with the id the registry never hands out ([`MAX_METHOD_ID`]), not registered:
    /// for cabprof's own calibration probe, which must neither take an id a program's
    /// functions would get nor appear in their names.
    #[doc(hidden)]
    pub const fn unregistered(path: fn() -> &'static str, module_path: &'static str) -> Site {
        Site {
            id: AtomicU32::new(MAX_METHOD_ID),
            path,
            module_path,
            file: "",
            line: 0,
            paths: None,
            first_event: starts_nothing,
        }
    }

    /// This function's id, assigning it on first use.
    #[inline(always)]
    pub fn id(&'static self) -> u32 {
        // Relaxed: the id is the only datum the hot path needs, and it is valid on its own
        // (never 0 once set, never changed). Readers of the registry's `MethodInfo` take the
        // registry lock, which orders them after the registration that wrote it.
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            id
        } else {
            register(self)
        }
    }

    /// The path numbering emitted with this function, if it was instrumented with `paths`.
    pub fn paths(&self) -> Option<&'static PathNumbering> {
        self.paths
    }

    /// Run the decision of the process's first event (see
    /// [`Activity::Undecided`](crate::runtime::Activity::Undecided)): whether a session
    /// records now.
    #[cold]
    pub fn first_event(&self) -> bool {
        (self.first_event)()
    }
}

/// What reports print for a method id.
#[derive(Clone, Copy, Debug)]
pub struct MethodInfo {
    /// The function's name, with its `impl` type for methods (`Stack<_>::push`,
    /// `<Foo as Display>::fmt`), relative to `module_path` when it lies inside it.
    pub name: &'static str,
    /// `module_path!()` where the function is defined.
    pub module_path: &'static str,
    /// Source file.
    pub file: &'static str,
    /// Line of the function's name.
    pub line: u32,
    /// The Ball-Larus numbering of its paths (functions instrumented with `paths`).
    pub paths: Option<&'static PathNumbering>,
}

impl MethodInfo {
    /// `module::name`, the way people write it.
    pub fn qualified_name(&self) -> String {
        if self.name.starts_with('<') || self.module_path.is_empty() {
            self.name.to_string()
        } else {
            format!("{}::{}", self.module_path, self.name)
        }
    }
}

const OVERFLOW_INFO: MethodInfo = MethodInfo {
    name: "(functions registered after the function id space ran out)",
    module_path: "",
    file: "",
    line: 0,
    paths: None,
};

/// The registry proper: `methods[i]` is id `i + 1`.
struct Table {
    methods: Vec<MethodInfo>,
    /// Sites that got [`OVERFLOW_ID`].
    overflowed: usize,
}

impl Table {
    /// The id for one more method, given the largest id that may be handed out normally.
    fn add(&mut self, info: MethodInfo, last_normal_id: u32) -> u32 {
        let next = self.methods.len() as u64 + 1;
        if next > last_normal_id as u64 {
            self.overflowed += 1;
            return OVERFLOW_ID.get();
        }
        self.methods.push(info);
        next as u32
    }

    fn lookup(&self, id: MethodId) -> Option<MethodInfo> {
        if id == OVERFLOW_ID {
            return (self.overflowed > 0).then_some(OVERFLOW_INFO);
        }
        let i = (id.get() as usize).checked_sub(1)?;
        self.methods.get(i).copied()
    }
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    methods: Vec::new(),
    overflowed: 0,
});

/// Strip the marker item's name (and the `{{closure}}` an `async fn` body adds) and, when it
/// lies inside it, the module path. A function defined inside another profiled one sits in
/// that one's body closure (`outer::{{closure}}::inner`): its name leaves the closure out, as
/// the source does. That name is made once per function and kept for the process (leaked),
/// like every other name in the table.
fn display_name(type_name: &'static str, module_path: &str) -> &'static str {
    let mut full = type_name
        .strip_suffix("::__cabprof_here")
        .unwrap_or(type_name);
    while let Some(f) = full.strip_suffix("::{{closure}}") {
        full = f;
    }
    if full.contains("::{{closure}}::") {
        let mut owned = full.to_owned();
        while owned.contains("::{{closure}}::") {
            owned = owned.replace("::{{closure}}::", "::");
        }
        full = Box::leak(owned.into_boxed_str());
    }
    match full.strip_prefix(module_path) {
        Some(rest) if rest.starts_with("::") => &rest[2..],
        _ => full,
    }
}

#[cold]
#[inline(never)]
fn register(site: &'static Site) -> u32 {
    let started = crate::clock::now();
    let id = register_locked(site);
    // Registering is cabprof's time: a `Stall` takes it out of the frames open around it.
    crate::runtime::stalled_since(started);
    id
}

fn register_locked(site: &'static Site) -> u32 {
    // The name table's growth is the runtime's own allocation, not the program's.
    let _work = crate::runtime::runtime_work();
    let info = MethodInfo {
        name: display_name((site.path)(), site.module_path),
        module_path: site.module_path,
        file: site.file,
        line: site.line,
        paths: site.paths,
    };
    let mut table = TABLE.lock();
    // Another thread may have won the race while we waited for the lock.
    let id = site.id.load(Ordering::Relaxed);
    if id != 0 {
        return id;
    }
    let id = table.add(info, MAX_METHOD_ID - 1);
    site.id.store(id, Ordering::Relaxed);
    id
}

/// The function an id stands for; `None` for ids never handed out (and for 0, the root).
pub fn lookup(id: MethodId) -> Option<MethodInfo> {
    TABLE.lock().lookup(id)
}

/// Every registered function, by id (the overflow entry last, if used).
pub fn all() -> Vec<(MethodId, MethodInfo)> {
    let table = TABLE.lock();
    let mut v: Vec<(MethodId, MethodInfo)> = table
        .methods
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((MethodId::new(i as u32 + 1).ok()?, *m)))
        .collect();
    if table.overflowed > 0 {
        v.push((OVERFLOW_ID, OVERFLOW_INFO));
    }
    v
}

/// Functions that share [`OVERFLOW_ID`] because the id space ran out (normally 0).
pub fn overflowed() -> usize {
    TABLE.lock().overflowed
}

/// Decode `path` of `method` (see [`PathNumbering::decode`]); `None` if either is unknown.
pub fn decode_path(method: MethodId, path: u32) -> Option<Vec<PathStep>> {
    lookup(method)?.paths?.decode(path)
}

// ---------------------------------------------------------------------------------------------
// Path numberings

/// How a function's path numbers were made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathMode {
    /// Plain Ball-Larus: one number per acyclic path from entry (or a loop head) to exit (or a
    /// back edge).
    Exact,
    /// The body had too many paths for a `Path` event, so paths are also cut at these source
    /// lines (a split ends the running path and starts a new one, exactly like a back edge).
    /// Numbers are still exact and decodable; a path is just shorter.
    Split {
        /// Lines where paths are cut.
        lines: &'static [u32],
    },
    /// Even splitting could not make the numbers fit: events carry a 30-bit hash of the full
    /// (64-bit, wrapping) Ball-Larus sum. Distinct paths almost always get distinct numbers,
    /// but numbers cannot be decoded.
    Hashed,
}

/// What one step of a decoded path did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// A boolean condition (of `if`, `while`, or an operand of `&&` / `||`) was true/false.
    Condition(bool),
    /// `if let` / `while let` / `let .. else`: the pattern matched or not.
    Pattern(bool),
    /// `match`: the pattern of arm `n` (from 0) matched (its guard, if any, follows).
    Arm(u32),
    /// A match guard was true/false.
    Guard(bool),
    /// `for`: the iterator gave another item (`true`) or was exhausted (`false`).
    Next(bool),
    /// `?`: the value was an error (`true`; the function returns) or not.
    TryError(bool),
    /// The path starts at a loop head, after a back edge ended the previous one.
    LoopHead,
    /// The path ends at a loop back edge (end of the body, or `continue`).
    BackEdge,
    /// The path starts after a split point (see [`PathMode::Split`]).
    SplitStart,
    /// The path ends at a split point.
    SplitEnd,
    /// The path ends with `return`.
    Return,
    /// The path ends at the end of the body.
    End,
    /// The function unwound (panicked) during this path: the steps before this one are the
    /// choices made up to the panic, followed by the default (first) choice at each later
    /// decision, which may not have been taken.
    Unwound,
}

impl StepKind {
    /// A branch choice (as opposed to where a path starts or ends).
    pub fn is_decision(self) -> bool {
        matches!(
            self,
            StepKind::Condition(_)
                | StepKind::Pattern(_)
                | StepKind::Arm(_)
                | StepKind::Guard(_)
                | StepKind::Next(_)
                | StepKind::TryError(_)
        )
    }
}

/// One step of a decoded path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathStep {
    /// Source line of the condition, arm, loop or statement.
    pub line: u32,
    /// What happened.
    pub kind: StepKind,
    /// The source it refers to, abbreviated (`x > 0`, `Some(v)`, `for`).
    pub text: &'static str,
}

impl PathStep {
    #[doc(hidden)]
    pub const fn new(line: u32, kind: StepKind, text: &'static str) -> PathStep {
        PathStep { line, kind, text }
    }
}

impl fmt::Display for PathStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.text;
        write!(f, "line {}: ", self.line)?;
        match self.kind {
            StepKind::Condition(b) => write!(f, "`{t}` is {b}"),
            StepKind::Pattern(true) => write!(f, "`{t}` matches"),
            StepKind::Pattern(false) => write!(f, "`{t}` does not match"),
            StepKind::Arm(n) => write!(f, "match arm {n} `{t}`"),
            StepKind::Guard(b) => write!(f, "guard `{t}` is {b}"),
            StepKind::Next(true) => write!(f, "`{t}`: next item"),
            StepKind::Next(false) => write!(f, "`{t}`: exhausted"),
            StepKind::TryError(true) => write!(f, "`{t}?` is an error: return"),
            StepKind::TryError(false) => write!(f, "`{t}?` continues"),
            StepKind::LoopHead => write!(f, "path starts at loop head `{t}`"),
            StepKind::BackEdge => write!(f, "back edge of `{t}`: path ends"),
            StepKind::SplitStart => write!(f, "path starts after a split"),
            StepKind::SplitEnd => write!(f, "path split: ends"),
            StepKind::Return => write!(f, "return"),
            StepKind::End => write!(f, "end of function"),
            StepKind::Unwound => write!(f, "unwound (panic); later choices not known"),
        }
    }
}

/// A node of the path DAG: its out-edges are `edges[first_edge..first_edge + edge_count]`,
/// in increasing value order.
#[derive(Clone, Copy, Debug)]
pub struct PathNode {
    first_edge: u32,
    edge_count: u32,
    /// Paths from this node to EXIT (saturating).
    paths: u64,
}

impl PathNode {
    #[doc(hidden)]
    pub const fn new(first_edge: u32, edge_count: u32, paths: u64) -> PathNode {
        PathNode {
            first_edge,
            edge_count,
            paths,
        }
    }
}

/// An edge of the path DAG.
#[derive(Clone, Copy, Debug)]
pub struct PathEdge {
    to: u32,
    value: u64,
    step: Option<PathStep>,
}

impl PathEdge {
    #[doc(hidden)]
    pub const fn new(to: u32, value: u64, step: Option<PathStep>) -> PathEdge {
        PathEdge { to, value, step }
    }
}

/// The Ball-Larus numbering of one function, emitted by `#[profile(paths)]`. Node 0 is ENTRY,
/// node 1 is EXIT.
#[derive(Debug)]
pub struct PathNumbering {
    num_paths: u64,
    mode: PathMode,
    nodes: &'static [PathNode],
    edges: &'static [PathEdge],
}

impl PathNumbering {
    #[doc(hidden)]
    pub const fn new(
        num_paths: u64,
        mode: PathMode,
        nodes: &'static [PathNode],
        edges: &'static [PathEdge],
    ) -> PathNumbering {
        PathNumbering {
            num_paths,
            mode,
            nodes,
            edges,
        }
    }

    /// Number of acyclic paths: path numbers of completed paths lie in `0..num_paths()`, and
    /// `num_paths() + p` marks path `p` cut short by a panic. For [`PathMode::Hashed`], the
    /// (saturated) count of the full numbering.
    pub fn num_paths(&self) -> u64 {
        self.num_paths
    }

    /// Exact, split or hashed.
    pub fn mode(&self) -> PathMode {
        self.mode
    }

    /// Whether `path` is a path cut short by a panic.
    pub fn is_unwound(&self, path: u32) -> bool {
        self.mode != PathMode::Hashed
            && (path as u64) >= self.num_paths
            && (path as u64) < 2 * self.num_paths
    }

    /// The steps of path `path`, in execution order: where it starts (unless at entry), each
    /// branch choice with its line, and how it ends. `None` if `path` is not a number this
    /// function can produce, or the numbering is [`PathMode::Hashed`].
    pub fn decode(&self, path: u32) -> Option<Vec<PathStep>> {
        if self.mode == PathMode::Hashed || path > MAX_PATH_NUMBER {
            return None;
        }
        let mut rest = path as u64;
        let unwound = rest >= self.num_paths;
        if unwound {
            rest -= self.num_paths;
            if rest >= self.num_paths {
                return None;
            }
        }
        let mut steps = Vec::new();
        let mut node = 0usize;
        // Every step moves forward in a DAG, so this ends; the bound guards a corrupt table.
        for _ in 0..=self.edges.len() {
            if node == 1 {
                break;
            }
            let n = self.nodes.get(node)?;
            let out = self
                .edges
                .get(n.first_edge as usize..(n.first_edge + n.edge_count) as usize)?;
            let e = out.iter().find(|e| {
                let to = self.nodes.get(e.to as usize).map_or(0, |t| t.paths);
                e.value <= rest && rest - e.value < to
            })?;
            rest -= e.value;
            if let Some(s) = e.step {
                steps.push(s);
            }
            node = e.to as usize;
        }
        if node != 1 || rest != 0 {
            return None;
        }
        if unwound {
            steps.push(PathStep::new(0, StepKind::Unwound, ""));
        }
        Some(steps)
    }
}

impl fmt::Debug for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Site")
            .field("id", &self.id.load(Ordering::Relaxed))
            .field("module_path", &self.module_path)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &'static str) -> MethodInfo {
        MethodInfo {
            name,
            module_path: "m",
            file: "f.rs",
            line: 1,
            paths: None,
        }
    }

    #[test]
    fn ids_are_dense_then_overflow_to_one_shared_id() {
        let mut t = Table {
            methods: Vec::new(),
            overflowed: 0,
        };
        assert_eq!(t.add(info("a"), 3), 1);
        assert_eq!(t.add(info("b"), 3), 2);
        assert_eq!(t.add(info("c"), 3), 3);
        assert_eq!(t.add(info("d"), 3), OVERFLOW_ID.get());
        assert_eq!(t.add(info("e"), 3), OVERFLOW_ID.get());
        assert_eq!(t.overflowed, 2);
        assert_eq!(t.lookup(MethodId::new(2).unwrap()).unwrap().name, "b");
        assert_eq!(t.lookup(OVERFLOW_ID).unwrap().name, OVERFLOW_INFO.name);
        assert!(t.lookup(MethodId::ROOT).is_none());
        assert!(t.lookup(MethodId::new(4).unwrap()).is_none());
    }

    #[test]
    fn names_drop_the_marker_and_the_module() {
        assert_eq!(
            display_name("app::io::read::__cabprof_here", "app::io"),
            "read"
        );
        assert_eq!(
            display_name("app::Stack<_>::push::__cabprof_here", "app"),
            "Stack<_>::push"
        );
        assert_eq!(
            display_name(
                "<app::Foo as core::fmt::Display>::fmt::__cabprof_here",
                "app"
            ),
            "<app::Foo as core::fmt::Display>::fmt"
        );
        assert_eq!(display_name("appx::f::__cabprof_here", "app"), "appx::f");
        assert_eq!(
            display_name("app::fetch::{{closure}}::__cabprof_here", "app"),
            "fetch"
        );
        assert_eq!(
            display_name(
                "app::outer::{{closure}}::{{closure}}::inner::__cabprof_here",
                "app"
            ),
            "outer::inner"
        );
    }

    /// `if c { } else { }` then exit, with a loop around it: ENTRY(0) -> H(2) -> cond ->
    /// {T, E} -> latch(3) -> back edge; H -> exit via `while` false.
    #[test]
    fn decode_walks_edge_values() {
        static STEP_T: PathStep = PathStep::new(5, StepKind::Condition(true), "c");
        static STEP_F: PathStep = PathStep::new(5, StepKind::Condition(false), "c");
        static BACK: PathStep = PathStep::new(4, StepKind::BackEdge, "while");
        static HEAD: PathStep = PathStep::new(4, StepKind::LoopHead, "while");
        // Nodes: 0 ENTRY, 1 EXIT, 2 head (cond: true -> 3 body, false -> EXIT), 3 body -> EXIT
        // via back edge. Paths: from 3: 1; from 2: 2 (body, exit); ENTRY: 2 (-> 2) + 2 (-> 2
        // as loop head) = 4.
        static NODES: [PathNode; 4] = [
            PathNode::new(0, 2, 4),
            PathNode::new(2, 0, 1),
            PathNode::new(2, 2, 2),
            PathNode::new(4, 1, 1),
        ];
        static EDGES: [PathEdge; 5] = [
            PathEdge::new(2, 0, None),
            PathEdge::new(2, 2, Some(HEAD)),
            PathEdge::new(3, 0, Some(STEP_T)),
            PathEdge::new(1, 1, Some(STEP_F)),
            PathEdge::new(1, 0, Some(BACK)),
        ];
        let n = PathNumbering::new(4, PathMode::Exact, &NODES, &EDGES);
        assert_eq!(n.decode(0).unwrap(), vec![STEP_T, BACK]);
        assert_eq!(n.decode(1).unwrap(), vec![STEP_F]);
        assert_eq!(n.decode(2).unwrap(), vec![HEAD, STEP_T, BACK]);
        assert_eq!(n.decode(3).unwrap(), vec![HEAD, STEP_F]);
        assert!(n.decode(8).is_none());
        let unwound = n.decode(5).unwrap();
        assert_eq!(unwound[0], STEP_F);
        assert_eq!(unwound.last().unwrap().kind, StepKind::Unwound);
        assert!(n.is_unwound(5) && !n.is_unwound(3));
    }
}
