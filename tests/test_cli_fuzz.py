"""The config fuzzer through inr-fit: every mutated named config either fits (exit 0, metrics.json strict JSON
with finite numbers) or is refused with exit 2 (or stops diverged with exit 3) and one line on stderr, no
traceback, and nothing left in --out."""

import json
import random

import imageio.v3 as iio
import numpy as np
import pytest
import soundfile
import yaml
from fuzz import FIRST_SEED, NAMED, mutate

from inr_enc.cli import main as inr_fit

pytestmark = pytest.mark.slow  # 40 inr-fit runs

N_CASES = 40


@pytest.fixture(scope="module")
def signals(tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    rng = np.random.default_rng(0)
    iio.imwrite(folder / "img.png", rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    soundfile.write(folder / "sound.wav", rng.uniform(-0.5, 0.5, 64).astype(np.float32), 8000, subtype="PCM_16")
    return {"image": folder / "img.png", "audio": folder / "sound.wav"}


def _finite_numbers(value):
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite_numbers(v) for v in value)
    return not isinstance(value, float) or np.isfinite(value)


@pytest.mark.parametrize("case", range(N_CASES))
def test_a_mutated_config_fits_or_is_refused_in_one_line(tmp_path, capsys, signals, case):
    rng = random.Random(FIRST_SEED + 1000 + case)
    name = sorted(NAMED)[case % len(NAMED)]
    config, done = mutate(rng, NAMED[name])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    task = "audio" if "audio" in name else "image"
    out = tmp_path / "run"
    code = inr_fit([task, str(signals[task]), "--config", str(path), "--out", str(out), "--steps", "3",
                    "--max-memory", "2G", "--quiet"])
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if not line.startswith("inr-fit: warning:")]
    what = f"{name} with {done}: exit {code}, stderr {err[-1500:]}"
    if code == 0:
        text = (out / "metrics.json").read_text()

        def refuse(constant):
            raise AssertionError(f"metrics.json holds {constant}: {what}")

        metrics = json.loads(text, parse_constant=refuse)
        assert _finite_numbers(metrics) and metrics["psnr"] is not None, what
    else:
        assert code in (2, 3) and len(lines) == 1 and "Traceback" not in err, what
        assert not out.exists(), what
