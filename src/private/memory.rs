//! Memory: the accesses `#[profile(memory)]` marks, each recorded as a `Mem` event by
//! `crate::mem`.

/// A read of the place `x` refers to (`a[i]` read); returns `x`.
#[inline(always)]
pub fn load<T: ?Sized>(x: &T) -> &T {
    crate::mem::record(x, false);
    x
}

/// A read of a place borrowed mutably (the container in `a[i][j] = v`); returns `x`.
#[inline(always)]
pub fn load_mut<T: ?Sized>(x: &mut T) -> &mut T {
    crate::mem::record(&*x, false);
    x
}

/// A write of the place `x` refers to (`a[i] = v`, `&mut a[i]`); returns `x`.
#[inline(always)]
pub fn store<T: ?Sized>(x: &mut T) -> &mut T {
    crate::mem::record(&*x, true);
    x
}

/// A read and a write (`a[i] += v`); returns `x`.
#[inline(always)]
pub fn update<T: ?Sized>(x: &mut T) -> &mut T {
    crate::mem::record(&*x, false);
    crate::mem::record(&*x, true);
    x
}

/// A read of `x`, for places whose use the macro cannot classify (method receivers, `match`
/// scrutinees): the address is taken before the original expression runs.
#[inline(always)]
pub fn touch<T: ?Sized>(x: &T) {
    crate::mem::record(x, false);
}
