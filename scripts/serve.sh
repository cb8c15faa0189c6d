#!/usr/bin/env bash
# Builds the page (installing missing tools first) and serves dist/ on http://127.0.0.1:8080
# (PORT=... to change). Any static file server works: dist/ uses relative paths only.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
bash scripts/build-web.sh
PORT="${PORT:-8080}"
echo "[serve] ServeSim on http://127.0.0.1:$PORT/ (Ctrl-C to stop)" >&2
exec python3 -m http.server "$PORT" --bind 127.0.0.1 --directory dist
