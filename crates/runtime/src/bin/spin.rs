//! `bulkhead-spin [WORK]`: a CPU-bound test program. Without WORK it spins forever;
//! with WORK it does WORK million iterations of a fixed integer computation, prints
//! the wall time it took in nanoseconds, and exits (the fixed-work program of the
//! window-switch benchmark).
use std::hint::black_box;
use std::time::Instant;

fn work(iterations: u64) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..iterations {
        x = black_box(x ^ (x << 13) ^ (x >> 7) ^ i);
    }
    x
}

fn main() -> std::process::ExitCode {
    let Some(arg) = std::env::args().nth(1) else {
        loop {
            black_box(work(1_000_000));
        }
    };
    let Ok(millions) = arg.parse::<u64>() else {
        eprintln!("usage: bulkhead-spin [MILLION_ITERATIONS]");
        return 2.into();
    };
    let start = Instant::now();
    black_box(work(millions * 1_000_000));
    println!("{}", start.elapsed().as_nanos());
    0.into()
}
