//! `bulkhead-app dashboard`: the dashboard's command line ([`crate::dashboard`] serves
//! it), a best-effort process.

use super::R;

#[derive(clap::Args)]
pub struct Args {
    /// Binds this address (default 127.0.0.1:8080) when the supervisor handed over no
    /// listening socket (BULKHEAD_LISTEN)
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The IVI read mapper's dashboard channel
    #[arg(long, value_name = "CHANNEL", default_value = "ic_dashboard")]
    from: String,
    /// The channel of the HVAC commands
    #[arg(long, value_name = "CHANNEL", default_value = "hvac_control")]
    to: String,
}

pub fn run(args: &Args) -> R<()> {
    crate::dashboard::run(args.listen.as_deref(), &args.from, &args.to)
}
