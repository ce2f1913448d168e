"""config/memory.py's default limit: the tightest of physical memory, the process's RLIMIT_AS / RLIMIT_DATA less
what it has mapped, and its cgroup's limit less what the cgroup holds; and signals refused from their header."""

import resource
import struct
import subprocess
import sys
import time
import zlib

import pytest

from inr_enc.config import memory
from inr_enc.fitting import signals
from inr_enc.fitting.run import resolve_task_run

GIB = 2**30
V1_NONE = "9223372036854771712"  # cgroup v1's "no limit"


def fake_system(monkeypatch, files, rlimits=None, physical=64 * GIB):
    """/proc and /sys files from ``files`` (the rest missing), resource.getrlimit from ``rlimits`` (name -> soft)."""
    memory.set_memory_limit(None)
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    monkeypatch.setattr(memory, "_read_text", lambda path: files.get(path))
    monkeypatch.setattr(memory, "physical_memory", lambda: physical)
    names = {getattr(resource, name): soft for name, soft in (rlimits or {}).items()}
    monkeypatch.setattr(memory.resource, "getrlimit",
                        lambda which: (names.get(which, resource.RLIM_INFINITY), resource.RLIM_INFINITY))


STATUS = {"/proc/self/status": f"Name:\tpython\nVmSize:\t{3 * 2**20} kB\nVmData:\t{2**20} kB\n"}


def refusal(nbytes):
    with pytest.raises(ValueError) as error:
        memory.check_memory("x: parameters", nbytes)
    return str(error.value)


def test_physical_memory_when_nothing_else_limits(monkeypatch):
    fake_system(monkeypatch, {**STATUS, "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max\n"})
    assert memory.memory_limit() == 64 * GIB
    assert "more than this machine's 64.0 GiB" in refusal(65 * GIB)


def test_rlimit_as_less_the_mapped_address_space(monkeypatch):
    fake_system(monkeypatch, STATUS, {"RLIMIT_AS": 8 * GIB, "RLIMIT_DATA": 16 * GIB})
    assert memory.memory_limit() == 5 * GIB  # 8 GiB less VmSize 3 GiB (RLIMIT_DATA leaves 15)
    message = refusal(6 * GIB)
    assert "more than the 5.0 GiB left under the process limit (RLIMIT_AS) 8.0 GiB (3.0 GiB VmSize in use)" in message
    memory.check_memory("x: parameters", 5 * GIB)


def test_rlimit_data_less_the_mapped_data(monkeypatch):
    fake_system(monkeypatch, STATUS, {"RLIMIT_AS": 8 * GIB, "RLIMIT_DATA": 3 * GIB})
    assert memory.memory_limit() == 2 * GIB
    assert "the process limit (RLIMIT_DATA) 3.0 GiB (1.0 GiB VmData in use)" in refusal(3 * GIB)


def test_cgroup_v2_limit_of_a_parent_less_what_the_cgroup_holds(monkeypatch):
    root = "/sys/fs/cgroup"
    files = {**STATUS, "/proc/self/cgroup": "0::/box/job\n",
             f"{root}/box/job/memory.max": "max\n", f"{root}/box/memory.max": f"{4 * GIB}\n",
             f"{root}/box/job/memory.current": f"{GIB + GIB // 2}\n",
             f"{root}/box/job/memory.stat": f"anon 1\nactive_file {GIB // 4}\ninactive_file {GIB // 4}\n"}
    fake_system(monkeypatch, files, {"RLIMIT_AS": 16 * GIB})
    assert memory.memory_limit() == 3 * GIB  # 4 GiB less (1.5 GiB held - 0.5 GiB of file cache)
    assert "the 3.0 GiB left under the cgroup limit 4.0 GiB (1.0 GiB in use)" in refusal(4 * GIB)


