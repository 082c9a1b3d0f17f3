//! `#[profile(memory)]`: index expressions and explicit derefs emit `Mem { addr, size, store }`
//! with the address of the element accessed, loads and stores told apart (compound assignment
//! is both), every sub-expression still evaluated once; `cabprof::mem::load/store` for the rest.

use crate::support;

use cabprof::profile;
use cabprof_cab::EventKind;
use support::{record, serial};

fn addr<T: ?Sized>(x: &T) -> u64 {
    x as *const T as *const () as usize as u64
}

fn mems(events: &[EventKind]) -> Vec<(u64, u32, bool)> {
    events
        .iter()
        .filter_map(|e| match *e {
            EventKind::Mem { addr, size, store } => Some((addr, size, store)),
            _ => None,
        })
        .collect()
}

const LOAD: bool = false;
const STORE: bool = true;

#[profile(memory)]
fn read(a: &[u32], i: usize) -> u32 {
    a[i]
}

#[profile(memory)]
fn write(a: &mut [u64], i: usize) {
    a[i] = 7;
}

#[profile(memory)]
fn add_into(a: &mut [u16], i: usize, j: usize) {
    a[i] += a[j];
}

#[profile(memory)]
fn nested(v: &[Vec<u8>], i: usize, j: usize) -> u8 {
    v[i][j]
}

#[profile(memory)]
fn nested_write(v: &mut [Vec<u8>], i: usize, j: usize) {
    v[i][j] = 1;
}

#[profile(memory)]
fn deref_read(p: &u64) -> u64 {
    *p
}

// A boxed value moved out by `*`: the rewrite must keep the move.
#[allow(clippy::box_collection, clippy::boxed_local)]
#[profile(memory)]
fn unbox(b: Box<String>) -> String {
    *b
}

#[profile(memory)]
unsafe fn raw_update(p: *mut u32) {
    // SAFETY: the caller passes a valid, exclusive pointer.
    unsafe {
        *p = 5;
        *p += 1;
    }
}

#[profile(memory)]
fn push_row(v: &mut [Vec<u8>], i: usize) {
    v[i].push(9);
}

#[profile(memory)]
fn index_once(a: &[u8], it: &mut std::ops::Range<usize>) -> u8 {
    a[it.next().unwrap()]
}

#[profile(memory)]
fn gather(a: &[u32], idx: &[usize]) -> u32 {
    idx.iter().map(|&i| a[i]).sum()
}

#[profile(memory)]
fn borrow_and_compare(a: &[String], b: &mut [u8]) -> bool {
    let r = &a[0];
    let w = &mut b[1];
    *w = 3;
    a[0] == a[1] && r.len() == 1
}

#[profile(memory)]
fn units(a: &[()]) {
    a[0]
}

#[test]
fn reads_writes_and_compound_assignment() {
    let _g = serial();
    let a = [1u32, 2, 3];
    let mut b = [0u64; 4];
    let mut c = [5u16, 6];
    let (r, ev) = record(|| {
        let x = read(&a, 2);
        write(&mut b, 1);
        add_into(&mut c, 0, 1);
        x
    });
    assert_eq!((r, b[1], c[0]), (3, 7, 11));
    assert_eq!(
        mems(&ev),
        [
            (addr(&a[2]), 4, LOAD),
            (addr(&b[1]), 8, STORE),
            (addr(&c[1]), 2, LOAD),
            (addr(&c[0]), 2, LOAD),
            (addr(&c[0]), 2, STORE),
        ]
    );
}

#[test]
fn containers_are_read_then_elements_accessed() {
    let _g = serial();
    let mut v = vec![vec![1u8, 2], vec![3, 4, 5]];
    let (r, ev) = record(|| nested(&v, 1, 2));
    assert_eq!(r, 5);
    let vec_size = std::mem::size_of::<Vec<u8>>().next_power_of_two() as u32;
    assert_eq!(
        mems(&ev),
        [(addr(&v[1]), vec_size, LOAD), (addr(&v[1][2]), 1, LOAD)]
    );
    let (_, ev) = record(|| nested_write(&mut v, 0, 1));
    assert_eq!(v[0][1], 1);
    assert_eq!(
        mems(&ev),
        [(addr(&v[0]), vec_size, LOAD), (addr(&v[0][1]), 1, STORE)]
    );
}

