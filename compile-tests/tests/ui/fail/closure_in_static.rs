use cabprof::profile;

#[profile]
static DOUBLE: fn(u32) -> u32 = |x| x * 2;

fn main() {
    let _ = DOUBLE(2);
}
