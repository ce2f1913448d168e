"""Broken and hostile snapshot files (inr_enc/nerfstudio/snapshot.py, snapshot_schema.py, snapshot_import.py,
snapshot_cli.py): every field an import reads is checked (a ValueError naming its key path), the compressed stream
is inflated under a cap, and inr-snapshot without nerfstudio still answers --help and says what it needs."""

import copy
import gzip
import json
import random
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib

import msgpack
import pytest
import torch

pytest.importorskip("nerfstudio")

from fuzz import FIRST_SEED, WRONG  # noqa: E402
from nerf_runs import NGP_NERF_BASE, SCENE  # noqa: E402
from nerfstudio.data.scene_box import SceneBox  # noqa: E402

from inr_enc.nerfstudio import snapshot as snapshot_module  # noqa: E402
from inr_enc.nerfstudio.model import InrNerfModelConfig  # noqa: E402
from inr_enc.nerfstudio.snapshot import export_snapshot, read_snapshot, write_snapshot  # noqa: E402
from inr_enc.nerfstudio.snapshot_cli import main  # noqa: E402
from inr_enc.nerfstudio.snapshot_import import load_snapshot, snapshot_settings  # noqa: E402

SMALL = {**NGP_NERF_BASE, "encoding": {**NGP_NERF_BASE["encoding"], "log2_hashmap_size": 12}}  # a small snapshot
BOX = ((-1.5,) * 3, (1.5,) * 3)
NAN = float("nan")


class Gone:
    """A field's value in MUTATIONS: the key deleted."""

    def __repr__(self):
        return "GONE"


GONE = Gone()


@pytest.fixture(scope="module")
def exported():
    """An exported snapshot ("ours") and the same as Instant-NGP writes it ("ngp": no inr_enc section, a dataset)."""
    model = InrNerfModelConfig(instant_ngp_config=json.dumps(SMALL)).setup(
        scene_box=SceneBox(aabb=torch.tensor(BOX)), num_train_data=1)
    ours = export_snapshot(model, step=3)
    ngp = copy.deepcopy(ours)
    del ngp["snapshot"]["inr_enc"]
    ngp["snapshot"]["density_grid_binary"] = b""  # never populated (resampling 128^3 cells takes seconds)
    ngp["snapshot"]["nerf"]["dataset"] = {"n_images": 2, "scale": 0.4, "offset": [0.5, 0.45, 0.55],
                                          "from_mitsuba": False, "is_hdr": False, "aabb_scale": 1}
    return {"ours": ours, "ngp": ngp}


def imported(source, **read):
    """read_snapshot (of a path; a dict is taken as read), snapshot_settings, the model, load_snapshot: as
    inr-snapshot import uses them."""
    snapshot = source if isinstance(source, dict) else read_snapshot(source, **read)
    model = InrNerfModelConfig(**snapshot_settings(snapshot)).setup(scene_box=SceneBox(aabb=torch.tensor(BOX)),
                                                                    num_train_data=1)
    load_snapshot(model, snapshot)
    return model


def mutated(snapshot, key_path, value):
    """A copy of ``snapshot`` with the field at ``key_path`` (dotted) set to ``value`` (GONE: deleted)."""
    snapshot = copy.deepcopy(snapshot)  # the binaries are bytes: shared, not copied
    *parents, last = key_path.split(".")
    target = snapshot
    for key in parents:
        target = target[key]
    if value is GONE:
        del target[last]
    else:
        target[last] = value
    return snapshot


@pytest.mark.parametrize("base", ["ours", "ngp"])
def test_a_valid_snapshot_imports_up_to_the_cap(base, exported, tmp_path):
    write_snapshot(exported[base], tmp_path / "scene.ingp")
    size = len(msgpack.packb(exported[base]))  # what it inflates to
    assert (imported(tmp_path / "scene.ingp", max_bytes=size).field.unit_frame is None) == (base == "ours")
    with pytest.raises(ValueError, match=rf"scene.ingp: inflates to more than {size - 1} bytes, the cap \(max_bytes\)"):
        read_snapshot(tmp_path / "scene.ingp", max_bytes=size - 1)


