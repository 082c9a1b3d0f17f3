//! The attribute's code builds in an edition-2015 crate and records its calls.

extern crate cabprof;
extern crate cabprof_edition2015 as lib;

use cabprof::{Analysis, Session};

#[test]
fn an_edition_2015_crate_is_profiled() {
    let s = Session::builder()
        .analyses(&[Analysis::MethodCount, Analysis::Paths])
        .start()
        .unwrap();
    let mut c = lib::counter::Counter::default();
    let mut x = 0;
    for i in 0..10 {
        x += lib::twice(i) + lib::odd_sum(i) + c.add(2) + lib::total(&[i, 1]);
    }
    assert!(x > 0);
    let data = s.finish().data;
    let count = |suffix: &str| {
        data.method_count
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| data.name(m.method).ends_with(suffix))
            .map(|m| m.count)
    };
    assert_eq!(count("::twice"), Some(10));
    assert_eq!(count("::odd_sum"), Some(10));
    assert_eq!(count("Counter::add"), Some(10));
    assert_eq!(count("::total"), Some(10));
    let paths = data.paths.as_ref().expect("the paths analysis ran");
    assert!(!paths.is_empty());
}
