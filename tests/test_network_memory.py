"""Building a network under a real address-space limit (RLIMIT_AS): a config whose counted parameters fit the
memory left builds (no init temporaries the size of the weights), one just over is refused with ValueError, never
a RuntimeError or MemoryError from the allocator."""

import subprocess
import sys

import pytest

BUDGET = 384 * 2**20
# (network, encoding, the config key scaled to reach a parameter count)
CASES = {
    "MLP": ({"otype": "MLP", "n_hidden_layers": 2}, None, "n_neurons"),
    "CutlassMLP": ({"otype": "CutlassMLP", "n_hidden_layers": 2}, None, "n_neurons"),
    "PatchMLP": ({"otype": "PatchMLP", "patches": [16, 16], "n_hidden_layers": 2}, None, "n_neurons"),
    "Separable": ({"otype": "Separable"}, {"otype": "ShiftedBasis"}, "n_bases"),
    "PINs": ({"otype": "PINs", "n_hidden_layers": 2}, {"otype": "Frequency", "n_frequencies": 4}, "n_neurons"),
}
SCRIPT = """
import resource, sys
from inr_enc.config import memory
from inr_enc.field import build_field
from inr_enc.field.schema import resolve_field
from inr_enc.encoders.registry import encoder_spec
from inr_enc.networks.registry import network_class
budget, cases = int(sys.argv[1]), eval(sys.argv[2])

def config(network, encoding, key, n):
    part = "encoding" if key == "n_bases" else "network"
    field = {"network": dict(network), **({"encoding": dict(encoding)} if encoding else {})}
    field[part][key] = n
    return field

def nbytes(field):
    resolved = resolve_field(field, 2, 3)
    spec = encoder_spec(resolved["encoding"], 2)
    return 4 * (spec.cls.parameter_count(2, spec.config)
                + network_class(resolved["network"]).parameter_count(spec.n_output_dims, 3, resolved["network"], spec))

def sized(case, target):  # the largest n whose counted parameters stay within target bytes
    lo, hi = 1, 1 << 20
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if nbytes(config(*case, mid)) <= target else (lo, mid - 1)
    return config(*case, lo)

for name, case in cases.items():
    for share in (0.85, 1.15):
        field = sized(case, share * budget)
        vm = memory._fields(memory._read_text("/proc/self/status"), ":")["VmSize"] * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + budget, resource.RLIM_INFINITY))
        try:
            model = build_field(2, 3, field)
            outcome = "built"
        except ValueError as error:
            outcome = "refused" if "left under the process limit (RLIMIT_AS)" in str(error) else f"other: {error}"
        except BaseException as error:
            outcome = f"crash: {type(error).__name__}: {str(error)[:100]}"
        model = None
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print(name, share, outcome, flush=True)
"""


@pytest.mark.slow
def test_each_network_builds_within_the_limit_or_is_refused():
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(BUDGET), repr(CASES)], capture_output=True, text=True,
                            timeout=300)
    lines = result.stdout.strip().splitlines()
    expected = [f"{name} {share} {outcome}" for name in CASES
                for share, outcome in ((0.85, "built"), (1.15, "refused"))]
    assert lines == expected, result.stdout + result.stderr
