# Two commands for a fresh clone (see README.md). Each creates or refreshes its own virtual environment.
# torch==2.13.0 is pinned so pip takes the CPU build; a bare "torch" would pull a multi-GB CUDA build.
# The tests include the nerfstudio plugin: nerfstudio 1.1.5 needs torchvision, whose PyPI wheels import beside
# torch 2.14.1 (about 2 minutes and 8 GB).
PYTHON ?= python3
TORCH ?= torch==2.13.0
NERFSTUDIO_TORCH ?= torch==2.14.1 torchvision==0.29.1

.PHONY: demo test test-fast bench

demo:
	$(PYTHON) -m venv .venv
	.venv/bin/pip install -q $(TORCH) -e .
	.venv/bin/inr-fit image --steps 300 --overwrite

test:
	$(PYTHON) -m venv .venv-test
	.venv-test/bin/pip install -q $(NERFSTUDIO_TORCH) -e ".[dev,nerfstudio]"
	.venv-test/bin/python -m pytest -q

# The tests not marked slow (docs/development.md), in the environment `make test` made: a few minutes on 2 cores.
test-fast:
	.venv-test/bin/python -m pytest -q -m "not slow"

# Encoder throughput and the grid paths against the hardware ceiling, with nerfstudio's torch hash grid measured
# in the same run (needs torchvision's torch).
bench:
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/pip install -q $(NERFSTUDIO_TORCH) -e ".[nerfstudio]"
	.venv-bench/bin/python scripts/bench_encoders.py
	.venv-bench/bin/python scripts/bench_grids.py