FRAME = [[0.2, 0.0, 0.0, 0.5], [0.0, 0.2, 0.0, 0.5], [0.0, 0.0, 0.2, 0.5]]
MUTATIONS = [  # (base, key path, value, the error's start)
    ("ngp", "snapshot.nerf.dataset", [1, 2], "snapshot.nerf.dataset: expected a mapping, got [1, 2]"),
    ("ngp", "snapshot.nerf.dataset.offset", [0.5],
     "snapshot.nerf.dataset.offset: expected 3 finite numbers, got [0.5]"),
    ("ngp", "snapshot.nerf.dataset.offset", [0.5] * 4, "snapshot.nerf.dataset.offset: expected 3 finite numbers"),
    ("ngp", "snapshot.nerf.dataset.offset", "0.5", "snapshot.nerf.dataset.offset: expected 3 finite numbers"),
    ("ngp", "snapshot.nerf.dataset.offset", [0.5, NAN, 0.5], "snapshot.nerf.dataset.offset: expected 3 finite"),
    ("ngp", "snapshot.nerf.dataset.scale", NAN, "snapshot.nerf.dataset.scale: expected a finite number > 0, got nan"),
    ("ngp", "snapshot.nerf.dataset.scale", 0, "snapshot.nerf.dataset.scale: expected a finite number > 0, got 0"),
    ("ngp", "snapshot.nerf.dataset.scale", -0.3, "snapshot.nerf.dataset.scale: expected a finite number > 0"),
    ("ngp", "snapshot.nerf.dataset.scale", "big", "snapshot.nerf.dataset.scale: expected a finite number > 0"),
    ("ngp", "snapshot.nerf.dataset.from_mitsuba", "no", "snapshot.nerf.dataset.from_mitsuba: expected true or false"),
    ("ngp", "snapshot.nerf.dataset.n_images", -1, "snapshot.nerf.dataset.n_images: expected an integer >= 0"),
    ("ngp", "snapshot.nerf.dataset.is_hdr", [], "snapshot.nerf.dataset.is_hdr: expected true or false"),
    ("ngp", "snapshot.nerf", "nerf", "snapshot.nerf: expected a mapping, got 'nerf'"),
    ("ngp", "snapshot.nerf.aabb_scale", "1", "snapshot.nerf.aabb_scale: expected an integer >= 1"),
    ("ngp", "snapshot.density_grid_binary", b"\0" * 3, "snapshot.density_grid_binary: expected float16 cells"),
    ("ours", "snapshot.background_color", "white", "snapshot.background_color: expected 4 finite numbers"),
    ("ours", "snapshot.background_color", [NAN] * 4, "snapshot.background_color: expected 4 finite numbers"),
    ("ours", "snapshot.training_step", -5, "snapshot.training_step: expected an integer >= 0, got -5"),
    ("ours", "snapshot.training_step", 2.5, "snapshot.training_step: expected an integer >= 0, got 2.5"),
    ("ours", "snapshot.version", True, "snapshot.version: expected an integer >= 1, got True"),
    ("ours", "snapshot.mode", "sdf", "snapshot.mode: expected 'nerf'"),
    ("ours", "snapshot.density_grid_size", 1 << 40, "snapshot.density_grid_size: expected 128"),
    ("ours", "snapshot.params_type", "double", "snapshot.params_type: expected 'float' or '__half'"),
    ("ours", "snapshot.params_type", ["float"], "snapshot.params_type: expected 'float' or '__half'"),  # unhashable
    ("ours", "snapshot.params_binary", b"\0" * 7, "snapshot.params_binary: expected 4-byte 'float' values"),
    ("ours", "snapshot.params_binary", [1.0, 2.0], "snapshot.params_binary: expected 4-byte 'float' values"),
    ("ours", "snapshot.n_params", 1 << 62, "snapshot.n_params: expected the count params_binary holds"),
    ("ours", "snapshot.inr_enc", [1], "snapshot.inr_enc: expected a mapping, got [1]"),
    ("ours", "snapshot.inr_enc.aabb", [[0, 0, 0], [1, 1]], "snapshot.inr_enc.aabb: expected 2 rows of 3 finite"),
    ("ours", "snapshot.inr_enc.aabb", [[1, 0, 0], [1, 1, 1]], "snapshot.inr_enc.aabb: expected min < max"),
    ("ours", "snapshot.inr_enc.aabb", GONE, "snapshot.inr_enc.aabb: expected 2 rows of 3 finite numbers, got nothing"),
    ("ours", "snapshot.inr_enc.opacity", "dense", "snapshot.inr_enc.opacity: expected 128^3 float32 cells"),
    ("ours", "snapshot.inr_enc.opacity", b"\0" * 5, "snapshot.inr_enc.opacity: expected 128^3 float32 cells"),
    ("ours", "snapshot.inr_enc.unit_frame", [[1.0, 0.0, 0.0]], "snapshot.inr_enc.unit_frame: expected 3 rows of 4"),
    ("ours", "snapshot.inr_enc.unit_frame", [[0.0] * 4] * 3, "snapshot.inr_enc.unit_frame: expected an invertible"),
    ("ours", "snapshot.inr_enc.settings", "fast", "snapshot.inr_enc.settings: expected a mapping"),
    ("ours", "snapshot.inr_enc.settings.encoding", {"otype": "Frequency"},
     "snapshot.inr_enc.settings: unknown key 'encoding'"),
    ("ours", "snapshot.inr_enc.settings.early_stop_eps", "x",
     "snapshot.inr_enc.settings.early_stop_eps: expected a finite"),
    ("ours", "encoding", [1], "encoding: expected a mapping, got [1]"),
    ("ours", "loss", "Huber", "loss: expected a mapping, got 'Huber'"),
    ("ours", "optimizer.nested.decay_base", b"\x01", "optimizer.nested.decay_base: expected a JSON value"),
    ("ours", "rgb_network", GONE, "rgb_network: missing"),
    ("ours", "snapshot.nerf.extra", {b"key": 1}, "snapshot.nerf.extra: expected string keys, got b'key'"),
]


