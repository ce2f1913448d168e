"""Parsing config files: JSON (with comments, as Instant-NGP writes them) and YAML.

A file that cannot be used is a ValueError of one line naming it and, where there is one, the line and column: not
UTF-8, not JSON/YAML, a key given twice in one mapping, mappings and lists nested deeper than checks.MAX_DEPTH
(refused before the parser recurses), or bigger than MAX_CONFIG_BYTES.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import json5
import yaml

from .checks import MAX_DEPTH, check_nesting

MAX_CONFIG_BYTES = 64 * 1024  # the shipped configs are near 1 KiB; json5 parses some 10 KiB a second


class _Refused(ValueError):
    """A config refused for a rule of inr_enc's (a key given twice, too deep), not for the format's syntax."""


def _where(text: str | bytes, position: int) -> str:
    """'line L, column C' of a character (or byte) offset into ``text``."""
    newline = "\n" if isinstance(text, str) else b"\n"
    return f"line {text.count(newline, 0, position) + 1}, column {position - text.rfind(newline, 0, position)}"


def _mark(mark: yaml.Mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


class _YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing mappings and lists nested deeper than MAX_DEPTH (its composer recurses; the
    pure-Python loader is used because libyaml's cannot be bounded) and a key given twice in one mapping (PyYAML
    would keep the last). Merge keys (``<<: *base``) still merge: the mapping's own keys override theirs."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)
        if self.depth == MAX_DEPTH:
            raise _Refused(f"{_mark(self.peek_event().start_mark)}: nested deeper than {MAX_DEPTH} levels of "
                           "mappings and lists (the most a config may)")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        keys = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                given = key in keys
                keys.add(key)
            except TypeError:  # unhashable: PyYAML's construct_mapping says so
                continue
            if given:
                raise _Refused(f"{_mark(key_node.start_mark)}: key {key!r} given twice in one mapping"[:300])
        return super().construct_mapping(node, deep)


# JSON5 strings and comments (whole, or an unterminated one's opening) and brackets: the brackets outside strings
# and comments nest as the config does. A dozen lines here: json5 has no depth limit to set, and its recursive
# descent takes some 20 Python frames a level.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|//[^\n]*|/\*.*?\*/|/\*|["\'{}\[\]]', re.DOTALL)


def _check_json_depth(text: str) -> None:
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        char = token.group()
        if char in ("{", "["):
            depth += 1
            if depth > MAX_DEPTH:
                raise _Refused(f"{_where(text, token.start())}: nested deeper than {MAX_DEPTH} levels of mappings "
                               "and lists (the most a config may)")
        elif char in ("}", "]"):
            depth -= 1
        elif char in ('"', "'", "/*"):  # unterminated: json5 says where
            return


def parse_text(text: str, json: bool = False) -> Any:
    """YAML text (or with ``json`` JSON5: JSON with comments, as Instant-NGP's parser, nlohmann::json with
    ignore_comments, takes them) parsed. ValueError of one line 'line L, column C: problem', also for a key given
    twice in one mapping (a _Refused in YAML) or mappings and lists nested deeper than MAX_DEPTH (a _Refused)."""
    try:
        if json:
            _check_json_depth(text)
            return json5.loads(text, allow_duplicate_keys=False)
        return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass
    except _Refused:
        raise
    except yaml.MarkedYAMLError as error:
        where = f"{_mark(error.problem_mark)}: " if error.problem_mark is not None else ""
        context = f" ({error.context})" if error.context else ""
        raise ValueError(f"{where}{error.problem}{context}".replace("\n", " ")) from None
    except yaml.YAMLError as error:  # ReaderError: a character YAML does not allow (a binary file)
        position = getattr(error, "position", None)
        where = f"{_where(text, position)}: " if isinstance(position, int) else ""
        raise ValueError(where + str(error).splitlines()[0]) from None
    except ValueError as error:  # json5: '<string>:LINE PROBLEM at column COLUMN'
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(error))[:300]  # it quotes the character
        found = re.fullmatch(r"<string>:(\d+) (.*) at column (\d+)", message, re.DOTALL)
        raise ValueError(f"line {found[1]}, column {found[3]}: {found[2]}" if found else message) from None


def parse_file(path: Path) -> Any:
    """The data in a JSON (.json) or YAML (any other suffix) file, at most MAX_CONFIG_BYTES of UTF-8, its
    mappings and lists nested at most MAX_DEPTH deep (``parse_text``; also after YAML aliases). ValueError of one
    line naming the file and, where it has them, the line and column."""
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: more than {MAX_CONFIG_BYTES // 1024} KiB, too big for a config file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text: byte 0x{raw[error.start]:02x} "
                         f"at {_where(raw, error.start)}") from None
    try:
        data = parse_text(text, json=path.suffix == ".json")
    except _Refused as error:
        raise ValueError(f"{path}: {error}") from None
    except ValueError as error:
        raise ValueError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from None
    check_nesting(str(path), "config", data)
    return data
