#!/usr/bin/env bash
# Runs every test ServeSim has, installing what is missing first. This is what CI runs (.ci/run).
#   lints (fmt, clippy) -> native unit/integration tests -> core builds for wasm32 -> page build -> browser tests
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# Dependencies compiled once are reused across clones (cargo's fingerprints keep this correct).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/servesim/target}"
export CARGO_TERM_COLOR=never
step() { echo; echo "=== $* ==="; }

step "toolchain"
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
bash scripts/setup-web-tools.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "native tests (core + CLI)"
cargo test

step "core builds for wasm32-unknown-unknown"
cargo build -p servesim-core --target wasm32-unknown-unknown
if [ -f web/Cargo.toml ]; then
  step "cargo clippy for the page's wasm code (-D warnings)"
  cargo clippy -p servesim-web --target wasm32-unknown-unknown -- -D warnings
fi

if [ -f web/Cargo.toml ]; then
  step "page unit tests (native: form, protocol, charts, exports)"
  cargo test -p servesim-web
  step "page build (trunk, release)"
  bash scripts/build-web.sh
  step "browser tests (headless Chromium)"
  cargo test -p servesim-e2e -- --test-threads=1
fi
echo
echo "all test stages passed"
