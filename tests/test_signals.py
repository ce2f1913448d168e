"""fitting/signals.py: every image and audio format inr-fit takes, each checked against values written by another
library (numpy arrays through pypng, Pillow, tifffile, soundfile), and inr-fit on images down to 1x1."""

import json
import struct

import numpy as np
import png
import pytest
import soundfile
import tifffile
import yaml
from PIL import Image as PILImage

from inr_enc.cli import main as inr_fit
from inr_enc.fitting.signals import read_audio, read_image, write_audio, write_image
from inr_enc.fitting.tasks.audio import AudioTask

RNG = np.random.default_rng(0)
TINY = {"encoding": {"otype": "Frequency", "n_frequencies": 2},
        "network": {"otype": "CutlassMLP", "n_neurons": 8, "n_hidden_layers": 1},
        "training": {"steps": 4, "eval_every": 2, "checkpoint_every": 2}}


def fit(*args):
    return inr_fit([*map(str, args), "--quiet"])


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def write_png(path, pixels, **options):
    """pixels [H, W, C] through pypng; options: bitdepth, interlace, palette, transparent..."""
    height, width, channels = pixels.shape
    if "palette" not in options:
        options.update(greyscale=channels <= 2, alpha=channels in (2, 4))
    with open(path, "wb") as file:
        png.Writer(width, height, **options).write(file, pixels.reshape(height, -1).tolist())


def read_png_direct(path):
    width, height, rows, info = png.Reader(filename=str(path)).asDirect()
    return np.vstack([np.asarray(row) for row in rows]).reshape(height, width, info["planes"]), info


def test_cmyk_jpeg_is_read_as_rgb(tmp_path):
    PILImage.fromarray(RNG.integers(0, 256, (8, 6, 4), dtype=np.uint8), "CMYK").save(tmp_path / "c.jpg")
    with PILImage.open(tmp_path / "c.jpg") as image:
        assert image.mode == "CMYK"
        reference = np.asarray(image.convert("RGB")) / 255.0
    read = read_image(tmp_path / "c.jpg")
    assert read.pixels.shape == (8, 6, 3) and read.dtype == np.uint8
    np.testing.assert_allclose(read.pixels, reference, atol=1e-6)


@pytest.mark.parametrize("channels, bitdepth, interlace", [
    (3, 16, True), (4, 16, True), (1, 16, False), (1, 16, True), (2, 16, False), (2, 8, False), (2, 8, True),
    (1, 2, False), (3, 8, True)])
def test_png_is_read_exactly_and_written_back_in_kind(tmp_path, channels, bitdepth, interlace):
    peak = 2**bitdepth - 1
    pixels = RNG.integers(0, peak + 1, (5, 7, channels))
    write_png(tmp_path / "in.png", pixels, bitdepth=bitdepth, interlace=interlace)
    image = read_image(tmp_path / "in.png")
    assert image.pixels.shape == (5, 7, channels) and image.dtype == (np.uint16 if bitdepth > 8 else np.uint8)
    assert np.array_equal(np.round(image.pixels * peak), pixels)  # 16 bit stays 16 bit, interlaced or not
    write_image(tmp_path / "out.png", image.pixels, image.dtype)
    written, info = read_png_direct(tmp_path / "out.png")
    assert info["bitdepth"] == max(8, bitdepth) and info["greyscale"] == (channels <= 2)
    assert info["alpha"] == (channels in (2, 4)) and written.shape == (5, 7, channels)
    assert np.array_equal(written, np.round(pixels / peak * np.iinfo(image.dtype).max))


def test_pillow_grey_alpha_png_stays_two_channels(tmp_path):
    pixels = RNG.integers(0, 256, (4, 3, 2), dtype=np.uint8)
    PILImage.fromarray(pixels, "LA").save(tmp_path / "la.png")
    image = read_image(tmp_path / "la.png")
    assert np.array_equal(np.round(image.pixels * 255), pixels)


