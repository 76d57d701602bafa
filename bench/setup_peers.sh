#!/usr/bin/env bash
# Install the benchmark peers. None of them is a dependency of msir.
#
#   bash bench/setup_peers.sh            # torch + jax into the current env, mindspore into .venv-mindspore
#   bash bench/setup_peers.sh --no-mindspore
#
# * PyTorch: exactly torch==2.13.0, the CPU build (any other spec may pull a
#   multi-GB CUDA build).
# * JAX: jax + jaxlib (CPU).
# * MindSpore needs numpy<2, msir needs numpy>=2: it gets its own virtualenv
#   (python3.11, numpy<2) at $MSIR_BENCH_MS_VENV (default .venv-mindspore at the repo
#   root). bench/run.py runs MindSpore's part with that venv's python; without it,
#   MindSpore is reported as skipped.
# Each step is independent: a peer that cannot be installed is reported and skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
MS_VENV=${MSIR_BENCH_MS_VENV:-.venv-mindspore}
status=()

if $PY -m pip install -q 'torch==2.13.0'; then status+=("torch: ok"); else status+=("torch: FAILED (bench reports it as skipped)"); fi
if $PY -m pip install -q jax jaxlib; then status+=("jax: ok"); else status+=("jax: FAILED (bench reports it as skipped)"); fi

if [[ "${1:-}" != "--no-mindspore" ]]; then
    MS_PY=$(command -v python3.11 || command -v python3 || true)
    if [[ -z "$MS_PY" ]]; then
        status+=("mindspore: no python3.11 found (bench reports it as skipped)")
    elif { [[ -x "$MS_VENV/bin/python" ]] || "$MS_PY" -m venv "$MS_VENV"; } \
        && "$MS_VENV/bin/python" -m pip install -q 'numpy<2' 'mindspore==2.10.0'; then
        if "$MS_VENV/bin/python" -c 'import mindspore' >/dev/null 2>&1; then
            status+=("mindspore: ok ($MS_VENV)")
        else
            status+=("mindspore: installed but 'import mindspore' fails (bench reports it as skipped)")
        fi
    else
        status+=("mindspore: could not be installed here (bench reports it as skipped)")
    fi
fi
printf '%s\n' "${status[@]}"
