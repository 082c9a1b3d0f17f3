//! `#[profile]` on plain, generic, unsafe and `impl Trait` functions: one `Call` at entry with
//! the right caller, one `Return` at exit, named by the registry.

use crate::support;

use cabprof::profile;
use support::{assert_balanced, calls, record, serial};

#[profile]
fn leaf(x: u32) -> u32 {
    x + 1
}

#[profile]
fn middle(x: u32) -> u32 {
    leaf(x) + leaf(x + 1)
}

#[profile]
fn generic<T: Clone>(t: &T) -> T {
    t.clone()
}

#[profile]
unsafe fn raw_read(p: *const u32) -> u32 {
    // SAFETY: the caller passes a valid pointer.
    unsafe { *p }
}

#[profile]
fn evens(n: u32) -> impl Iterator<Item = u32> {
    (0..n).filter(|x| x.is_multiple_of(2))
}

#[test]
fn calls_name_their_caller_and_return_in_order() {
    let _g = serial();
    let (r, ev) = record(|| middle(1));
    assert_eq!(r, 5);
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>middle",
            "+middle>leaf",
            "-leaf",
            "+middle>leaf",
            "-leaf",
            "-middle"
        ]
    );
}

#[test]
fn generic_unsafe_and_impl_trait_functions() {
    let _g = serial();
    let x = 7u32;
    let (r, ev) = record(|| {
        let a = generic(&String::from("a"));
        let b = generic(&3u8);
        // SAFETY: `x` is a live u32.
        let c = unsafe { raw_read(&x) };
        let d: Vec<u32> = evens(5).collect();
        (a, b, c, d)
    });
    assert_eq!(r, ("a".to_string(), 3, 7, vec![0, 2, 4]));
    assert_balanced(&ev);
    assert_eq!(
        calls(&ev),
        [
            "+root>generic",
            "-generic",
            "+root>generic",
            "-generic",
            "+root>raw_read",
            "-raw_read",
            "+root>evens",
            "-evens"
        ]
    );
}

#[test]
fn no_session_no_events_and_same_results() {
    let _g = serial();
    assert_eq!(middle(1), 5);
    let (_, ev) = record(|| ());
    assert!(ev.is_empty());
}

#[test]
fn each_thread_has_its_own_shadow_stack() {
    let _g = serial();
    let (_, ev) = record(|| {
        let hs: Vec<_> = (0..4)
            .map(|i| std::thread::spawn(move || middle(i)))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
    // Each thread's ring arrives whole, so the concatenation is balanced thread by thread.
    assert_balanced(&ev);
    assert_eq!(calls(&ev).len(), 4 * 6);
    assert!(calls(&ev).iter().filter(|c| *c == "+root>middle").count() == 4);
}

#[test]
fn sequential_and_sampling_modes_see_the_same_calls() {
    use cabprof::RunMode;
    let _g = serial();
    let (_, seq) = support::record_in(RunMode::Sequential, || middle(1));
    assert_eq!(
        calls(&seq),
        [
            "+root>middle",
            "+middle>leaf",
            "-leaf",
            "+middle>leaf",
            "-leaf",
            "-middle"
        ]
    );
    let sampling = RunMode::Sampling {
        rate: 1.0,
        burst_words: 8,
        adaptive: false,
    };
    let (_, s) = support::record_in(sampling, || middle(1));
    assert_eq!(calls(&s), calls(&seq));
}
