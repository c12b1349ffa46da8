//! `bulkhead-signal-completion`: the same as `demos-signal-completion`.
fn main() -> std::process::ExitCode {
    bulkhead_client::signal_completion_main()
}
