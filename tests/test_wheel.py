"""The wheel holds what an installed inr_enc reads: the named configs, inr-fit image's default signal and the C++
kernel sources. Built from a copy of the sources, installed (not editable, no network, no dependencies: those of
the test environment serve) into a folder of its own, and run from there, away from the checkout."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("setuptools")
pytestmark = pytest.mark.slow  # builds and installs a wheel

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "inr_enc"

CHECK_INSTALLED = """
import sys
from pathlib import Path
import inr_enc
from inr_enc.cli import DEFAULT_IMAGE
from inr_enc.config import CONFIG_DIR, available_configs, load_config
from inr_enc.ops.grid import cpu_kernel
from inr_enc.optim import lazy_adam

site = Path(sys.argv[1]).resolve()
for path in (inr_enc.__file__, CONFIG_DIR, DEFAULT_IMAGE):  # the installed copy ran, not the editable checkout
    assert Path(path).resolve().is_relative_to(site), path
assert load_config("hashgrid")["encoding"]["otype"] == "HashGrid"
assert {"hashgrid", "siren-audio"} <= set(available_configs()), available_configs()
assert DEFAULT_IMAGE.is_file()
for source in (*cpu_kernel.SOURCES, *cpu_kernel.HEADERS, *lazy_adam.SOURCES):
    assert Path(source).is_file(), source
print("ok")
"""


def data_files(names):
    """The package's files that are not Python sources (package data), as paths relative to the wheel's root."""
    return sorted(n for n in names if n.startswith("inr_enc/") and not n.endswith((".py", ".pyc"))
                  and "__pycache__" not in n)


def test_an_installed_wheel_loads_named_configs_and_fits_the_default_image(tmp_path):
    source = tmp_path / "src"  # a copy: the build writes build/ and *.egg-info next to the sources
    shutil.copytree(PACKAGE, source / "inr_enc", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", str(source), "-w",
                    str(tmp_path / "dist")], check=True, capture_output=True, timeout=300)
    wheel, = (tmp_path / "dist").glob("inr_enc-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packed = data_files(archive.namelist())
    expected = data_files(p.relative_to(source).as_posix() for p in (source / "inr_enc").rglob("*") if p.is_file())
    assert packed == expected  # every file of the package folder that is not Python, and nothing else
    assert {"inr_enc/configs/hashgrid.yaml", "inr_enc/data/astronaut.png", "inr_enc/ops/grid/grid_cpu.cpp",
            "inr_enc/ops/grid/grid_kernels.h", "inr_enc/optim/lazy_adam.cpp"} <= set(packed)

    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], check=True,
                   capture_output=True, timeout=300)
    # PYTHONPATH comes before the test environment's editable finder (appended to sys.meta_path); cwd has no
    # inr_enc folder. No C++ build: its folder is keyed by the sources' contents, shared with the checkout's, and
    # ninja would recompile (a minute) for sources at a new path; the installed sources are checked above.
    env = {**os.environ, "PYTHONPATH": str(site), "INR_ENC_NO_EXTENSION": "1", "CUDA_VISIBLE_DEVICES": ""}

    def python(*args):
        result = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    assert python("-c", CHECK_INSTALLED, str(site)).stdout.strip() == "ok"
    out = tmp_path / "o"
    python("-m", "inr_enc.cli", "image", "--steps", "2", "--out", str(out), "--quiet")  # default image and config
    for name in ("checkpoint.pt", "config.yaml", "metrics.json", "reconstruction.png"):
        assert (out / name).is_file(), name
    assert json.loads((out / "metrics.json").read_text())["steps"] == 2
