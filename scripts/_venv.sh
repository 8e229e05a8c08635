# Shared by demo.sh and test.sh: create .venv and install the project with the given extras.
# torch is installed first because the local embedder needs it. The pin torch==2.13.0 does
# not by itself give a CPU build: from PyPI it is the CUDA build plus a dozen nvidia-*
# packages. It works here because this machine's pip configuration finds a local CPU wheel
# (torch-2.13.0+cpu in its find-links directory) that satisfies the pin. Elsewhere, install
# the CPU build the way PyTorch documents it before running these scripts:
#     pip install torch --index-url https://download.pytorch.org/whl/cpu
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
