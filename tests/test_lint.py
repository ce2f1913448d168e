"""The sources pass ruff as pyproject.toml's [tool.ruff] configures it: pycodestyle's errors and warnings, pyflakes
and isort's order, lines of at most 120 characters."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed: it comes with the dev extra (pip install -e '.[dev]')")
def test_ruff_finds_no_violation():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                             "inr_enc", "tests", "scripts"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"ruff found violations:\n{result.stdout[-6000:]}{result.stderr[-2000:]}"
