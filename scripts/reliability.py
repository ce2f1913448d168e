"""Re-measure docs/reliability.md's table: each row is a set of test cases (pytest node ids), run here and tallied.

    python scripts/reliability.py [--rows configs cli ...]      # prints the markdown table

A case is "fine" when its test passes: the tests assert the promise itself (a ValueError naming the problem, exit
code 2 with one line on stderr, the folder's bytes unchanged, finite outputs, strict JSON), each against an
independent reference where there is one. Failures are split into crashes (the test died of an unexpected
exception: a traceback a user would see) and wrong results (an assertion about the outcome failed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# row -> (the area, the pytest selection that measures it)
ROWS = {
    "configs": ("mutated configs, in-process (build_encoder, build_field, training settings)",
                ["tests/test_config_fuzz.py"]),
    "cli": ("mutated configs through inr-fit", ["tests/test_cli_fuzz.py"]),
    "images": ("image files", ["tests/test_signals.py", "-k",
                               "cmyk or exif or png or palette or tiff or pixels or tiny or train_split"]),
    "wav": ("WAV and other audio files", ["tests/test_signals.py", "-k", "pcm or wav or audio or samples or rate"]),
    "runs": ("kills, signals, damaged and concurrent runs", ["tests/test_run_safety.py",
             "tests/test_cli.py::test_interrupted_run_leaves_a_valid_checkpoint_and_resumes"]),
    "library": ("library inputs", ["tests/test_library_inputs.py"]),
    "plugin": ("plugin bad settings", ["tests/test_nerfstudio_plugin.py", "-k", "bad_settings"]),
    "wheel": ("the wheel", ["tests/test_wheel.py"]),
    "folders": ("folder runs: names, the lock, changed inputs, link loops, --together groups",
                ["tests/test_folder_runs.py"]),
    "config-files": ("config files: syntax, depth, parents, keys given twice", ["tests/test_config_files.py"]),
    "snapshots": ("inr-snapshot import: hostile and broken snapshots, bombs, no nerfstudio",
                  ["tests/test_snapshot_input.py"]),
    "memory": ("memory limits (process, cgroup), signals sized from headers, networks",
               ["tests/test_memory_limits.py", "tests/test_network_memory.py"]),
}


def measure(selection: list[str], first_seed: int = 0) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                        *selection],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env={**os.environ, "INR_ENC_FUZZ_SEED": str(first_seed)})
        counts = {"cases": 0, "fine": 0, "crash": 0, "wrong": 0, "skipped": 0}
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            counts["cases"] += 1
            failure = case.find("failure")
            if case.find("skipped") is not None:
                counts["skipped"] += 1
            elif case.find("error") is not None:
                counts["crash"] += 1
            elif failure is not None:
                assertion = (failure.get("message") or "").startswith(("AssertionError", "assert", "Failed:"))
                counts["wrong" if assertion else "crash"] += 1
            else:
                counts["fine"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=list(ROWS))
    parser.add_argument("--first-seed", type=int, default=0, help="the fuzz tests' first seed (tests/fuzz.py "
                        "FIRST_SEED; default 0, the suite's): another value tries cases the suite does not")
    args = parser.parse_args()
    print("| area | cases tried | fine | crash (unexpected exception) | wrong result | skipped | seconds | command |")
    print("|---|---|---|---|---|---|---|---|")
    for row in args.rows:
        area, selection = ROWS[row]
        start = time.perf_counter()
        counts = measure(selection, args.first_seed)
        seconds = time.perf_counter() - start
        command = "pytest " + " ".join(f"'{part}'" if " " in part else part for part in selection)
        print(f"| {area} | {counts['cases']} | {counts['fine']} | {counts['crash']} | {counts['wrong']} | "
              f"{counts['skipped']} | {seconds:.0f} | `{command}` |", flush=True)


if __name__ == "__main__":
    main()
