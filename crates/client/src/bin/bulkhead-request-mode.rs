//! `bulkhead-request-mode NAME`: asks the supervisor, from inside a partition, to switch
//! the system to mode NAME (`bulkhead-request-mode --suspend`: to suspend it), as
//! `bulkhead_client::request_mode` does (docs/modes.md, "Requests from inside").
//! Exit status: 0 when the manager took the request, 1 when it was refused or could not
//! be sent (the reason on standard error), 2 for a usage error.
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [flag] if flag == "--suspend" => bulkhead_client::request_suspend(),
        [name] if !name.starts_with('-') => bulkhead_client::request_mode(name),
        _ => {
            eprintln!("usage: bulkhead-request-mode NAME | --suspend");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkhead-request-mode: {e}");
            ExitCode::from(1)
        }
    }
}