@pytest.mark.parametrize("base, key_path, value, message", MUTATIONS,
                         ids=[f"{m[1]}={m[2]!r}"[:60] for m in MUTATIONS])
def test_a_bad_field_is_named(base, key_path, value, message, exported, tmp_path):
    snapshot = mutated(exported[base], key_path, value)
    write_snapshot(snapshot, tmp_path / "scene.msgpack")
    with pytest.raises(ValueError) as error:
        imported(tmp_path / "scene.msgpack")
    assert str(error.value).startswith(f"{tmp_path / 'scene.msgpack'}: {message}") and "\n" not in str(error.value)
    with pytest.raises(ValueError) as error:  # a snapshot dict built in memory is checked as well
        settings = snapshot_settings(snapshot)
        model = InrNerfModelConfig(**settings).setup(scene_box=SceneBox(aabb=torch.tensor(BOX)), num_train_data=1)
        load_snapshot(model, snapshot)
    assert str(error.value).startswith(message)


def packed_with(snapshot, raw_key):
    """``snapshot`` packed with a map key of raw msgpack bytes (a map, an array: what no Python dict holds)."""
    data = msgpack.packb(mutated(snapshot, "snapshot.nerf.PLACEHOLDER", 1), use_bin_type=True)
    return data.replace(msgpack.packb("PLACEHOLDER"), raw_key)


def gzip_bomb(n_mib, head=b"", unit=b""):
    """A gzip file in ~n_mib kB inflating to ``head`` and n_mib MiB, each ``unit`` then zeros: one MiB compressed
    after a full flush (so that it does not refer back) repeated, then the end block and gzip's trailer."""
    packer, mib = zlib.compressobj(9, zlib.DEFLATED, 31), unit + bytes((1 << 20) - len(unit))
    first = packer.compress(head + mib) + packer.flush(zlib.Z_FULL_FLUSH)  # with the gzip header
    block = packer.compress(mib) + packer.flush(zlib.Z_FULL_FLUSH)
    end = packer.flush()[:-8]  # without the trailer, which counts 2 MiB
    crc = zlib.crc32(head)
    for _ in range(n_mib):
        crc = zlib.crc32(mib, crc)
    return first + block * (n_mib - 1) + end + struct.pack("<II", crc, (len(head) + (n_mib << 20)) & 0xFFFFFFFF)


def binaries_bomb(n_mib):
    """{"snapshot": [n_mib binaries of a MiB]}, compressed to ~n_mib kB: msgpack reads on while it inflates."""
    return gzip_bomb(n_mib, b"\x81\xa8snapshot\xdd" + struct.pack(">I", n_mib),
                     b"\xc6" + struct.pack(">I", (1 << 20) - 5))