def test_cgroup_v1_limit_and_its_no_limit_value(monkeypatch):
    folder = "/sys/fs/cgroup/memory/job"
    files = {**STATUS, "/proc/self/cgroup": "4:memory:/job\n0::/\n",
             f"{folder}/memory.stat": f"cache 5\nhierarchical_memory_limit {2 * GIB}\ntotal_inactive_file {GIB // 2}\n",
             f"{folder}/memory.usage_in_bytes": f"{GIB}\n"}
    fake_system(monkeypatch, files)
    assert memory.memory_limit() == 2 * GIB - GIB // 2
    assert "under the cgroup limit 2.0 GiB" in refusal(2 * GIB)
    files[f"{folder}/memory.stat"] = f"hierarchical_memory_limit {V1_NONE}\n"
    assert memory.memory_limit() == 64 * GIB


def test_an_explicit_limit_overrides_the_system(monkeypatch):
    fake_system(monkeypatch, STATUS, {"RLIMIT_AS": 8 * GIB})
    with memory.memory_limit_set("20G"):
        assert memory.memory_limit() == 20 * GIB
        assert "more than the memory limit 20.0 GiB" in refusal(21 * GIB)


def header_only_png(path, width, height, colour_type=2, depth=8):
    """A PNG whose IHDR says width x height and whose IDAT holds a few rows of zeros: its header reads, its pixels
    do not (nothing may decode them before the memory check)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(4096)))
                     + chunk(b"IEND", b""))
    return path


def test_an_image_too_large_is_refused_from_its_header(tmp_path, monkeypatch):
    path = header_only_png(tmp_path / "huge.png", 60000, 60000, colour_type=6, depth=16)
    decoded = []
    monkeypatch.setattr(signals, "read_png", lambda path: decoded.append(path))
    start = time.perf_counter()
    with memory.memory_limit_set("64G"), pytest.raises(ValueError, match=r"signal 1\d\d\.\d GiB\) together need .* "
                                                                         r"more than the memory limit 64.0 GiB"):
        resolve_task_run({}, "image", str(path), False)
    assert time.perf_counter() - start < 1 and not decoded
    with memory.memory_limit_set("64G"), pytest.raises(ValueError, match=r"huge.png: the decoded image \(60000x60000, "
                                                                         r"4 channels\) .* need 160.9 GiB, more than"):
        signals.read_image(path)
    assert not decoded


def test_inr_fit_refuses_what_rlimit_as_does_not_leave(tmp_path):
    """12000^2 RGB: about 4.8 GiB, under this machine's memory; RLIMIT_AS 6 GiB leaves about 2.4 GiB once torch
    is loaded (VmSize ~3.6 GiB)."""
    path = header_only_png(tmp_path / "big.png", 12000, 12000)
    limit = 6 * GIB
    code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit})); "
            "from inr_enc.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "image", str(path), "--out", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "left under the process limit (RLIMIT_AS) 6.0 GiB" in lines[0], result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_a_task_reads_its_signal_once_and_only_when_used(tmp_path, monkeypatch, kind):
    import numpy as np
    import soundfile
    import torch
    from PIL import Image as PILImage

    from inr_enc.fitting import signals  # the tasks import their readers from it when they read

    if kind == "image":
        path, reader, channels = tmp_path / "x.png", "read_image", 3
        PILImage.fromarray(np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3)).save(path)
    else:
        path, reader, channels = tmp_path / "x.wav", "read_audio", 2
        soundfile.write(path, np.linspace(-1, 1, 200).reshape(100, 2), 8000, subtype="PCM_16")
    module = signals
    calls, real = [], getattr(module, reader)
    monkeypatch.setattr(module, reader, lambda file, *rest: calls.append(file) or real(file, *rest))
    run, task = resolve_task_run({}, kind, str(path), False)
    assert calls == [] and run["task"]["channels"] == channels
    task.problem()
    task.problem()
    task.finish(lambda x: torch.zeros(len(x), channels), tmp_path, 64, torch.device("cpu"))
    assert calls == [path, tmp_path / f"reconstruction.{path.suffix[1:]}"]  # the signal, then the file written
