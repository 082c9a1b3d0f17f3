use cabprof::profile;

#[profile]
struct Config {
    verbose: bool,
}

fn main() {
    let _ = Config { verbose: true }.verbose;
}
