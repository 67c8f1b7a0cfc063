//! Times pass 1 of the parallel decoder alone (the plan: chunks and memo definitions) on one
//! snapshot, best of three: `cargo run --release --example pass1 -- FILE`.

use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: pass1 FILE");
        std::process::exit(2);
    };
    let input = match memlens::input::read(std::path::Path::new(&path)) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let bytes = input.bytes();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let Some(plan) = memlens::pickle::scan::scan(bytes, 8 << 20) else {
            eprintln!("{path}: not a layout the parallel decoder plans");
            std::process::exit(1);
        };
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&plan);
    }
    let mb = bytes.len() as f64 / 1e6;
    println!(
        "{path}: {mb:.0} MB, pass 1 {best:.3} s, {:.0} MB/s",
        mb / best
    );
}
