//! Reading a saved report back: the errors that say what is wrong, the fields added to the
//! schema since files were written without them, contexts listed as whole stacks (older files)
//! turned into nodes, and the check that every context list is a tree.

use super::*;
use miniserde::json::{self, Number, Value};
use std::fmt;

/// Why a saved report could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReportError {
    /// The text is not a cabprof report: not JSON, or JSON of another shape.
    NotAReport(NotAReport),
    /// A cabprof report of a schema this version does not read.
    UnsupportedSchema {
        /// The file's `schema` field.
        found: String,
    },
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::NotAReport(e) => write!(f, "not a cabprof report: {e}"),
            ReportError::UnsupportedSchema { found } => write!(
                f,
                "unsupported report schema {found:?} (this cabprof reads {SCHEMA:?})"
            ),
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReportError::NotAReport(e) => Some(e),
            ReportError::UnsupportedSchema { .. } => None,
        }
    }
}

/// What is wrong with a text that is not a cabprof report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotAReport {
    /// The text is not JSON.
    NotJson,
    /// JSON, but not an object with a `schema` string.
    NoSchema,
    /// A cabprof report whose fields are missing or of the wrong type.
    BadFields,
    /// A list of calling contexts that does not form a tree: `field` (such as
    /// `call_tree.contexts`), the entry at `index`.
    BadContext {
        /// The list.
        field: &'static str,
        /// The entry's index in it.
        index: usize,
        /// What is wrong with it.
        fault: ContextFault,
    },
}

/// Why a calling-context entry does not fit its tree ([`NotAReport::BadContext`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContextFault {
    /// Its id is 0, the root's.
    RootId,
    /// Its parent is not 0 and not an entry listed before it (a cycle, a parent listed after
    /// it, or one missing).
    ParentNotBefore {
        /// The entry's id.
        id: u32,
        /// Its parent's id.
        parent: u32,
    },
    /// Its id is an earlier entry's.
    DuplicateId {
        /// The id.
        id: u32,
    },
}

impl fmt::Display for NotAReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAReport::NotJson => f.write_str("the text is not valid JSON"),
            NotAReport::NoSchema => f.write_str("the JSON is not an object with a `schema` string"),
            NotAReport::BadFields => f.write_str("a field is missing or has the wrong type"),
            NotAReport::BadContext {
                field,
                index,
                fault,
            } => {
                write!(f, "{field}[{index}]: ")?;
                match fault {
                    ContextFault::RootId => f.write_str("id 0 is the root's"),
                    ContextFault::ParentNotBefore { id, parent } => write!(
                        f,
                        "context {id}'s parent {parent} is not a context listed before it (a \
                         cycle, or a parent listed later or missing)"
                    ),
                    ContextFault::DuplicateId { id } => {
                        write!(f, "context id {id} is listed twice")
                    }
                }
            }
        }
    }
}

impl std::error::Error for NotAReport {}

/// Fields added to the schema after files were written without them, and what such a file
/// means: `(object, field, value)`, where `object` is a top-level field (`""`: the report
/// itself). [`ReportData::from_json`] fills them in when absent. An analysis' results are an
/// `Option` field, absent in older files, so adding an analysis adds nothing here.
pub(crate) const LATER_FIELDS: &[(&str, &str, f64)] = &[
    ("session", "rate_effective", 0.0),
    ("", "events_in_flight", 0.0),
];

impl ReportData {
    /// Read a saved JSON report. Errors say which of the three things is wrong: not JSON, not
    /// a cabprof report, or a report of another schema.
    pub fn from_json(text: &str) -> Result<ReportData, ReportError> {
        // A file of this version reads straight into the typed schema; only an older one (or
        // a bad one, to say what is wrong) goes through a JSON tree first, which takes many
        // times the memory of the typed report.
        let data = match json::from_str::<ReportData>(text) {
            Ok(data) if data.schema == SCHEMA => data,
            other => {
                drop(other);
                Self::from_json_value(text)?
            }
        };
        Self::checked(data)
    }

