//! Predicted versus measured on the page (GitHub issue "Predicted versus measured"): import
//! measured results (paste or upload; tables or benchmark-client exports), pair each arm with a
//! scenario, predict at exactly the measured levels, score with the core's `score_all`, chart,
//! export, and carry the measured data in the share link. See docs/web-compare.md.
//!
//! The submodules above the line are plain Rust, tested natively; `ui` is the Leptos panel.

pub mod accuracy;
pub mod import_view;
pub mod link;
pub mod predict;
pub mod state;

// ---- browser only ----
#[cfg(target_arch = "wasm32")]
pub mod ui;
#[cfg(target_arch = "wasm32")]
pub use ui::{ComparePanel, CompareState};
