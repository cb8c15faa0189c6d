//! ServeSim's core: everything the page and the CLI compute, in pure Rust.
//!
//! Architecture invariant: no wasm-bindgen, web-sys, Leptos or plotters; no wall clock, file
//! system, threads or OS randomness. The crate builds for `wasm32-unknown-unknown` and gives
//! bit-identical results there and natively. See ARCHITECTURE.md for the code map.

pub mod bounds;
pub mod budget;
pub mod capacity;
pub mod compare;
pub mod deploy;
pub mod dtype;
pub mod engine;
pub mod evidence;
pub mod fieldwise;
pub mod gpu;
pub mod metric;
pub mod metrics;
pub mod model;
pub mod offload;
pub mod parallel;
pub mod perf;
pub mod rng;
pub mod scenario;
pub mod search;
pub mod settings;
pub mod share;
pub mod sla_refine;
pub mod speculative;
pub mod sweep;
pub mod topology;
pub mod units;
pub mod validate;
pub mod vllm;
pub mod workload;
