//! `servesim`: the command-line front end to servesim-core. `anyhow` lives only here.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "servesim",
    version,
    about = "Capacity and serving simulation for vLLM deployments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
