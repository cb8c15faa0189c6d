//! `servesim`: the command-line front end to servesim-core. `anyhow` lives only here.

mod args;
mod cmd_capacity;
mod cmd_validate;

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
enum Command {
    /// vLLM's start-up KV sizing: will it start, and how many KV tokens?
    Capacity(Box<cmd_capacity::CapacityArgs>),
    /// The GPU catalog.
    Gpus(cmd_capacity::ListArgs),
    /// The model catalog.
    Models(cmd_capacity::ListArgs),
    /// Predicted versus measured on a calibration CSV (per point and aggregate error).
    Validate(Box<cmd_validate::ValidateArgs>),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Capacity(a) => cmd_capacity::run_capacity(&a),
        Command::Gpus(a) => cmd_capacity::run_gpus(&a),
        Command::Models(a) => cmd_capacity::run_models(&a),
        Command::Validate(a) => cmd_validate::run_validate(&a),
    }
}
