"""docs/reference.md is what scripts/reference.py generates now, and what it says of a key comes from the checks."""

import importlib.util
import sys
from pathlib import Path

import pytest

from inr_enc.config.checks import Check, check_bool, check_choice, check_float, check_int, recording_checks

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.append(str(SCRIPTS))  # last: tests/reference.py keeps the name "reference" for the other tests
from reference_probe import NOT_EVERY, SEE_CLASS, Component, gather, value_text  # noqa: E402

_spec = importlib.util.spec_from_file_location("reference_script", SCRIPTS / "reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


@pytest.fixture(scope="module")
def text():
    return reference.render()


def test_docs_reference_is_up_to_date(text):
    assert reference.DOC.read_text() == text, "docs/reference.md is out of date: run python scripts/reference.py"


def test_check_mode_tells_an_out_of_date_file(tmp_path, monkeypatch, text):
    stale = tmp_path / "reference.md"
    stale.write_text(text.replace("integer in [1, 64]", "integer in [1, 65]", 1))
    monkeypatch.setattr(reference, "DOC", stale)
    assert reference.main(["--check"]) == 1
    stale.write_text(text)
    assert reference.main(["--check"]) == 0


def test_the_recorder_collects_each_check_inside_its_block_only():
    check_int("outside", "k", 1, 0)
    with recording_checks() as outer:
        check_int("s", "n", 5, 1, 10)
        with recording_checks() as inner:
            check_float("s", "x", 0.5, 0.0, low_inclusive=False, high=1.0)
        check_choice("s", "mode", "A", ("a", "b"))
        check_bool("s", "flag", True)
        with pytest.raises(ValueError):
            check_int("s", "m", 0, 1)  # refused values are recorded too: the bounds are what is documented
    assert inner == [Check("s", "x", "float", 0.0, 1.0, False)]
    assert outer == [Check("s", "n", "int", 1, 10), Check("s", "mode", "choice", choices=("a", "b")),
                     Check("s", "flag", "bool"), Check("s", "m", "int", 1, None)]


def _toy(config, limit):
    """A component with one key of each kind the probe reports: a bound set by the context (a), a bound set by
    another key (b), a further condition (c: "odd" refused with flag), a key no helper checks (d)."""
    a = check_int("Toy", "a", config["a"], 0, limit)
    b = check_int("Toy", "b", config["b"], a)
    c = check_choice("Toy", "c", config["c"], ("even", "odd"))
    if check_bool("Toy", "flag", config["flag"]) and c == "odd":
        raise ValueError("Toy: odd needs flag false")
    return {"a": a, "b": b, "c": c, "flag": config["flag"], "d": config["d"]}


def test_probing_finds_context_and_key_bounds_further_conditions_and_unchecked_keys():
    defaults = {"a": 2, "b": 100, "c": "even", "flag": True, "d": None}
    comp = Component("Toy", defaults, lambda config, limit: _toy({**defaults, **config}, limit), ("Toy",), [8, 9],
                     lambda limit: "the limit")
    facts = gather(comp)
    assert value_text(facts, "a") == "integer in [0, set by the limit]"
    assert value_text(facts, "b") == "integer >= `a` (at most int64's maximum)"
    assert value_text(facts, "c") == f"one of `even`, `odd` (any case); {NOT_EVERY}"
    assert value_text(facts, "d") == SEE_CLASS


def test_every_registered_class_has_a_section_with_its_source(text):
    for registry in (reference.ENCODERS, reference.NETWORKS):
        for cls in set(registry.values()):
            section = text.split(f"\n### {cls.otype}\n", 1)
            assert len(section) == 2, cls.otype
            assert section[1].lstrip().startswith(f"Source: {cls.source}."), cls.otype


@pytest.mark.parametrize("component, key, expected", [
    ("Frequency", "n_frequencies", "integer in [1, 64]"),  # frequency.py: check_int(..., 1, 64)
    ("Hybrid", "split_level", "integer in [0, `n_levels`]"),  # hybrid.py: check_int(..., 0, n_levels)
    ("PINs", "end_step", "integer >= `start_step`"),  # pins.py: check_int(..., start_step)
    ("PINs", "n_levels", "integer in [1, set by the encoding that feeds it]"),  # high: the encoder's band count
    ("OneBlob", "n_bins", NOT_EVERY),  # a power of two, checked by hand
    ("Composite", "nested", SEE_CLASS),  # no helper checks the list itself
    ("FullyFusedMLP", "n_hidden_layers", "CutlassMLP: integer in [0, 1024]"),
])
def test_what_the_reference_says_of_a_key(text, component, key, expected):
    section = text.split(f"\n### {component}\n", 1)[1].split("\n### ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))
    assert expected in row


def test_losses_and_tcnn_optimizer_keys(text):
    assert "| MSE | L2, MSE | L2 |" in text  # the schema reads "L2" as MSE; tcnn's loss section names it L2
    assert "| Huber | Huber, SmoothL1 | Huber, SmoothL1 |" in text  # Instant-NGP's SmoothL1 (optim/losses.py)
    assert "| `learning_rate` | `0.001` | `lr` | number in (0, 10] |" in text
    assert "| `adabound` | `false` |  | tcnn's default only (false) |" in text


def test_an_open_upper_bound_is_checked_recorded_and_documented_as_open():
    with recording_checks() as checks:
        assert check_float("s", "decay", 0.999, 0.0, low_inclusive=False, high=1.0, high_inclusive=False) == 0.999
        with pytest.raises(ValueError, match=r"'decay' must be in \(0, 1\), got 1"):
            check_float("s", "decay", 1.0, 0.0, low_inclusive=False, high=1.0, high_inclusive=False)
    assert checks[0] == Check("s", "decay", "float", 0.0, 1.0, False, high_inclusive=False)
    reference_md = (Path(__file__).parent.parent / "docs" / "reference.md").read_text()
    assert "| `ema_decay` | `null` | number in (0, 1) |" in reference_md
