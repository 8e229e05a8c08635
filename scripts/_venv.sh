# Shared by demo.sh and test.sh: create .venv and install the project with the given extras.
# torch is pinned first: the local embedder needs it and an unpinned torch would pull a
# multi-GB CUDA build.
ensure_venv() {
    local spec="$1"
    local python="${PYTHON:-python3}"
    if [ ! -x .venv/bin/python ]; then
        "$python" -m venv .venv
    fi
    # shellcheck disable=SC1091
    source .venv/bin/activate
    export PIP_DISABLE_PIP_VERSION_CHECK=1
    local stamp=".venv/.installed-$(echo "$spec" | tr -c 'a-z0-9' '_')"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "== installing $spec into .venv"
        python -m pip install -q --upgrade pip
        python -m pip install -q "torch==2.13.0"
        python -m pip install -q -e "$spec"
        touch "$stamp"
    fi
}
