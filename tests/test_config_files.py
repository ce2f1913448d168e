"""Config files and config dicts that cannot be used: one-line ValueErrors naming the file (line and column where
there are some) or the path in the config, never a RecursionError or a traceback (issue 26, items 7, 8 and 14)."""

import json

import imageio.v3 as iio
import numpy as np
import pytest

from inr_enc.cli import main as inr_fit
from inr_enc.config.checks import MAX_DEPTH, MAX_NESTED
from inr_enc.config.files import MAX_PARENTS, apply_overrides, load_config
from inr_enc.encoders import build_encoder, encoder_spec
from inr_enc.field import build_field
from inr_enc.field.schema import resolve_run

TASK = {"kind": "image", "path": "photo.png"}
DEEP = 1000  # far past Python's recursion limit in every recursive resolver


def wrapped(n, inner, wrap):
    for _ in range(n):
        inner = wrap(inner)
    return inner


def composite(n):
    return wrapped(n, {"otype": "Frequency"}, lambda c: {"otype": "Composite", "nested": [c]})


def progressive(n):
    return wrapped(n, {"otype": "Frequency"}, lambda c: {"otype": "Progressive", "nested": c})


def one_line_error(call, match):
    with pytest.raises(ValueError, match=match) as caught:
        call()
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 600
    return str(caught.value)


