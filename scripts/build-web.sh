#!/usr/bin/env bash
# Builds the page into dist/ (release: wasm-opt -Oz, profile wasm-release), installing the web
# toolchain first when it is missing (scripts/setup-web-tools.sh skips what is already there).
# Usage: scripts/build-web.sh [extra trunk build args]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
TOOLS="${SERVESIM_TOOLS_DIR:-$HOME/.cache/servesim/tools}"
export PATH="$TOOLS/node_modules/.bin:$HOME/.cargo/bin:$PATH"
if ! command -v trunk >/dev/null 2>&1 || ! command -v wasm-bindgen >/dev/null 2>&1 \
   || [ ! -x "$TOOLS/node_modules/.bin/wasm-opt" ]; then
  bash "$ROOT/scripts/setup-web-tools.sh"
fi
# Trunk must not reach the network (docs/toolchain.md): offline = true in Trunk.toml, no version check.
export TRUNK_SKIP_VERSION_CHECK=true
trunk build --release "$@"
# The page binary links no worker-only core code (ARCHITECTURE.md): checked on cargo's
# pre-wasm-opt build, which still has its function names.
python3 "$ROOT/scripts/check-page-binary.py" \
  "${CARGO_TARGET_DIR:-$ROOT/target}/wasm32-unknown-unknown/wasm-page/app.wasm"
wasm=$(ls dist/app-*_bg.wasm | head -1)
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
wraw=$(stat -c %s dist/worker_bg.wasm)
wgz=$(gzip -9 -c dist/worker_bg.wasm | wc -c)
echo "[build-web] page wasm: $raw bytes raw, $gz gzipped; worker wasm: $wraw raw, $wgz gzipped" >&2
# The page's budget (docs/performance.md): the page wasm stays under 700 KB gzipped; a build over it fails.
PAGE_BUDGET_GZ=700000
if [ "$gz" -gt "$PAGE_BUDGET_GZ" ]; then
  echo "[build-web] FAIL: page wasm is $gz bytes gzipped, over the $PAGE_BUDGET_GZ-byte budget; move worker-only code out of the page binary (docs/performance.md)" >&2
  exit 1
fi
