//! `crate = path`: for a crate that reaches cabprof under another name, every call the
//! attribute generates goes through that path.
#![deny(warnings)]

mod reexports {
    pub(crate) use cabprof as prof;
}

use reexports::prof;

#[prof::profile(crate = crate::compile_pass::renamed_crate::reexports::prof)]
fn plain(x: u32) -> u32 {
    x + 1
}

#[prof::profile(paths, memory, crate = crate::compile_pass::renamed_crate::reexports::prof)]
fn both(v: &[u32]) -> u32 {
    if v.is_empty() {
        0
    } else {
        v[0]
    }
}

#[prof::profile(crate = "crate::compile_pass::renamed_crate::reexports::prof")]
impl Counter {
    fn bump(&mut self) -> u32 {
        self.0 += 1;
        self.0
    }

    async fn later(&self) -> u32 {
        self.0
    }
}

struct Counter(u32);

pub(crate) fn main() {
    let mut c = Counter(0);
    assert_eq!(plain(1) + both(&[3]) + c.bump(), 6);
    drop(c.later());
}
