"""The package's structure: no import cycles (every import counts, deferred ones too), layers that import only
downwards (docs/architecture.md), and modules under 300 lines. Read from the sources with ast."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "inr_enc"
MAX_LINES = 300
# A module's layer is its folder's, from the bottom; a module may import its own layer and those below. The
# package root's own modules (io, metrics, version, and __init__, which imports its public names on use) are layer 0.
LAYERS = {"": 0, "config": 0, "ops": 1, "encoders": 2, "optim": 2, "networks": 3, "field": 4, "fitting": 5, "nerf": 5,
          "cli": 6, "nerfstudio": 6}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The inr_enc modules ``name`` imports anywhere in its source (function bodies and TYPE_CHECKING included);
    ``from package import module`` counts as importing the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            prefix = ".".join(base + ([node.module] if node.module else []))
            # each name is a submodule, or else an attribute of the module (or package) it comes from
            candidates = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
                          for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), or a module importing itself."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def folder(name: str) -> str:
    """The top-level folder of inr_enc that holds module ``name`` ("" for the package root's own modules)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else ""


def layer(name: str) -> int:
    return LAYERS[folder(name)]


def test_every_folder_has_a_layer():
    folders = {path.parent.relative_to(PACKAGE).parts[0] for path in PACKAGE.glob("*/**/*.py")}
    assert folders == set(LAYERS) - {""}
    assert folder("inr_enc.ops.grid.layout") == "ops" and folder("inr_enc.io") == "" and layer("inr_enc.cli") == 6


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_deferred_and_relative_imports(tmp_path):
    known = {"inr_enc.x": tmp_path / "x.py", "inr_enc.y": tmp_path / "y.py", "inr_enc.pkg": tmp_path / "__init__.py",
             "inr_enc.pkg.z": tmp_path / "z.py"}
    (tmp_path / "x.py").write_text("def f():\n    from .y import g\n    from .pkg import z\nimport inr_enc.pkg\n")
    assert imports("inr_enc.x", known["inr_enc.x"], known) == {"inr_enc.y", "inr_enc.pkg.z", "inr_enc.pkg"}


def test_no_import_cycles():
    edges = graph()
    assert len(edges) > 40 and edges["inr_enc.encoders.grid"]  # the reader found the package and its imports
    assert cycles(edges) == []


def test_layers_import_only_downwards():
    upward = [f"{name} ({layer(name)}) imports {target} ({layer(target)})"
              for name, targets in graph().items() for target in targets if layer(target) > layer(name)]
    assert upward == []


def test_no_module_over_300_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_command_line_and_configs_load_without_torch_and_names_load_on_use():
    """inr-fit installs its Ctrl-C/SIGTERM handling before torch loads (cli.py); ``inr_enc``'s public names and
    subpackages are imported on first use."""
    import subprocess
    import sys

    script = ("import sys, inr_enc.cli, inr_enc.config; assert 'torch' not in sys.modules, 'torch loaded early'; "
              "import inr_enc; assert inr_enc.encoders.ENCODERS is inr_enc.ENCODERS and callable(inr_enc.build_field); "
              "assert 'HashGrid' in inr_enc.ENCODERS")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