def test_a_json_config_nested_60_deep_is_refused_before_json5_recurses(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"encoding": ' * 60 + "{}" + "}" * 60)
    one_line_error(lambda: load_config(path), rf"deep.json: line 1, column 209: nested deeper than {MAX_DEPTH} levels")
    path.write_text('{"a": "' + "[" * 60 + '", /* [[[[[[[[[[[[[[[[[[[[[[ */ "b": 1}  // {{{{{{{{{{{{{{{{{{{{{{{')
    assert load_config(path) == {"a": "[" * 60, "b": 1}  # brackets in strings and comments do not count
    path.write_text('{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH)
    assert len(json.dumps(load_config(path))) > 0  # the limit itself loads


@pytest.mark.parametrize("text", ["[" * 60 + "]" * 60 + "\n",
                                  "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 60)) + "  " * 60 + "c: 1\n",
                                  "a: &a [*a]\n"])  # flow, block, and a list that holds itself
def test_a_yaml_config_nested_too_deep_is_refused(tmp_path, text):
    (tmp_path / "deep.yaml").write_text(text)
    one_line_error(lambda: load_config(tmp_path / "deep.yaml"), "deep.yaml: .*(nested deeper than|nested too deep)")


def test_a_parent_chain_longer_than_the_limit_is_refused(tmp_path):
    (tmp_path / "f0.json").write_text('{"k0": 0}')
    for i in range(1, MAX_PARENTS + 2):
        (tmp_path / f"f{i}.json").write_text(f'{{"parent": "f{i - 1}.json", "k{i}": {i}}}')
    assert len(load_config(tmp_path / f"f{MAX_PARENTS}.json")) == MAX_PARENTS + 1
    one_line_error(lambda: load_config(tmp_path / f"f{MAX_PARENTS + 1}.json"),
                   f"more than {MAX_PARENTS} 'parent' configs")


def test_a_parent_outside_the_named_files_folder_is_refused_unless_allowed(tmp_path, monkeypatch):
    top, other = tmp_path / "configs", tmp_path / "other"
    (top / "sub").mkdir(parents=True)
    other.mkdir()
    (other / "base.json").write_text('{"a": 1}')
    (top / "base.json").write_text('{"a": 2}')
    (top / "sub" / "mid.json").write_text('{"parent": "../base.json", "b": 3}')  # back up, still inside configs/
    (top / "link.json").symlink_to(other / "base.json")
    child = top / "child.json"
    child.write_text('{"parent": "sub/mid.json"}')
    assert load_config(child) == {"a": 2, "b": 3}
    for parent in ("../other/base.json", str(other / "base.json"), "link.json"):
        child.write_text(json.dumps({"parent": parent}))
        one_line_error(lambda: load_config(child), rf"child.json: 'parent' '{parent}' is outside .*configs, where "
                                                   "parents may be; to allow its folder, pass load_config")
        assert load_config(child, parent_root=other) == {"a": 1}
        monkeypatch.setenv("INR_ENC_CONFIG_ROOT", str(tmp_path))
        assert load_config(child) == {"a": 1}
        monkeypatch.delenv("INR_ENC_CONFIG_ROOT")


@pytest.mark.parametrize("kind", ["Composite", "Progressive", "Ema"])
def test_deeply_nested_configs_passed_as_dicts_are_value_errors_naming_the_path(kind):
    if kind == "Ema":
        config = {"optimizer": wrapped(DEEP, {"otype": "Adam"}, lambda c: {"otype": "Ema", "nested": c})}
        one_line_error(lambda: resolve_run(config, TASK, 2, 3, [4, 4]),
                       rf"config.optimizer(.nested){{{MAX_NESTED + 1}}} is nested too deep \(at most {MAX_NESTED}")
        return
    encoding = (composite if kind == "Composite" else progressive)(DEEP)
    path = r"(.nested\[0\])" if kind == "Composite" else r"(.nested)"
    for call in (lambda: build_field(2, 3, {"encoding": encoding}), lambda: build_encoder(encoding, 2),
                 lambda: encoder_spec(encoding, 2), lambda: resolve_run({"encoding": encoding}, TASK, 2, 3, [4, 4])):
        one_line_error(call, rf"{path}{{{MAX_NESTED}}}.nested is nested too deep \(at most {MAX_NESTED} 'nested'")


def test_the_deepest_allowed_nesting_builds_and_any_deep_value_is_refused():
    assert (build_encoder(composite(MAX_NESTED), 2).spec.n_output_dims
            == build_encoder({"otype": "Frequency"}, 2).spec.n_output_dims)
    assert build_encoder(progressive(MAX_NESTED), 2).n_bands > 1
    deep_list = wrapped(2000, 1, lambda c: [c])
    for config in ({"seed": deep_list}, {"network": {"n_neurons": deep_list}},
                   {"encoding": {"otype": "HashGrid", "n_levels": deep_list}}):
        one_line_error(lambda: resolve_run(config, TASK, 2, 3, [4, 4]),
                       rf"config\.\w+.*\[0\] is nested too deep \(at most {MAX_DEPTH} levels")


@pytest.mark.parametrize("name, content, match", [
    ("bad.yaml", "encoding: [\n", "bad.yaml: not valid YAML: line 2, column 1: expected the node content, but found "
                                  "'<stream end>' \\(while parsing a flow node\\)"),
    ("bad.json", '{"a": [1,\n 2,, ]}', 'bad.json: not valid JSON: line 2, column 4: Unexpected ","'),
    ("tab.yaml", "a:\n\tb: 1\n",
     r"tab.yaml: not valid YAML: line 2, column 1: found character '\\t' that cannot start"),
    ("latin1.yaml", b"a: 1\nb: caf\xe9\n", "latin1.yaml: not UTF-8 text: byte 0xe9 at line 2, column 7"),
    ("binary.yaml", b"a: \x00\x01\x02", "binary.yaml: not valid YAML: line 1, column 4: unacceptable character #x0000"),
    ("binary.json", b"\x00\x01", r'binary.json: not valid JSON: line 1, column 1: Unexpected "\\x00"'),
    ("empty.yaml", "", r"empty.yaml: a config must be a mapping, got nothing \(an empty file\)"),
    ("huge.yaml", "a: [" + "1," * 40000 + "x:\n", "huge.yaml: more than 64 KiB, too big for a config file"),
])
def test_a_file_that_cannot_be_parsed_is_one_line_naming_it_with_line_and_column(tmp_path, name, content, match):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    one_line_error(lambda: load_config(path), match)


def test_a_folder_is_not_a_config(tmp_path):
    (tmp_path / "configs.yaml").mkdir()
    one_line_error(lambda: load_config(tmp_path / "configs.yaml"), "configs.yaml: a folder, not a config file")


@pytest.mark.parametrize("name, text, key", [
    ("top.yaml", "encoding: {otype: Frequency}\nseed: 1\nencoding: {otype: Identity}\n",
     "line 3, column 1: key 'encoding'"),
    ("nested.yaml", "encoding:\n  otype: HashGrid\n  n_levels: 4\n  n_levels: 8\n", "line 4, column 3: key 'n_levels'"),
    ("merged.yaml", "base: &b {x: 1}\nother:\n  <<: *b\n  y: 3\n  y: 4\n", "line 5, column 3: key 'y'"),
    ("top.json", '{"seed": 1, "seed": 2}', 'Duplicate key "seed"'),
    ("nested.json", '{"encoding": {"otype": "HashGrid", /* */ "otype": "Frequency"}}', 'Duplicate key "otype"'),
])
def test_a_key_given_twice_is_refused_naming_the_key_and_the_file(tmp_path, name, text, key):
    (tmp_path / name).write_text(text)
    one_line_error(lambda: load_config(tmp_path / name), f"{name}: .*{key}")


def test_yaml_merge_keys_still_merge_with_the_mappings_own_keys_first(tmp_path):
    (tmp_path / "merge.yaml").write_text("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n")
    assert load_config(tmp_path / "merge.yaml") == {"base": {"x": 1, "y": 2}, "other": {"x": 1, "y": 3}}


@pytest.mark.parametrize("assignment, match", [
    ("seed=[1", r"'\[1': not a YAML value \(line 1, column 3: expected ',' or '\]', but got '<stream end>'"),
    ("encoding={otype: A, otype: B}", r"not a YAML value \(line 1, column 12: key 'otype' given twice"),
    ("seed=" + "[" * 40 + "]" * 40, f"line 1, column 17: nested deeper than {MAX_DEPTH} levels"),
    (".".join(["a"] * 2000) + "=1", rf"--set: config(\.a){{{MAX_DEPTH}}} is nested too deep"),
])
def test_set_values_that_cannot_be_used_are_one_line(assignment, match):
    one_line_error(lambda: apply_overrides({}, [assignment]), match)


@pytest.mark.parametrize("name, text, match", [
    ("bad.yaml", "encoding: [\n", "bad.yaml: not valid YAML: line 2, column 1: "),
    ("deep.json", '{"encoding": ' * 60 + "{}" + "}" * 60, "deep.json: line 1, column 209: nested deeper than"),
    ("dup.yaml", "encoding: {otype: Frequency}\nencoding: {otype: Identity}\n",
     "dup.yaml: line 2, column 1: key 'encoding'"),
    ("composite.json", json.dumps({"encoding": composite(60)}), "composite.json: line 1, column 285: nested deeper"),
    ("progressive.json", json.dumps({"encoding": progressive(MAX_NESTED + 1)}), "progressive.json: config.encoding"),
])
def test_inr_fit_prints_one_line_and_writes_nothing_for_a_config_it_cannot_use(tmp_path, capsys, name, text, match):
    image = tmp_path / "image.png"
    iio.imwrite(image, np.zeros((4, 4, 3), dtype=np.uint8))
    (tmp_path / name).write_text(text)
    out = tmp_path / "run"
    assert inr_fit(["image", str(image), "--config", str(tmp_path / name), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inr-fit: ") and "Traceback" not in err and not out.exists(), err
    assert match in err
