//! The creation sites of the wrapped locks and channels: each `(kind, file, line, column)` gets a
//! number once, which the wait words carry and the report turns back into its place.

use cabprof_cab::runtime::runtime_work;
use hashbrown::HashMap;
use std::panic::Location;
use std::sync::Mutex;

/// One creation site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Site {
    /// `Mutex`, `RwLock`, `channel`, `sync_channel`, `crossbeam::bounded`,
    /// `crossbeam::unbounded`, `tokio::mpsc::channel` or `tokio::mpsc::unbounded_channel`.
    pub(crate) kind: &'static str,
    pub(crate) location: &'static Location<'static>,
}

impl Site {
    /// `file:line:column`.
    pub(crate) fn place(&self) -> String {
        let l = self.location;
        format!("{}:{}:{}", l.file(), l.line(), l.column())
    }
}

#[derive(Default)]
struct Table {
    numbers: HashMap<(&'static str, &'static str, u32, u32), u32>,
    /// Site `n` is `sites[n - 1]`: numbers start at 1, so that 0 can mean "not yet known".
    sites: Vec<Site>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The number of `site`, given on its first call. Taken after a wait, never on an
/// uncontended path.
#[cold]
pub(crate) fn number(site: Site) -> u32 {
    // The table's allocations are the runtime's, not the program's.
    let _work = runtime_work();
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let table = table.get_or_insert_with(Table::default);
    let l = site.location;
    let key = (site.kind, l.file(), l.line(), l.column());
    if let Some(&n) = table.numbers.get(&key) {
        return n;
    }
    table.sites.push(site);
    let n = table.sites.len() as u32;
    table.numbers.insert(key, n);
    n
}

/// The site numbered `n`, if any.
pub(crate) fn site(n: u32) -> Option<Site> {
    let table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let i = (n as usize).checked_sub(1)?;
    table.as_ref()?.sites.get(i).copied()
}
