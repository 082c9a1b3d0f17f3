use cabprof::profile;

#[profile(paths, paths)]
fn f() {}

fn main() {
    f();
}
