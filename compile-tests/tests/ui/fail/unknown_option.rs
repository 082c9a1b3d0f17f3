use cabprof::profile;

#[profile(pathz)]
fn f() {}

fn main() {
    f();
}
