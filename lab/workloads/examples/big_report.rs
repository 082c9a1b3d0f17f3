//! Writes a large report: the input of the report-rendering memory measurements
//! (docs/PERFORMANCE.md, "Rendering a large report").
//!
//! ```text
//! cargo run --release -p cabprof-workloads --example big_report -- OUT.json
//!     [--branch-levels 12] [--chain 96] [--rounds 2]
//! ```
//!
//! A synthetic service: 256 profiled functions in four modules call each other along a
//! pseudo-random tree, two callees each for the first `--branch-levels` levels, then a chain of
//! up to `--chain` more calls, so calling contexts are many (about `2^levels * chain / 2`), wide
//! and deep (stacks past 64 frames are elided in flame graphs), and every call allocates. The
//! session runs method count, call graph, call tree, time and allocations, and the report is
//! written as JSON; `--rounds` runs the tree again (the same contexts, larger counts).

use cabprof::{Analysis, Session};
use clap::Parser;
use std::hint::black_box;
use std::io::Write as _;
use std::path::PathBuf;

#[global_allocator]
static ALLOC: cabprof::alloc::Tracked = cabprof::alloc::Tracked::system();

#[derive(Parser)]
struct Args {
    /// Where to write the JSON report.
    out: PathBuf,
    /// Levels at which each call makes two calls.
    #[arg(long, default_value_t = 12)]
    branch_levels: u32,
    /// The longest chain of single calls below the branching levels.
    #[arg(long, default_value_t = 96)]
    chain: u32,
    /// How many times the whole tree is called.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
}

/// A 64-bit mix (splitmix64's finaliser): the pseudo-random choice of callees.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// One call's work: a small allocation, then its callees. `left` is how many levels may
/// still follow: above `chain` a call makes two calls; at `chain` each callee starts a chain
/// of single calls as long as its seed says (1 to `chain`).
fn step(seed: u64, left: u32, chain: u32) {
    black_box(vec![0u8; (seed % 48) as usize + 1]);
    if left == 0 {
        return;
    }
    let callees = if left > chain { 2 } else { 1 };
    for k in 0..callees {
        let s = mix(seed ^ (k + 1));
        let next = if left - 1 == chain {
            1 + (s % chain as u64) as u32
        } else {
            left - 1
        };
        FUNCTIONS[(s % FUNCTIONS.len() as u64) as usize](s, next, chain);
    }
}

/// 64 profiled functions named `a00` to `a63` in the module it is expanded in.
macro_rules! functions {
    ($($f:ident)*) => {
        $(
            /// One call of the tree: allocates, then calls on.
            #[cabprof::profile]
            pub fn $f(seed: u64, left: u32, chain: u32) {
                super::step(seed, left, chain)
            }
        )*
        /// The module's functions.
        pub const ALL: [fn(u64, u32, u32); 64] = [$($f),*];
    };
}

macro_rules! module {
    ($m:ident) => {
        /// 64 of the profiled functions.
        pub mod $m {
            functions!(a00 a01 a02 a03 a04 a05 a06 a07 a08 a09 a10 a11 a12 a13 a14 a15
                a16 a17 a18 a19 a20 a21 a22 a23 a24 a25 a26 a27 a28 a29 a30 a31
                a32 a33 a34 a35 a36 a37 a38 a39 a40 a41 a42 a43 a44 a45 a46 a47
                a48 a49 a50 a51 a52 a53 a54 a55 a56 a57 a58 a59 a60 a61 a62 a63);
        }
    };
}

module!(request_handlers);
module!(storage_engine);
module!(query_planner);
module!(network_protocol);

/// Every profiled function, four modules of 64.
static FUNCTIONS: [fn(u64, u32, u32); 256] = {
    let mut all: [fn(u64, u32, u32); 256] = [request_handlers::a00; 256];
    let mut i = 0;
    while i < 64 {
        all[i] = request_handlers::ALL[i];
        all[64 + i] = storage_engine::ALL[i];
        all[128 + i] = query_planner::ALL[i];
        all[192 + i] = network_protocol::ALL[i];
        i += 1;
    }
    all
};

fn main() {
    let args = Args::parse();
    let chain = args.chain.max(1);
    let session = Session::builder()
        .analyses(&[
            Analysis::MethodCount,
            Analysis::CallGraph,
            Analysis::CallTree,
            Analysis::Time,
            Analysis::Allocations,
        ])
        .pin(false)
        .start()
        .expect("start the session");
    for _ in 0..args.rounds {
        FUNCTIONS[0](1, args.branch_levels + chain, chain);
    }
    let report = session.finish();
    let file = std::fs::File::create(&args.out).expect("create the output file");
    let mut out = std::io::BufWriter::new(file);
    report.write_json(&mut out).expect("write the report");
    out.flush().expect("write the report");
    let contexts = report.call_tree.as_ref().map_or(0, |t| t.contexts.len());
    eprintln!(
        "{}: {} calling contexts, {} bytes",
        args.out.display(),
        contexts,
        std::fs::metadata(&args.out).map_or(0, |m| m.len())
    );
}
