//! `bulkhead-app PROGRAM`: the programs of the DriveOS vehicle (docs/vehicle.md).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(bulkhead_apps::programs::main(&args));
}
