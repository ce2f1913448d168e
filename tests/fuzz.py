"""The seeded config mutator shared by the fuzz tests (tests/test_config_fuzz.py in-process, tests/test_cli_fuzz.py
through inr-fit): wrong types, huge and odd numbers, deleted and misspelt keys, scalar sections, wrong otypes and
bad nestings of every named config."""

import copy
import os

from inr_enc import ENCODERS, NETWORKS, available_configs, load_config

NAMES = available_configs()
NAMED = {name: load_config(name) for name in NAMES}
WRONG = [True, False, "x", "", [], [1, 2], [0.5, "a"], {}, {"otype": "Identity"}, None, 1e19, 2**64, 2**63, 2**31,
         -1, -(2**63), 0, 1, 0.5, float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1e-300, 1e-45, 3.5e38,
         1.7e6, 10**10]
SECTIONS = ("encoding", "network", "training", "seed")
# the fuzz tests' seeds start here: 0 in the suite; scripts/reliability.py --first-seed N tries new ones
FIRST_SEED = int(os.environ.get("INR_ENC_FUZZ_SEED", "0"))


def _paths(node, prefix=()):
    """Every (container, key) in a config tree."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield node, key, prefix + (key,)
        yield from _paths(value, prefix + (key,))


def _misspelt(rng, key):
    key = str(key)
    i = rng.randrange(len(key) + 1)
    return rng.choice([key[:i] + key[i + 1:], key[:i] + rng.choice("aeiou_s") + key[i:], key.upper(), key + "s"]) or "x"


def mutate(rng, config):
    """1 to 3 random mutations of a deep copy of ``config``; returns it and what was done."""
    config, done = copy.deepcopy(config), []
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(config))
        kind = rng.choice(["value", "value", "value", "scale", "scale", "delete", "misspell", "section", "otype",
                           "nest"])
        if kind == "section" or not paths:
            section = rng.choice(SECTIONS)
            config[section] = rng.choice(WRONG)
            done.append(f"{section}={config[section]!r}")
            continue
        node, key, path = rng.choice(paths)
        if kind == "value":
            node[key] = rng.choice(WRONG)
            done.append(f"{path}={node[key]!r}")
        elif kind == "scale" and isinstance(node[key], (int, float)) and not isinstance(node[key], bool):
            factor = rng.choice([0.5, 2, 3, 10, 100, 1000, 10**6])  # plausible, and then too big
            node[key] = type(node[key])(node[key] * factor)
            done.append(f"{path}*={factor}")
        elif kind == "delete" and isinstance(node, dict):
            del node[key]
            done.append(f"del {path}")
        elif kind == "misspell" and isinstance(node, dict):
            node[_misspelt(rng, key)] = node.pop(key)
            done.append(f"misspell {path}")
        elif kind == "otype":
            otype = rng.choice([*ENCODERS, *NETWORKS, "Bogus", 3, None])
            target = node[key] if isinstance(node[key], dict) else node
            if isinstance(target, dict):
                target["otype"] = otype
                done.append(f"otype of {path} = {otype!r}")
        elif kind == "nest":
            inner = rng.choice([node[key], rng.choice(WRONG), {"otype": rng.choice(list(ENCODERS))}])
            wrapper = rng.choice([{"otype": "Composite", "nested": [inner, rng.choice(WRONG)]},
                                  {"otype": "Composite", "nested": inner}, {"otype": "Progressive", "nested": inner}])
            config["encoding"] = wrapper
            done.append(f"encoding={wrapper!r}")
    return config, done