def test_palette_with_transparency_is_rgba(tmp_path):
    palette = [(255, 0, 0, 0), (0, 255, 0, 128), (0, 0, 255, 255), (9, 9, 9)]  # the last entry has no tRNS: opaque
    indices = RNG.integers(0, 4, (5, 6, 1))
    write_png(tmp_path / "p.png", indices, palette=palette, bitdepth=2)
    table = np.array([entry if len(entry) == 4 else (*entry, 255) for entry in palette])
    image = read_image(tmp_path / "p.png")
    assert image.pixels.shape == (5, 6, 4) and image.dtype == np.uint8
    assert np.array_equal(np.round(image.pixels * 255), table[indices[..., 0]])
    # the same through Pillow (a GIF: palette + transparency index)
    rgb = PILImage.fromarray(indices[..., 0].astype(np.uint8), "P")
    rgb.putpalette([channel for entry in palette for channel in entry[:3]])
    rgb.save(tmp_path / "p.gif", transparency=0)
    gif = read_image(tmp_path / "p.gif")
    assert gif.pixels.shape == (5, 6, 4)
    assert np.array_equal(np.round(gif.pixels[..., 3] * 255), np.where(indices[..., 0] == 0, 0, 255))


def test_tiff_float_and_16_bit(tmp_path):
    rgb16 = RNG.integers(0, 65536, (3, 4, 5), dtype=np.uint16)  # planar: samples first
    tifffile.imwrite(tmp_path / "planar.tif", rgb16, photometric="rgb", planarconfig="separate")
    image = read_image(tmp_path / "planar.tif")
    assert image.dtype == np.uint16 and np.array_equal(np.round(image.pixels * 65535), rgb16.transpose(1, 2, 0))
    values = np.array([[-0.5, 0.25], [0.75, 2.0]], np.float32)
    tifffile.imwrite(tmp_path / "float.tif", values)
    image = read_image(tmp_path / "float.tif")
    assert image.dtype == np.uint16 and np.array_equal(image.pixels[..., 0], np.clip(values, 0, 1))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_pixels_are_refused_before_training(tmp_path, tiny_config, capsys, bad):
    values = RNG.random((4, 5, 3)).astype(np.float32)
    values[2, 1, 0] = bad
    tifffile.imwrite(tmp_path / "bad.tif", values, photometric="rgb")
    with pytest.raises(ValueError, match="1 pixel value.* NaN or infinite"):
        read_image(tmp_path / "bad.tif")
    assert fit("image", tmp_path / "bad.tif", "--config", tiny_config, "--out", tmp_path / "run") == 2
    assert "NaN or infinite" in capsys.readouterr().err and not (tmp_path / "run").exists()


PCM = [("WAV", "PCM_U8", 8), ("WAV", "PCM_16", 16), ("WAV", "PCM_24", 24), ("WAV", "PCM_32", 32),
       ("FLAC", "PCM_S8", 8), ("FLAC", "PCM_16", 16), ("FLAC", "PCM_24", 24)]


@pytest.mark.parametrize("container, subtype, bits", PCM)
def test_pcm_audio_is_read_exactly_and_written_back_in_its_subtype(tmp_path, container, subtype, bits):
    top = 2 ** (bits - 1)
    ints = np.concatenate([[-top, top - 1, 0, -1, 1], RNG.integers(-top, top, 45)]).reshape(25, 2)
    path = tmp_path / f"in.{container.lower()}"
    soundfile.write(path, ints.astype(np.int32) << (32 - bits), 8000, subtype=subtype, format=container)
    audio = read_audio(path)
    assert (audio.rate, audio.container, audio.subtype) == (8000, container, subtype)
    np.testing.assert_array_equal(audio.samples, (ints / top).astype(np.float32))
    write_audio(tmp_path / "out", audio.samples, audio)
    assert soundfile.info(tmp_path / "out").subtype == subtype and soundfile.info(tmp_path / "out").format == container
    back = soundfile.read(tmp_path / "out", dtype="int32", always_2d=True)[0] >> (32 - bits)
    if bits == 32:  # float32 samples hold 24 bits of mantissa
        np.testing.assert_allclose(back, ints, atol=2**8)
    else:
        np.testing.assert_array_equal(back, ints)


def test_8_bit_wav_is_unsigned_on_disk(tmp_path):
    # an independent reference: a hand-made RIFF header around raw unsigned bytes (128 = silence)
    raw = np.array([0, 64, 128, 200, 255], np.uint8)
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 8000, 1, 8)
    body = b"WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", 5) + raw.tobytes() + b"\0"
    (tmp_path / "u8.wav").write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    audio = read_audio(tmp_path / "u8.wav")
    assert audio.sample_format == "uint8"
    np.testing.assert_array_equal(audio.samples[:, 0], (raw.astype(float) - 128) / 128)


