//! `servesim`: the command-line front end to servesim-core. `anyhow` lives only here.

mod args;
mod cmd_capacity;
mod cmd_compare;
mod cmd_search;
mod cmd_step;
mod cmd_sweep;
mod cmd_validate;
mod input;
mod topology_args;
mod vllm_flags;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Simulated concurrency / request-rate sweep of a vLLM deployment (docs/scenario.md).
    Sweep(Box<cmd_sweep::SweepArgs>),
    /// Predicted versus measured: simulate at the measured levels and score (docs/compare.md).
    Compare(Box<cmd_compare::CompareArgs>),
    /// Predicted versus measured on a calibration CSV (per point and aggregate error).
    Validate(Box<cmd_validate::ValidateArgs>),
    /// The step-time model's breakdown of one engine step of a scenario (docs/step-time.md).
    Step(Box<cmd_step::StepArgs>),
    /// Which deployment meets the SLA with the most tok/s per GPU or at the lowest cost
    /// (docs/search.md).
    Search(Box<cmd_search::SearchArgs>),
}

/// Prints the error chain as one line (`error: outer: inner`) and exits 1, without the
/// backtrace `anyhow` would add when RUST_BACKTRACE is set: input errors are the user's to fix.
fn main() -> std::process::ExitCode {
    restore_sigpipe();
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `servesim models | head -1`: when the reader goes away, end quietly as Unix tools do (the
/// default SIGPIPE action) instead of panicking in `println!` (Rust ignores SIGPIPE by default).
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run() -> anyhow::Result<()> {
    // `sweep` / `compare` take --model/--gpu from --scenario FILE, and `capacity` / `sweep` from
    // --vllm-command, when they are not given; vLLM's spellings come from the core's registry.
    let mut cmd = Cli::command();
    for sub in vllm_flags::SUBCOMMANDS {
        cmd = cmd.mut_subcommand(sub, |s| {
            s.mut_arg("model", |a| a.required(false).default_value(""))
                .mut_arg("gpu", |a| a.required(false).default_value(""))
                .after_help(vllm_flags::help())
        });
    }
    let (argv, vllm_args) = vllm_flags::split(&cmd, std::env::args_os().collect());
    let matches = cmd.get_matches_from(argv);
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match &mut cli.command {
        Command::Capacity(a) => a.deployment.vllm_args = vllm_args,
        Command::Sweep(a) => a.deployment.vllm_args = vllm_args,
        Command::Compare(a) => a.sweep.deployment.vllm_args = vllm_args,
        Command::Search(a) => {
            a.sweep.deployment.vllm_args = vllm_args;
            a.sweep.default_gpu = a.gpus.as_ref().and_then(|g| g.first().cloned());
        }
        _ => {}
    }
    match cli.command {
        Command::Sweep(a) => {
            let sub = matches
                .subcommand_matches("sweep")
                .expect("sweep subcommand matches");
            cmd_sweep::run_sweep(&a, sub)
        }
        Command::Compare(a) => {
            let sub = matches
                .subcommand_matches("compare")
                .expect("compare subcommand matches");
            cmd_compare::run_compare(&a, sub)
        }
        Command::Capacity(a) => {
            let sub = matches
                .subcommand_matches("capacity")
                .expect("capacity subcommand matches");
            cmd_capacity::run_capacity(&a, sub)
        }
        Command::Gpus(a) => cmd_capacity::run_gpus(&a),
        Command::Models(a) => cmd_capacity::run_models(&a),
        Command::Validate(a) => cmd_validate::run_validate(&a),
        Command::Step(a) => cmd_step::run_step(&a),
        Command::Search(a) => {
            let sub = matches
                .subcommand_matches("search")
                .expect("search subcommand matches");
            cmd_search::run_search(&a, sub)
        }
    }
}