@pytest.mark.parametrize("name, content, message", [
    ("map-key.msgpack", lambda s: packed_with(s, b"\x81\xa1a\x01"), "not a snapshot's msgpack"),
    ("list-key.msgpack", lambda s: packed_with(s, b"\x92\x01\x02"), "not a snapshot's msgpack"),
    ("int-key.msgpack", lambda s: packed_with(s, b"\x07"), "not a snapshot's msgpack"),
    ("huge-bin.msgpack", lambda s: b"\x81\xa8snapshot\xc6\xff\xff\xff\xf0" + b"\0" * 100, "not a snapshot's msgpack"),
    ("nested.msgpack", lambda s: b"\x91" * 100000, "not a snapshot's msgpack"),
    ("long-list.msgpack", lambda s: b"\xdd\x01\x00\x00\x00" + b"\x90" * 100, "not a snapshot's msgpack"),
    ("trailing.msgpack", lambda s: msgpack.packb(s) + b"\x00", "not a snapshot's msgpack"),
    ("bad-utf8.msgpack", lambda s: b"\x81\xa8snapshot\xa1\xff", "not a snapshot's msgpack"),
    ("truncated.ingp", lambda s: zlib.compress(msgpack.packb(s))[:-50], "a truncated compressed stream"),
    ("trailing.ingp", lambda s: zlib.compress(msgpack.packb(s)) + b"junk", "data after the compressed stream"),
])
def test_a_broken_file_is_refused_in_one_line(name, content, message, exported, tmp_path):
    (tmp_path / name).write_bytes(content(exported["ours"]))
    with pytest.raises(ValueError) as error:
        imported(tmp_path / name)
    assert str(error.value).startswith(f"{tmp_path / name}: {message}") and "\n" not in str(error.value)


def test_msgpack_is_unpacked_to_a_bounded_number_of_objects(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshot_module, "MAX_ALL_ENTRIES", 1000)
    (tmp_path / "lists.msgpack").write_bytes(b"\xdc\x07\xd0" + b"\x90" * 2000)  # 2000 empty lists: ~130 kB in Python
    with pytest.raises(ValueError, match=r"lists.msgpack: not a snapshot's msgpack \(more than 1000 array and map"):
        read_snapshot(tmp_path / "lists.msgpack")


def test_a_gzip_bomb_is_refused_without_inflating_past_the_cap(tmp_path, monkeypatch):
    assert gzip.decompress(gzip_bomb(3, b"head", b"unit")) == b"head" + (b"unit" + bytes((1 << 20) - 4)) * 3
    assert msgpack.unpackb(gzip.decompress(binaries_bomb(3))) == {"snapshot": [bytes((1 << 20) - 5)] * 3}
    (tmp_path / "bomb.ingp").write_bytes(binaries_bomb(300))  # 300 MiB in 300 kB
    (tmp_path / "zeros.ingp").write_bytes(gzip_bomb(300))  # msgpack: 0, then data after it
    assert (tmp_path / "bomb.ingp").stat().st_size < 1 << 20
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=r"bomb.ingp: inflates to more than 4194304 bytes, the cap \(max_bytes\)"):
            read_snapshot(tmp_path / "bomb.ingp", max_bytes=4 << 20)
        with pytest.raises(ValueError, match=r"zeros.ingp: not a snapshot's msgpack \(data after its end\)"):
            read_snapshot(tmp_path / "zeros.ingp")  # under the default cap: refused at its second byte
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20 and time.perf_counter() - start < 2.0  # inflating 300 MiB: 600 MiB and ~3 s
    monkeypatch.setenv("INR_SNAPSHOT_MAX_BYTES", str(4 << 20))  # the cap from the environment
    with pytest.raises(ValueError, match=r"more than 4194304 bytes, the cap \(INR_SNAPSHOT_MAX_BYTES\)"):
        read_snapshot(tmp_path / "bomb.ingp")
    (tmp_path / "plain.msgpack").write_bytes(bytes(5 << 20))  # a plain file past the cap: not read at all
    with pytest.raises(ValueError, match=r"plain.msgpack: 5242880 bytes, more than 4194304 bytes, the cap"):
        read_snapshot(tmp_path / "plain.msgpack")
    monkeypatch.setenv("INR_SNAPSHOT_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match=r"INR_SNAPSHOT_MAX_BYTES: expected a number of bytes >= 1, got 'lots'"):
        read_snapshot(tmp_path / "plain.msgpack")


@pytest.mark.parametrize("name, content, environment, message", [
    ("offset.ingp", "offset", {}, "snapshot.nerf.dataset.offset: expected 3 finite numbers, got [0.5]"),
    ("bomb.ingp", "bomb", {"INR_SNAPSHOT_MAX_BYTES": str(1 << 20)}, "inflates to more than 1048576 bytes, the cap"),
    # a render setting out of range: refused by the model's checks (after the dataparser ran), named in the snapshot
    ("eps.ingp", "eps", {}, "InrNerfModelConfig: need 0 < early_stop_eps < 1"),
])
def test_inr_snapshot_import_refuses_in_one_line_and_writes_nothing(name, content, environment, message, exported,
                                                                    tmp_path, capsys, monkeypatch):
    files = {"offset": lambda: mutated(exported["ngp"], "snapshot.nerf.dataset.offset", [0.5]),
             "eps": lambda: mutated(exported["ours"], "snapshot.inr_enc.settings.early_stop_eps", 2.0)}
    if content == "bomb":
        (tmp_path / name).write_bytes(binaries_bomb(64))
    else:
        write_snapshot(files[content](), tmp_path / name)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exit_info:
        main(["import", str(tmp_path / name), "--data", str(SCENE), "--output-dir", str(tmp_path / "outputs")])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("inr-snapshot")]
    assert len(lines) == 1 and lines[0].startswith(f"inr-snapshot: {tmp_path / name}: {message}"), captured.err
    assert captured.out == "" and not (tmp_path / "outputs").exists()


