#!/usr/bin/env bash
# Build the sdist and the wheel, check them with twine, and install the wheel into a fresh
# virtualenv per extra (none, ui, mcp, langchain, llamaindex), in parallel, each smoke-tested
# by scripts/wheel_smoke.py from outside the source tree. uv makes the virtualenvs and
# installs from its cache (about a second per virtualenv once cached). Needs uv and twine (the
# dev extra). Usage: scripts/wheel_smoke.sh [extra ...]; HTM_SMOKE_PYTHON names another
# interpreter for the virtualenvs (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
extras=("$@")
[ ${#extras[@]} -gt 0 ] || extras=(core ui mcp langchain llamaindex)
work=$(mktemp -d "${TMPDIR:-/tmp}/htm-wheel-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH   # the installed wheel, never the source tree
python=$("${HTM_SMOKE_PYTHON:-python3}" -c 'import sys; print(sys.executable)')

# Build from a copy of the files git tracks or would track, so that no build/ or *.egg-info
# left in the tree by an earlier build can add files the sdist would otherwise miss.
mkdir "$work/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard \
        | tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$work/src"
else   # an unpacked sdist or archive: everything but build output and virtualenvs
    tar --exclude=./build --exclude=./dist --exclude='./*.egg-info' --exclude=./.venv -cf - . \
        | tar -xf - -C "$work/src"
fi
uv build --quiet --python "$python" --out-dir "$work/dist" "$work/src"   # the sdist, then the wheel from it
twine check --strict "$work"/dist/*
wheels=("$work"/dist/htm_memory-*-py3-none-any.whl)
[ ${#wheels[@]} -eq 1 ] || { echo "wheel smoke: expected one wheel, got ${wheels[*]}" >&2; exit 1; }
wheel=${wheels[0]}

smoke() {
    local extra=$1 venv="$work/venv-$1" spec=$wheel start=$SECONDS
    [ "$extra" = core ] || spec="$wheel[$extra]"
    uv venv --quiet --python "$python" "$venv"
    uv pip install --quiet --python "$venv/bin/python" "$spec"
    (cd "$work" && "$venv/bin/python" "$root/scripts/wheel_smoke.py" "$extra" "$wheel")
    echo "wheel smoke: $extra ok ($((SECONDS - start)) s, installing and checking)"
}

pids=()
for extra in "${extras[@]}"; do
    smoke "$extra" >"$work/$extra.log" 2>&1 &
    pids+=($!)
done
status=0
for i in "${!extras[@]}"; do
    if wait "${pids[$i]}"; then
        tail -n 1 "$work/${extras[$i]}.log"
    else
        echo "wheel smoke: ${extras[$i]} FAILED" >&2
        cat "$work/${extras[$i]}.log" >&2
        status=1
    fi
done
echo "wheel smoke: done in $SECONDS s"
exit "$status"
