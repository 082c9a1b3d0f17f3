use cabprof::profile;

trait Shape {
    #[profile]
    fn area(&self) -> f64;
}

struct Unit;

impl Shape for Unit {
    fn area(&self) -> f64 {
        1.0
    }
}

fn main() {
    let _ = Unit.area();
}
