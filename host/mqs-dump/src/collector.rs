//! `mqs-dump __collector`: the collector a job's starter (or --launcher)
//! runs on each host; see `mqs_acquire::collect`. Not for users.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use mqs_acquire::collect::{self, CollectorArgs as Run};

#[derive(Debug, Args)]
pub struct CollectorArgs {
    /// Where the front end listens: ADDR:PORT, comma separated, tried in order.
    #[arg(long, value_delimiter = ',', required = true)]
    pub connect: Vec<SocketAddr>,
    /// The one-time token the front end gave.
    #[arg(long)]
    pub token: String,
    /// The front end's step timeout, in milliseconds.
    #[arg(long)]
    pub timeout_ms: u64,
}

pub fn run(args: &CollectorArgs) -> ExitCode {
    let code = collect::run_collector(&Run {
        connect: args.connect.clone(),
        token: args.token.clone(),
        timeout: Duration::from_millis(args.timeout_ms.max(1)),
    });
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
