//! `demos-signal-completion`: signals completion (or the end of initialization)
//! from a shell script running under `bulkhead run` (or DEmOS), then waits until
//! the process is scheduled again. Exit codes: 0 ok, 100 not under a scheduler,
//! 101 malformed DEMOS_PARAMETERS, 2 channel error.
fn main() -> std::process::ExitCode {
    bulkhead_client::signal_completion_main()
}
