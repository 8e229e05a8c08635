#!/usr/bin/env bash
# Install everything the tests need into .venv, then lint, type-check and run the suite.
# The suite starts its own PostgreSQL + pgvector server (pgserver) unless
# HTM_TEST_DATABASE_URL points at one. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv ".[all,notebooks,dev]"
# Debian packages the tests drive: chromium (the browser tests of `htm ui`, through
# playwright) and pgbouncer (PostgreSQL through a transaction-mode pooler).
install_deb() {  # install_deb PACKAGE PROGRAM WHY
    if [ ! -x "$2" ] && command -v apt-get >/dev/null 2>&1; then
        echo "== installing $1 ($3)"
        local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1")
        "${apt[@]}" >/dev/null || { apt-get update -q >/dev/null && "${apt[@]}" >/dev/null; } \
            || echo "could not install $1; $3 will fail in CI" >&2
    fi
}
install_deb chromium /usr/bin/chromium "the htm ui browser tests"
install_deb pgbouncer /usr/sbin/pgbouncer "the tests through PgBouncer"
# The wheel smoke (scripts/wheel_smoke.sh) runs beside the lint and the suite, its output kept
# for the end; HTM_SKIP_WHEEL_SMOKE=1 leaves it out.
smoke_pid=""
if [ "${HTM_SKIP_WHEEL_SMOKE:-0}" != 1 ]; then
    smoke_log=$(mktemp "${TMPDIR:-/tmp}/htm-wheel-smoke-log.XXXXXX")
    bash scripts/wheel_smoke.sh >"$smoke_log" 2>&1 &
    smoke_pid=$!
fi
echo "== ruff"
ruff check htm_core htm_integrations tests benchmarks examples
echo "== mypy (strict on htm_core)"
mypy htm_core
echo "== pytest"
# Two worker processes (pytest-xdist), each with its own PostgreSQL, PgBouncer, replica and
# chromium; a test file stays on one worker. HTM_TEST_WORKERS sets the count (0: no workers).
status=0
python -m pytest -q -p no:cacheprovider -n "${HTM_TEST_WORKERS:-2}" --dist loadfile "$@" \
    || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    status=1
fi
if [ -n "$smoke_pid" ]; then
    echo "== wheel smoke (sdist and wheel built, twine check, the wheel with each extra in a fresh venv)"
    smoke_status=0
    wait "$smoke_pid" || smoke_status=$?
    cat "$smoke_log"
    rm -f "$smoke_log"
    [ "$smoke_status" -eq 0 ] || status=1
fi
exit "$status"
