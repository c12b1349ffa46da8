//! `bulkhead-app PROGRAM`: the programs of the DriveOS vehicle (docs/vehicle.md).

fn main() {
    std::process::exit(bulkhead_apps::programs::main(std::env::args_os()));
}
