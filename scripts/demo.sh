#!/usr/bin/env bash
# Install htm with the local embedder into .venv and run the demo on the embedded SQLite
# default: no server, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv ".[local,cli]"
exec python -m htm_core.demo "$@"
