//! Speaking vLLM's language: the registry of `vllm serve` arguments ([`args`]), pasted command
//! lines ([`command`]) and deployment manifests ([`manifest`]) read into a [`crate::scenario::Scenario`]
//! with every argument accounted for, and a scenario printed back as the `vllm serve` /
//! `vllm bench serve` commands that would measure it. Pure (no files, no clock): the CLI reads
//! the text, the page pastes it. docs/inputs.md.

pub mod args;
pub mod command;
pub mod manifest;
pub mod yaml;

pub use args::{registry, ArgReport, ArgSpec, Status};
pub use command::{parse_command, to_bench_command, to_vllm_command, Pasted};
pub use manifest::{looks_like_manifest, parse_manifest, parse_pasted};

#[cfg(test)]
mod recipe_tests;
