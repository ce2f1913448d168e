#!/usr/bin/env bash
# One GPU check of the encoders' torch, Triton and tiny-cuda-nn paths: parity (exit 1 on a failure), then a
# throughput table. Prints a notice and exits 0 where no CUDA device exists. Arguments go to gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
exec "$PYTHON" scripts/gpu_check.py "$@"