BLOCKED = "import sys; sys.modules.update({name: None for name in sys.argv[1].split(',')}); sys.argv[1:2] = []; " \
          "from inr_enc.nerfstudio.snapshot_cli import main; sys.exit(main())"


@pytest.mark.parametrize("blocked", ["nerfstudio,torch", "msgpack"])
def test_inr_snapshot_without_nerfstudio_answers_help_and_says_what_it_needs(blocked, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-c", BLOCKED, blocked, *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    helped = run("--help")
    assert helped.returncode == 0 and "usage: inr-snapshot" in helped.stdout and helped.stderr == ""
    assert run("import", "--help").returncode == 0
    refused = run("import", "scene.ingp", "--data", ".")
    needed = blocked.split(",")[0]
    assert refused.returncode == 2 and refused.stdout == "" and list(tmp_path.iterdir()) == []
    assert refused.stderr.splitlines() == [f"inr-snapshot: needs {needed} (the nerfstudio extra): pip install "
                                           f"'inr_enc[nerfstudio]', or pip install -e '.[nerfstudio]' in a checkout"]


def _fields(node, prefix=()):
    """Every key path of a snapshot's mappings and lists."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield prefix + (key,)
        yield from _fields(value, prefix + (key,))


@pytest.mark.parametrize("seed", range(40))
def test_seeded_mutations_import_or_are_refused_with_a_value_error(seed, exported, tmp_path):
    """1 to 3 fields of a valid snapshot set to fuzz.WRONG's values, deleted, or (binaries) cut: the file is
    imported as inr-snapshot does, or refused with a ValueError; nothing else (no other exception)."""
    rng = random.Random(FIRST_SEED + 5000 + seed)
    snapshot = copy.deepcopy(exported[rng.choice(["ours", "ngp"])])
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(_fields(snapshot)))
        parent = snapshot
        for key in path[:-1]:
            parent = parent[key]
        old = parent[path[-1]]
        choice = rng.random()
        if isinstance(old, bytes) and choice < 0.5:
            parent[path[-1]] = old[: rng.randrange(len(old) + 1)]
        elif choice < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(WRONG))
    try:
        packed = msgpack.packb(snapshot, use_bin_type=True)
    except (OverflowError, TypeError, ValueError):  # not writable as msgpack (an int of 2^64): a dict in memory only
        packed = None
    file = tmp_path / "fuzzed.msgpack"
    if packed is not None:
        file.write_bytes(packed)
    try:
        imported(file if packed is not None else snapshot)
    except ValueError as error:
        assert str(error) and "\n" not in str(error)