#[test]
fn derefs_including_moving_out_of_a_box_and_raw_pointers() {
    let _g = serial();
    let x = 42u64;
    let b = Box::new(String::from("hi"));
    let heap = addr(&*b);
    let mut y = 0u32;
    let py = &mut y as *mut u32;
    let (r, ev) = record(|| {
        let a = deref_read(&x);
        let s = unbox(b);
        // SAFETY: `py` points to `y`, which nothing else uses meanwhile.
        unsafe { raw_update(py) };
        (a, s)
    });
    assert_eq!(r, (42, "hi".to_string()));
    assert_eq!(y, 6);
    let string_size = std::mem::size_of::<String>().next_power_of_two() as u32;
    let py = py as usize as u64;
    assert_eq!(
        mems(&ev),
        [
            (addr(&x), 8, LOAD),
            (heap, string_size, LOAD),
            (py, 4, STORE),
            (py, 4, LOAD),
            (py, 4, STORE),
        ]
    );
}

#[test]
fn method_receivers_are_touched_before_the_call() {
    let _g = serial();
    let mut v = vec![vec![1u8], vec![]];
    let row = addr(&v[1]);
    let (_, ev) = record(|| push_row(&mut v, 1));
    assert_eq!(v[1], [9]);
    let vec_size = std::mem::size_of::<Vec<u8>>().next_power_of_two() as u32;
    assert_eq!(mems(&ev), [(row, vec_size, LOAD)]);
}

#[test]
fn side_effecting_indexes_run_once() {
    let _g = serial();
    let a = [10u8, 20, 30];
    let mut it = 1..3;
    let (r, ev) = record(|| index_once(&a, &mut it));
    assert_eq!(r, 20);
    assert_eq!(it, 2..3);
    assert_eq!(mems(&ev), [(addr(&a[1]), 1, LOAD)]);
}

#[test]
fn closures_borrows_and_comparisons() {
    let _g = serial();
    let a = [1u32, 2, 3, 4];
    let (r, ev) = record(|| gather(&a, &[3, 0]));
    assert_eq!(r, 5);
    assert_eq!(mems(&ev), [(addr(&a[3]), 4, LOAD), (addr(&a[0]), 4, LOAD)]);

    let s = [String::from("x"), String::from("x")];
    let mut b = [0u8; 2];
    let (r, ev) = record(|| borrow_and_compare(&s, &mut b));
    assert!(r);
    assert_eq!(b[1], 3);
    let m = mems(&ev);
    assert_eq!(m[0].0, addr(&s[0]));
    assert_eq!((m[1].0, m[1].2), (addr(&b[1]), STORE));
    assert_eq!(m.len(), 5, "&a[0], &mut b[1], *w, a[0], a[1]: {m:?}");
}

#[test]
fn zero_sized_accesses_and_idle_runs_emit_nothing() {
    let _g = serial();
    let u = [(); 2];
    let (_, ev) = record(|| units(&u));
    assert!(mems(&ev).is_empty());
    // No session: nothing recorded, same results.
    assert_eq!(read(&[1, 2], 1), 2);
}

#[test]
fn explicit_load_and_store() {
    let _g = serial();
    let v = [0u64; 8];
    let big = [0u8; 1000];
    let (_, ev) = record(|| {
        cabprof::mem::load(&v[3]);
        cabprof::mem::store(&v[4]);
        cabprof::mem::load(&big);
        cabprof::mem::load(&[0u8; 3]);
    });
    let m = mems(&ev);
    assert_eq!(
        &m[..3],
        [
            (addr(&v[3]), 8, LOAD),
            (addr(&v[4]), 8, STORE),
            (addr(&big), 128, LOAD)
        ]
    );
    assert_eq!(m[3].1, 4);
}
