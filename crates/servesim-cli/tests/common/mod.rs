//! Shared by the CLI's integration tests: run the built `servesim` binary.

use std::process::Command;

/// Runs `servesim ARGS` and returns (exit code, stdout, stderr).
pub fn servesim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_servesim"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run servesim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
