use cabprof::profile;

fn main() {
    let double = #[profile] |x: u32| x * 2;
    let _ = double(2);
}
