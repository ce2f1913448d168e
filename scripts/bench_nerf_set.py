"""Run scripts/bench_nerf.py for one method over the scene set, and tabulate methods over it (docs/nerf.md).

The set (issue 28): scenes of different character, so that a default is chosen on all of them rather than on one.
Each synthetic scene is there twice, with its rendered (true) poses and with COLMAP's; the real captures are phone
videos posed by COLMAP (scenes/README.md says where each comes from and how to make it).

    # one method, every scene (a fresh process per scene; scenes already in RESULTS are kept unless --force):
    .venv-test/bin/python scripts/bench_nerf_set.py run inr-hashgrid --budget 300 [--label L] [-- ns-train args]
    # nerfacto, as docs/nerf.md measures it:
    .venv-test/bin/python scripts/bench_nerf_set.py run nerfacto --budget 300 --rays-per-batch 1024
    # the table of every method in RESULTS (per scene PSNR, then mean and worst), as Markdown:
    .venv-test/bin/python scripts/bench_nerf_set.py table

Each run's results.json is kept in RESULTS/<label>/<scene>.json (default docs/nerf-set/, committed, so that a peer
measured once is not measured again; label: the method, or --label for a variant); its checkpoints stay under OUT
(default out/nerf-set/, git-ignored).
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

from inr_enc.io import write_text_atomically

ROOT = Path(__file__).resolve().parents[1]
SCENE_SET = {  # name -> folder, relative to the repository root
    "unbounded": "data/scenes/unbounded", "unbounded-colmap": "data/scenes/unbounded-colmap",
    "room": "data/scenes/room", "room-colmap": "data/scenes/room-colmap",
    "forward": "data/scenes/forward", "forward-colmap": "data/scenes/forward-colmap",
    "tower": "data/scenes/tower", "tower-colmap": "data/scenes/tower-colmap",
    "beer (real)": "data/scenes/real/beer-colmap", "office (real)": "data/scenes/real/office-colmap",
}


def slug(scene: str) -> str:
    return scene.split(" ")[0]


def run(args: argparse.Namespace, extra: list[str]) -> None:
    label = args.label or args.method
    selected = {scene: folder for scene, folder in SCENE_SET.items()
                if not args.scenes or scene in args.scenes or slug(scene) in args.scenes}
    missing = [folder for folder in selected.values() if not (ROOT / folder).is_dir()]
    if missing or not selected:
        sys.exit(f"bench_nerf_set.py: no scenes selected, or missing scene folders: {', '.join(missing)} "
                 "(scenes/README.md makes them)")
    for scene, folder in selected.items():
        out, kept = args.out.resolve() / label / slug(scene), args.results / label / f"{slug(scene)}.json"
        if kept.exists() and not args.force:
            print(f"bench_nerf_set.py: {scene}: kept {kept}", flush=True)
            continue
        batch = [] if args.rays_per_batch is None else ["--rays-per-batch", str(args.rays_per_batch)]
        command = [sys.executable, "scripts/bench_nerf.py", args.method, "--data", folder, "--budget",
                   str(args.budget), "--out", str(out), *batch, *(["--", *extra] if extra else [])]
        print(f"bench_nerf_set.py: {scene}: {' '.join(command)}", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"bench_nerf_set.py: {scene} failed:\n{done.stderr[-3000:]}")
        measured = json.loads((out / args.method / "results.json").read_text())
        measured["set_command"] = shlex.join(["scripts/bench_nerf_set.py", *args.argv])
        write_text_atomically(kept, json.dumps(measured, indent=2) + "\n")
    print(table(args.results))


def results(kept: Path) -> dict[str, dict[str, dict]]:
    """label -> scene -> the results.json kept for it under `kept`."""
    found: dict[str, dict[str, dict]] = {}
    for scene in SCENE_SET:
        for path in sorted(kept.glob(f"*/{slug(scene)}.json")):
            found.setdefault(path.parent.name, {})[scene] = json.loads(path.read_text())
    return found


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def table(kept: Path) -> str:
    """Markdown: one row per scene, per method PSNR / SSIM / iterations / render rays/s / field share (and, with
    proposal sampling, in brackets the share of the radiance and proposal fields together); then the mean and the
    worst scene (lowest PSNR) of each method over the scenes it has."""
    found = results(kept)
    labels = sorted(found, key=lambda label: (label == "nerfacto", label))
    head = "| scene | " + " | ".join(f"{label}: PSNR / SSIM / iters / render rays/s / field share" for label in labels)
    lines = [head + " |", "|---" * (len(labels) + 1) + "|"]
    for scene in SCENE_SET:
        cells = []
        for label in labels:
            r = found[label].get(scene)
            cost = (r or {}).get("render_cost") or {}
            fields = f" ({fmt(cost['fields_share'])})" if cost.get("proposal_s") else ""
            cells.append("—" if r is None else f"{fmt(r['psnr'])} / {fmt(r['ssim'], 3)} / {r['iterations']:,} / "
                         f"{fmt(r['render_rays_per_s'], 0)} / {fmt(cost.get('field_share'))}{fields}")
        lines.append(f"| {scene} | " + " | ".join(cells) + " |")
    for name, pick in (("mean", statistics.fmean), ("worst", min)):
        cells = []
        for label in labels:
            psnrs = [r["psnr"] for r in found[label].values()]
            cells.append(f"**{fmt(pick(psnrs))}** over {len(psnrs)}" if psnrs else "—")
        lines.append(f"| {name} PSNR | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="run one method over the set")
    run_parser.add_argument("method")
    run_parser.add_argument("--budget", type=float, default=300.0, help="training-loop seconds per scene")
    run_parser.add_argument("--label", help="folder name for this variant (default: the method)")
    run_parser.add_argument("--scenes", nargs="+", help="only these scenes (names of SCENE_SET)")
    run_parser.add_argument("--force", action="store_true", help="rerun scenes that already have results")
    run_parser.add_argument("--rays-per-batch", type=int, help="passed to bench_nerf.py (nerfacto: 1024)")
    run_parser.add_argument("--out", type=Path, default=Path("out/nerf-set"), help="checkpoints and run folders")
    for p in (run_parser, sub.add_parser("table", help="print the Markdown table of every method in --results")):
        p.add_argument("--results", type=Path, default=ROOT / "docs" / "nerf-set", help="kept results.json files")
    args = parser.parse_args(argv[:split])
    args.argv = argv  # the command a kept result records
    if args.command == "run":
        run(args, argv[split + 1 :])
    else:
        print(table(args.results))


if __name__ == "__main__":
    main(sys.argv[1:])