@pytest.mark.parametrize("subtype, dtype", [("FLOAT", np.float32), ("DOUBLE", np.float64)])
def test_float_wav_is_read_and_written_back_as_stored(tmp_path, subtype, dtype):
    values = np.array([[-1.0, 0.1], [0.123456789, -0.3], [0.999, 1.0]], dtype)
    soundfile.write(tmp_path / "f.wav", values, 22050, subtype=subtype)
    audio = read_audio(tmp_path / "f.wav")
    assert audio.sample_format == {"FLOAT": "float32", "DOUBLE": "float64"}[subtype]
    np.testing.assert_array_equal(audio.samples, values.astype(np.float32))
    write_audio(tmp_path / "out.wav", audio.samples, audio)
    back, rate = soundfile.read(tmp_path / "out.wav", dtype="float64", always_2d=True)
    assert rate == 22050 and soundfile.info(tmp_path / "out.wav").subtype == subtype
    np.testing.assert_array_equal(back, values.astype(np.float32))


def test_pcm_is_quantised_to_nearest_where_libsndfile_rounds_down(tmp_path):
    """Why write_audio quantises itself: libsndfile's float -> 16-bit WAV conversion (with clipping, as soundfile
    opens files) rounds 0.7 of a step down to 0; ours rounds to nearest, as np.round does."""
    steps = np.array([-100.7, -5.5, -0.3, 0.3, 0.7, 5.5, 100.3, 100.7, 40000.0])
    values = (steps / 2**15)[:, None]
    soundfile.write(tmp_path / "lib.wav", values, 8000, subtype="PCM_16")
    by_libsndfile = soundfile.read(tmp_path / "lib.wav", dtype="int16")[0]
    assert list(by_libsndfile[:8]) == [-101, -6, -1, 0, 0, 5, 100, 100]  # floor (if this changes, see signals.py)
    like = read_audio(tmp_path / "lib.wav")
    write_audio(tmp_path / "ours.wav", values.astype(np.float32), like)
    ours = soundfile.read(tmp_path / "ours.wav", dtype="int16")[0]
    assert list(ours) == [-101, -6, 0, 0, 1, 6, 100, 101, 32767]  # np.round (half to even), clipped


@pytest.mark.parametrize("container, subtype, rate, name, atol", [
    ("FLAC", "PCM_16", 8000, "reconstruction.flac", 1 / 2**15), ("FLAC", "PCM_24", 8000, "reconstruction.flac", 1e-6),
    ("OGG", "VORBIS", 8000, "reconstruction.ogg", 0.05), ("OGG", "OPUS", 48000, "reconstruction.ogg", 0.1),
    ("WAVEX", "PCM_24", 8000, "reconstruction.wav", 1e-6), ("AIFF", "PCM_16", 8000, "reconstruction.wav", 1 / 2**15)])
def test_audio_containers_fit_and_are_written_back(tmp_path, tiny_config, container, subtype, rate, name, atol):
    t = np.arange(2400) / rate
    signal = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.3 * np.cos(2 * np.pi * 660 * t)], axis=1)
    path = tmp_path / f"in.{container.lower()}"
    soundfile.write(path, signal, rate, subtype=subtype, format=container)
    audio = read_audio(path)
    assert audio.samples.shape == signal.shape and audio.subtype == subtype
    np.testing.assert_allclose(audio.samples, signal, atol=atol)
    assert fit("audio", path, "--config", tiny_config, "--out", tmp_path / "run") == 0
    assert sorted(p.name for p in (tmp_path / "run").glob("reconstruction*")) == [name]
    info = soundfile.info(tmp_path / "run" / name)
    assert (info.samplerate, info.channels) == (rate, 2)
    assert (info.format, info.subtype) == ((container, subtype) if container != "AIFF" else ("WAV", subtype))
    task = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["task"]
    assert task["container"] == container.lower() and task["format"] == audio.sample_format


