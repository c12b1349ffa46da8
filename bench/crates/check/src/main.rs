//! Loads DEmOS-style descriptions of N partitions (one process each, one window per
//! partition) and reports the load+validate time beside the time yaml-rust2 alone
//! takes to parse the same text (the baseline: the cost no loader can avoid).
//! Linear validation shows as a constant ratio across N; DEmOS's was quadratic.
//! Then one mapping of 100000 keys, 100000 tasks and 100000 channels (each was
//! over 20 s when duplicate checks compared every pair).

use std::time::{Duration, Instant};

fn description(n: usize) -> String {
    let mut s = String::from("partitions:\n");
    for i in 0..n {
        s.push_str(&format!(
            "  - name: p{i}\n    processes: [{{cmd: ./work {i}, budget: 1}}]\n"
        ));
    }
    s.push_str("windows:\n");
    for i in 0..n {
        s.push_str(&format!(
            "  - {{length: 2, slices: [{{cpu: 0, sc_partition: p{i}}}]}}\n"
        ));
    }
    s
}

/// One mapping of `n` keys (rejected: the keys are unknown; the cost is the
/// duplicate-key check before it), `n` tasks in one partition, `n` channels.
fn wide(what: &str, n: usize) -> String {
    match what {
        "keys" => (0..n).map(|i| format!("k{i}: {i}\n")).collect(),
        "tasks" => {
            let tasks: String = (0..n)
                .map(|i| format!("      - {{name: t{i}, budget: 1us, period: 10s}}\n"))
                .collect();
            format!("system: {{cpus: 0}}\npartitions:\n  - name: p\n    kind: rt\n    cpus: 0\n    tasks:\n{tasks}")
        }
        _ => {
            let channels: String = (0..n)
                .map(|i| format!("  - {{name: c{i}, kind: latest, message_size: 8, writer: a, readers: [b]}}\n"))
                .collect();
            format!("system: {{}}\npartitions: [{{name: a, kind: be}}, {{name: b, kind: be}}]\nchannels:\n{channels}")
        }
    }
}

fn best_of<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let mut fields = Vec::new();
    for n in [100, 1_000, 10_000] {
        let src = description(n);
        let load = best_of(5, || {
            bulkhead_model::load_str(&src, "bench.yaml").expect("valid description");
        });
        let parse = best_of(5, || {
            yaml_rust2::YamlLoader::load_from_str(&src).expect("valid yaml");
        });
        let ratio = load.as_secs_f64() / parse.as_secs_f64();
        println!("{n:>6} partitions: load+validate {load:>10.2?}  yaml parse only {parse:>10.2?}  ratio {ratio:.2}");
        fields.push(format!(
            "\"load_{n}_ms\": {:.3}, \"yaml_parse_{n}_ms\": {:.3}",
            load.as_secs_f64() * 1e3,
            parse.as_secs_f64() * 1e3
        ));
    }
    for what in ["keys", "tasks", "channels"] {
        let n = 100_000;
        let src = wide(what, n);
        let load = best_of(1, || {
            let _ = bulkhead_model::load_str(&src, "bench.yaml");
        });
        println!("{n:>6} {what}: load+validate {load:>10.2?}");
        fields.push(format!(
            "\"load_{n}_{what}_ms\": {:.3}",
            load.as_secs_f64() * 1e3
        ));
    }
    println!("{{{}}}", fields.join(", "));
}