    /// [`from_json`](Self::from_json) through a JSON tree: fills in [`LATER_FIELDS`] and
    /// turns contexts listed as whole stacks into nodes.
    fn from_json_value(text: &str) -> Result<ReportData, ReportError> {
        let mut value: Value =
            json::from_str(text).map_err(|_| ReportError::NotAReport(NotAReport::NotJson))?;
        let Value::Object(top) = &mut value else {
            return Err(ReportError::NotAReport(NotAReport::NoSchema));
        };
        match top.get("schema") {
            Some(Value::String(s)) if s == SCHEMA => {}
            Some(Value::String(s)) => {
                return Err(ReportError::UnsupportedSchema { found: s.clone() })
            }
            _ => return Err(ReportError::NotAReport(NotAReport::NoSchema)),
        }
        for &(object, field, default) in LATER_FIELDS {
            let target = if object.is_empty() {
                Some(&mut *top)
            } else {
                match top.get_mut(object) {
                    Some(Value::Object(o)) => Some(o),
                    _ => None,
                }
            };
            if let Some(o) = target {
                // A whole, non-negative default is written as an integer, which reads back
                // into integer and float fields alike.
                let number = if default >= 0.0 && default.fract() == 0.0 {
                    Number::U64(default as u64)
                } else {
                    Number::F64(default)
                };
                o.entry(field.to_owned()).or_insert(Value::Number(number));
            }
        }
        let zero = || Value::Number(Number::U64(0));
        let no_allocs = Value::Object(
            ["allocs", "bytes", "reallocs", "frees", "freed_bytes"]
                .into_iter()
                .map(|f| (f.to_owned(), zero()))
                .collect(),
        );
        // The analyses whose files once listed contexts as whole stacks, with each node field's
        // value for a prefix no entry lists. This is history, not a registry: analyses added
        // since write nodes from the start and never appear here.
        for (analysis, fields) in [
            (
                "call_tree",
                vec![("count", zero()), ("estimated", Value::Null)],
            ),
            (
                "time",
                ["calls", "timed", "inclusive_ns", "exclusive_ns"]
                    .map(|f| (f, zero()))
                    .to_vec(),
            ),
            (
                "allocations",
                vec![("calls", zero()), ("counts", no_allocs)],
            ),
        ] {
            if let Some(Value::Object(a)) = top.get_mut(analysis) {
                if let Some(Value::Array(contexts)) = a.get_mut("contexts") {
                    if analysis == "allocations" {
                        // The root's own counts were listed as an empty stack; they are also
                        // method 0's self counts in `functions`, where they are read now.
                        contexts.retain(|c| {
                            !matches!(c, Value::Object(o)
                                if matches!(o.get("stack"), Some(Value::Array(s)) if s.is_empty()))
                        });
                    }
                    contexts_from_stacks(contexts, &fields)?;
                }
            }
        }
        // The tree goes before the typed report is made from its text: the two together
        // would be many times the file.
        let text = json::to_string(&value);
        drop(value);
        json::from_str(&text).map_err(|_| ReportError::NotAReport(NotAReport::BadFields))
    }

    /// A report read from a file: each analysis' results checked (contexts well linked), its
    /// methods sorted by id.
    fn checked(mut data: ReportData) -> Result<ReportData, ReportError> {
        crate::analysis::check_report(&data).map_err(ReportError::NotAReport)?;
        data.methods.sort_by_key(|m| m.id);
        Ok(data)
    }
}

/// Check that the calling contexts `nodes`, the list `field` of a report (such as
/// `call_tree.contexts`), form a tree: ids unique and not 0, each parent 0 or listed before.
pub(crate) fn check_contexts<N: ContextNode>(
    field: &'static str,
    nodes: &[N],
) -> Result<(), NotAReport> {
    match first_bad_link(nodes) {
        Some((index, fault)) => Err(NotAReport::BadContext {
            field,
            index,
            fault,
        }),
        None => Ok(()),
    }
}

/// The first context of `nodes` that breaks the list's rules (ids unique and not 0, each
/// parent 0 or listed before it): its index and what is wrong.
fn first_bad_link<N: ContextNode>(nodes: &[N]) -> Option<(usize, ContextFault)> {
    let mut ids = std::collections::HashSet::with_capacity(nodes.len());
    nodes.iter().enumerate().find_map(|(i, c)| {
        let fault = if c.id() == 0 {
            ContextFault::RootId
        } else if c.parent() != 0 && !ids.contains(&c.parent()) {
            ContextFault::ParentNotBefore {
                id: c.id(),
                parent: c.parent(),
            }
        } else if !ids.insert(c.id()) {
            ContextFault::DuplicateId { id: c.id() }
        } else {
            return None;
        };
        Some((i, fault))
    })
}

