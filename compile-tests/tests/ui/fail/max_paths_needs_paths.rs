use cabprof::profile;

#[profile(memory, max_paths = 64)]
fn f() {}

fn main() {
    f();
}
