//! Instrumented code loads `cabprof` and everything it depends on, with all their trait impls.
//! None of them may make the standard library's own inference ambiguous: with a JSON crate
//! whose `Value` implements `PartialEq` for `u8` loaded, `&[]` below has no single element
//! type (E0282/E0283) and this file does not compile. Built with the `serve` feature, whose
//! crates (prometheus-client, inferno, prost, flate2) are loaded too: `serve_builder` does not
//! compile without it.
//!
//! Its own test binary, not a module of `tests/it/`: a crate loads the impls of every crate it
//! names, and other modules there name dev-dependencies (serde_json among them) that a user's
//! crate would not load; here only cabprof and its dependency graph are loaded, as in a user's
//! crate.
#![deny(warnings)]

#[cabprof::profile]
fn small_vec(n: u8) -> Vec<u8> {
    (0..n).collect()
}

#[cabprof::profile]
impl Holder {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

struct Holder(Vec<u8>);

fn serve_builder() -> cabprof::SessionBuilder {
    cabprof::SessionBuilder::new().serve("127.0.0.1:0")
}

#[test]
// `== []` is what is checked: its element type comes from inference alone.
#[allow(clippy::comparison_to_empty)]
fn the_standard_librarys_inference_is_unchanged() {
    let small_vec = small_vec(0);
    assert_eq!(&*small_vec, &[]);
    let h = Holder(vec![1, 2]);
    assert_eq!(h.bytes(), &[1, 2]);
    assert!(small_vec == []);
    let words = ["a", "b"];
    assert_eq!(words.iter().map(|w| w.len()).sum::<usize>(), 2);
    assert!(serve_builder().validate().is_ok());
}
