//! ServeSim's web calculator: a Leptos client-side page whose sweeps run in a Web Worker.
//! See docs/web.md for the architecture, the worker protocol and the share-link format.
//!
//! The modules above the line are plain Rust, compiled and tested natively; the browser-only
//! modules below are compiled for wasm32 only.

pub mod charts;
pub mod command_tools;
pub mod compare_charts;
pub mod compare_ui;
pub mod core_api;
pub mod form;
pub mod form_engine;
pub mod form_keys;
pub mod form_offload;
pub mod form_pd;
pub mod form_spec;
pub mod level_pool;
pub mod pins;
pub mod protocol;
pub mod search_chart;
pub mod search_form;
pub mod search_tools;
pub mod search_view;
pub mod table;

// ---- browser only ----
#[cfg(target_arch = "wasm32")]
pub mod app;
#[cfg(target_arch = "wasm32")]
pub mod browser;
#[cfg(target_arch = "wasm32")]
pub mod worker;
