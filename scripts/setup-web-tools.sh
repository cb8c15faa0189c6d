#!/usr/bin/env bash
# Installs the web toolchain ServeSim's page needs, skipping whatever is already at the right version.
# Versions verified on this machine kind: see docs/toolchain.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# npm-installed tools (wasm-opt) live outside the checkout so a fresh clone (CI) reuses them;
# override with SERVESIM_TOOLS_DIR.
TOOLS="${SERVESIM_TOOLS_DIR:-$HOME/.cache/servesim/tools}"
TRUNK_VERSION=0.21.14
WASM_BINDGEN_VERSION=0.2.130
BINARYEN_NPM_VERSION=132.0.0
export PATH="$TOOLS/node_modules/.bin:$HOME/.cargo/bin:$PATH"

log() { echo "[setup] $*" >&2; }

if ! rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  log "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if ! trunk --version 2>/dev/null | grep -q "$TRUNK_VERSION"; then
  log "installing trunk $TRUNK_VERSION (several minutes)"
  CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install trunk --version "$TRUNK_VERSION" --locked
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q "$WASM_BINDGEN_VERSION"; then
  log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

if ! "$TOOLS/node_modules/.bin/wasm-opt" --version 2>/dev/null | grep -q "version 132"; then
  log "installing binaryen@$BINARYEN_NPM_VERSION (wasm-opt) from npm into $TOOLS"
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --no-audit --no-fund --silent "binaryen@$BINARYEN_NPM_VERSION")
fi

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  log "installing chromium and chromium-driver from Debian"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
log "web tools ready: $(trunk --version), $(wasm-bindgen --version), wasm-opt $("$TOOLS/node_modules/.bin/wasm-opt" --version | head -1)"