def test_a_subtype_wav_cannot_hold_goes_to_its_nearest(tmp_path):
    soundfile.write(tmp_path / "s8.aiff", np.zeros((4, 1)), 8000, subtype="PCM_S8", format="AIFF")
    assert read_audio(tmp_path / "s8.aiff").output_format == ("WAV", "PCM_U8", "wav")


def test_a_wav_with_an_impossible_rate_is_refused_before_training(tmp_path, tiny_config, capsys):
    soundfile.write(tmp_path / "ok.wav", np.zeros((64, 1)), 8000, subtype="PCM_16")
    data = bytearray((tmp_path / "ok.wav").read_bytes())
    rate_at = data.index(b"fmt ") + 12  # fmt chunk: id, size, format tag (2), channels (2), sample rate (4)
    assert struct.unpack("<I", data[rate_at:rate_at + 4])[0] == 8000
    data[rate_at:rate_at + 4] = struct.pack("<I", 0xFFFFFFFF)
    (tmp_path / "bad.wav").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sample rate or channel count is out of range"):
        AudioTask(tmp_path / "bad.wav")
    assert fit("audio", tmp_path / "bad.wav", "--config", tiny_config, "--out", tmp_path / "run") == 2
    err = capsys.readouterr().err.strip()
    assert "cannot read as audio" in err and len(err.splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("subtype", ["FLOAT", "DOUBLE"])
def test_non_finite_samples_are_refused_before_training(tmp_path, tiny_config, capsys, subtype):
    values = np.zeros((32, 2))
    values[5, 1], values[9, 0] = np.nan, -np.inf
    soundfile.write(tmp_path / "nan.wav", values, 8000, subtype=subtype)
    with pytest.raises(ValueError, match="2 sample.* NaN or infinite"):
        read_audio(tmp_path / "nan.wav")
    assert fit("audio", tmp_path / "nan.wav", "--config", tiny_config, "--out", tmp_path / "run") == 2
    assert "NaN or infinite" in capsys.readouterr().err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("config", ["hashgrid", "siren"])
@pytest.mark.parametrize("height, width", [(1, 1), (1, 7), (2, 3), (5, 5), (6, 6)])
def test_tiny_images_fit(tmp_path, height, width, config):
    pixels = RNG.integers(0, 256, (height, width, 3), dtype=np.uint8)
    PILImage.fromarray(pixels).save(tmp_path / "tiny.png")
    out = tmp_path / "run"
    assert fit("image", tmp_path / "tiny.png", "--steps", 5, "--out", out, "--config", config) == 0
    assert read_image(out / "reconstruction.png").pixels.shape == (height, width, 3)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 5 and np.isfinite(metrics["psnr"])
    if min(height, width) <= 5:  # SSIM's 11-px window, reflect-padded by 5 px, does not fit
        assert metrics["ssim"] is None and f"this image is {width}x{height}" in metrics["ssim_note"]
    else:
        assert 0 < metrics["ssim"] <= 1 and "ssim_note" not in metrics


def test_train_split_needs_a_test_pixel(tmp_path, capsys):
    PILImage.fromarray(np.zeros((1, 4, 3), np.uint8)).save(tmp_path / "row.png")
    assert fit("image", tmp_path / "row.png", "--train-split", "--out", tmp_path / "run", "--config", "siren") == 2
    assert "a 4x1 image has none" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_jpeg_is_read_upright_by_its_exif_orientation(tmp_path):
    """Orientation 6: the stored pixels are shown rotated 90 degrees clockwise (EXIF 2.3, tag 0x0112)."""
    stored = np.zeros((4, 8, 3), dtype=np.uint8)
    stored[0, 0] = 255  # a white corner: stored top left -> shown top right
    exif = PILImage.Exif()
    exif[0x0112] = 6
    PILImage.fromarray(stored).save(tmp_path / "phone.jpg", exif=exif, quality=100)
    with PILImage.open(tmp_path / "phone.jpg") as raw:
        decoded = np.asarray(raw.convert("RGB"))
    pixels = read_image(tmp_path / "phone.jpg").pixels
    assert pixels.shape == (8, 4, 3)
    np.testing.assert_array_equal(np.round(pixels * 255).astype(np.uint8), np.rot90(decoded, k=-1))
    assert pixels[0, -1].mean() > 0.5 and pixels[0, 0].mean() < 0.5