/// Files written before contexts were nodes list each context's whole `stack`: turn those
/// entries into nodes (`id`, `parent`, `method` and the entry's `fields`), making the prefixes
/// no entry lists with `fields`' values, each parent before its children. A stack listed twice
/// has its numbers added ([`added`]). `fields` names every field of a node besides those three
/// with its value for an unlisted prefix; one whose value is not null must be in every entry.
/// Entries that are nodes already are left alone.
fn contexts_from_stacks(
    contexts: &mut Vec<Value>,
    fields: &[(&str, Value)],
) -> Result<(), ReportError> {
    let old = |v: &Value| matches!(v, Value::Object(o) if o.contains_key("stack") && !o.contains_key("id"));
    if !contexts.iter().any(old) {
        return Ok(());
    }
    let bad = || ReportError::NotAReport(NotAReport::BadFields);
    // (parent id, method) → id; each node's fields; ids are positions + 1.
    let mut ids: std::collections::HashMap<(u64, u64), u64> = std::collections::HashMap::new();
    let mut nodes: Vec<miniserde::json::Object> = Vec::new();
    for entry in contexts.iter() {
        let Value::Object(o) = entry else {
            return Err(bad());
        };
        let Some(Value::Array(stack)) = o.get("stack") else {
            return Err(bad());
        };
        if stack.is_empty() {
            return Err(bad());
        }
        let mut parent = 0;
        for frame in stack {
            let method = number(frame)
                .filter(|&m| m <= u32::MAX as u64)
                .ok_or_else(bad)?;
            parent = *ids.entry((parent, method)).or_insert_with(|| {
                let mut node = miniserde::json::Object::new();
                node.insert(
                    "id".into(),
                    Value::Number(Number::U64(nodes.len() as u64 + 1)),
                );
                node.insert("parent".into(), Value::Number(Number::U64(parent)));
                node.insert("method".into(), Value::Number(Number::U64(method)));
                for (f, v) in fields {
                    node.insert((*f).into(), v.clone());
                }
                nodes.push(node);
                nodes.len() as u64
            });
        }
        let node = &mut nodes[parent as usize - 1];
        for (f, unlisted) in fields {
            let Some(v) = o.get(*f) else {
                if !matches!(unlisted, Value::Null) {
                    return Err(bad());
                }
                continue;
            };
            let was = node.get(*f).cloned().unwrap_or(Value::Null);
            node.insert((*f).into(), added(&was, v));
        }
    }
    if nodes.len() > u32::MAX as usize {
        return Err(bad());
    }
    *contexts = nodes.into_iter().map(Value::Object).collect();
    Ok(())
}

/// A JSON number's value as a `u64`, if it is one.
fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(Number::U64(n)) => Some(*n),
        _ => None,
    }
}

/// The sum of two fields of a stack listed twice ([`contexts_from_stacks`]): integers add
/// (saturating), other numbers add as floats, objects add field by field; anything else is
/// the later value.
fn added(was: &Value, v: &Value) -> Value {
    let float = |v: &Value| match v {
        Value::Number(Number::U64(n)) => Some(*n as f64),
        Value::Number(Number::I64(n)) => Some(*n as f64),
        Value::Number(Number::F64(n)) => Some(*n),
        _ => None,
    };
    match (was, v) {
        (Value::Object(a), Value::Object(b)) => {
            let mut sum = a.clone();
            for (k, x) in b.iter() {
                let y = a.get(k).map_or_else(|| x.clone(), |y| added(y, x));
                sum.insert(k.clone(), y);
            }
            Value::Object(sum)
        }
        _ => match (number(was), number(v), float(was), float(v)) {
            (Some(a), Some(b), _, _) => Value::Number(Number::U64(a.saturating_add(b))),
            (_, _, Some(a), Some(b)) => Value::Number(Number::F64(a + b)),
            _ => v.clone(),
        },
    }
}
