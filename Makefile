# Two commands for a fresh clone (see README.md). Each creates or refreshes its own virtual environment.
# torch==2.13.0 is pinned so pip takes the CPU build; a bare "torch" would pull a multi-GB CUDA build.
PYTHON ?= python3
TORCH ?= torch==2.13.0

.PHONY: demo test bench

demo:
	$(PYTHON) -m venv .venv
	.venv/bin/pip install -q $(TORCH) -e .
	.venv/bin/inr-fit image --steps 300 --overwrite

test:
	$(PYTHON) -m venv .venv-test
	.venv-test/bin/pip install -q $(TORCH) -e ".[dev]"
	.venv-test/bin/python -m pytest -q

# Encoder throughput and the grid paths against the hardware ceiling, with nerfstudio's torch hash grid measured
# in the same run (needs torchvision's torch).
bench:
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/pip install -q torch==2.14.1 torchvision==0.29.1 -e ".[nerfstudio]"
	.venv-bench/bin/python scripts/bench_encoders.py
	.venv-bench/bin/python scripts/bench_grids.py
