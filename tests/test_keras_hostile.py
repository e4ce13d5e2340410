"""Hostile Keras files, built here with h5py and zipfile: a model never reads another file
(HDF5 external storage, external links, virtual datasets, soft links), declared sizes are
checked before anything is allocated (datasets, zip members), configs of the wrong type are one
line naming the file, the layer and what was expected; Keras 3's own .h5 layout and grouped convs
import and compute what Keras computes (a NumPy reference, and Keras itself when installed)."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from functools import reduce
from operator import xor
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from engine import kernels
from engine.io.models.keras_reader import MAX_CONFIG_DEPTH, read_keras
from engine.io.models.model_import import ModelImportError, translate
from tests.cli_support import one_error
from tests.model_files import conv_nchw

ROOT = Path(__file__).parents[1]
RNG = np.random.default_rng(20)
KERNEL = RNG.standard_normal((2, 2, 3, 4)).astype(np.float32)
BIAS = RNG.standard_normal(4).astype(np.float32)
#: The bytes of the file an attack reaches for (192 bytes: the kernel's size as float32).
SECRET = b"GB-SECRET-BYTES!" * 12
INPUT = {"class_name": "InputLayer", "config": {"name": "input_layer",
                                                "batch_shape": [None, 5, 5, 3]}}


# -- builders -------------------------------------------------------------------------------


def conv_entry(name: str = "c", cls: str = "Conv2D", **changes) -> dict:
    """A Keras 3 config entry of a conv layer (the kernel above: 2x2, 3 -> 4 channels)."""
    cfg = {"name": name, "filters": 4, "kernel_size": [2, 2], "strides": [1, 1],
           "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1],
           "groups": 1, "use_bias": True}
    if cls == "DepthwiseConv2D":
        del cfg["filters"], cfg["groups"]
        cfg["depth_multiplier"] = 1
    cfg.update(changes)
    return {"module": "keras.layers", "class_name": cls, "config": cfg,
            "build_config": {"input_shape": [None, 5, 5, 3]}}


def model_config(*layers: dict, cls: str = "Sequential", name: str = "seq") -> dict:
    return {"module": "keras", "class_name": cls,
            "config": {"name": name, "layers": [INPUT, *layers]}}


def keras_vars(h5, where: str = "layers/conv2d", kernel=KERNEL, bias=BIAS, name="c") -> None:
    group = h5.create_group(f"{where}/vars")
    group.attrs["name"] = name
    group.create_dataset("0", data=kernel)
    if bias is not None:
        group.create_dataset("1", data=bias)


def legacy_vars(h5, name: str = "c", kernel=KERNEL, bias=BIAS) -> None:
    """Keras 2's layout: model_weights/<name>/<name>/kernel:0, listed in weight_names."""
    group = h5.require_group(f"model_weights/{name}")
    names = [f"{name}/kernel:0"] + ([f"{name}/bias:0"] if bias is not None else [])
    group.create_dataset(names[0], data=kernel)
    if bias is not None:
        group.create_dataset(names[1], data=bias)
    group.attrs["weight_names"] = [n.encode() for n in names]


def h5_bytes(fill) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as h5:
        fill(h5)
    return buf.getvalue()


def write_keras(path: Path, config=None, fill=keras_vars, config_bytes: bytes | None = None,
                extra: tuple = ()) -> Path:
    """A .keras zip: config.json (``config`` as JSON, or raw ``config_bytes``),
    model.weights.h5 filled by ``fill(h5)`` and any ``extra`` (name, bytes) members."""
    config = model_config(conv_entry()) if config is None else config
    raw = json.dumps(config).encode() if config_bytes is None else config_bytes
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
        z.writestr("config.json", raw)
        z.writestr("model.weights.h5", h5_bytes(fill))
        for name, data in extra:
            z.writestr(name, data)
    return path


def write_legacy(path: Path, config=None, fill=legacy_vars, config_attr=None) -> Path:
    """A legacy .h5: the model_config attribute (``config`` as JSON, or ``config_attr`` as
    given) and the weights filled by ``fill(h5)``."""
    config = model_config(conv_entry()) if config is None else config
    with h5py.File(path, "w") as h5:
        h5.attrs["model_config"] = json.dumps(config) if config_attr is None else config_attr
        fill(h5)
    return path


def write_either(kind: str, path: Path, config=None, **kw) -> Path:
    write = write_keras if kind == "keras" else write_legacy
    return write(path.with_suffix(".keras" if kind == "keras" else ".h5"), config, **kw)


def one_line(text: str) -> str:
    assert "\n" not in text and "Traceback" not in text, text
    return text


def refusal(path: Path, layer: str = "c", **kw) -> str:
    """The one-line reason ``layer`` of ``path`` cannot be imported."""
    found = read_keras(str(path), **kw)
    assert layer in found.refused, (found.layers, found.refused)
    assert layer not in [la.name for la in found.layers]
    return one_line(found.refused[layer])


def whole_file_error(path: Path, **kw) -> str:
    with pytest.raises(ModelImportError) as err:
        read_keras(str(path), **kw)
    return one_line(str(err.value))


def gb(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd, env=env,
                          timeout=300)




def test_the_builders_make_files_that_import(tmp_path):
    """The base files of the attacks below import, so each refusal is the attack's doing."""
    for kind in ("keras", "legacy"):
        found = read_keras(str(write_either(kind, tmp_path / f"ok_{kind}")))
        assert not found.refused
        (layer,) = found.layers
        np.testing.assert_array_equal(layer.weights, KERNEL)
        np.testing.assert_array_equal(layer.bias, BIAS)


# -- 1. nothing outside the file ------------------------------------------------------------


def _other_h5(tmp_path: Path) -> Path:
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as h5:
        h5.create_dataset("w", data=np.frombuffer(SECRET, np.float32).reshape(KERNEL.shape))
    return other


def _attack(kind: str, tmp_path: Path):
    """``fill(h5, where)`` placing the attack at the kernel's path, and what the message must
    name as the thing reached for."""
    secret = tmp_path / "secret.bin"
    secret.write_bytes(SECRET)

    def external(target: str):
        def fill(h5, where):
            h5.create_dataset(where, shape=KERNEL.shape, dtype="f4",
                              external=[(target, 0, len(SECRET))])
        return fill

    def external_link(h5, where):
        h5[where] = h5py.ExternalLink(str(_other_h5(tmp_path)), "/w")

    def virtual(h5, where):
        other = _other_h5(tmp_path)
        layout = h5py.VirtualLayout(shape=KERNEL.shape, dtype="f4")
        layout[:] = h5py.VirtualSource(str(other), "w", shape=KERNEL.shape)
        h5.create_virtual_dataset(where, layout)

    def soft_link(h5, where):
        h5.create_dataset("elsewhere", data=KERNEL)
        h5[where] = h5py.SoftLink("/elsewhere")

    def soft_loop(h5, where):
        h5.create_dataset(where, data=KERNEL)
        parent = where.rsplit("/", 1)[0]
        h5[f"{parent}/loop"] = h5py.SoftLink("/" + parent.split("/")[0])

    def soft_cycle(h5, where):
        h5.create_dataset(where, data=KERNEL)
        h5["a"] = h5py.SoftLink("/b")
        h5["b"] = h5py.SoftLink("/a")

    return {
        "external /etc/passwd": (external("/etc/passwd"), "'/etc/passwd'"),
        "external absolute": (external(str(secret)), str(secret)),
        "external ../relative": (external("../secret.bin"), "'../secret.bin'"),
        "external link": (external_link, "other.h5"),
        "virtual dataset": (virtual, "other.h5"),
        "soft link": (soft_link, "'/elsewhere'"),
        "soft link loop": (soft_loop, "soft link"),
        "soft link cycle": (soft_cycle, "soft link to '/b'"),
    }[kind]


ATTACKS = ("external /etc/passwd", "external absolute", "external ../relative", "external link",
           "virtual dataset", "soft link", "soft link loop", "soft link cycle")
KERNEL_PATH = {"keras": "layers/conv2d/vars/0", "legacy": "model_weights/c/c/kernel:0"}


def _attack_file(container: str, attack: str, tmp_path: Path) -> tuple[Path, str]:
    fill_attack, reaches = _attack(attack, tmp_path)
    where = KERNEL_PATH[container]

    def fill(h5):
        if container == "keras":
            group = h5.create_group("layers/conv2d/vars")
            group.create_dataset("1", data=BIAS)
        else:
            group = h5.create_group("model_weights/c")
            group.create_dataset("c/bias:0", data=BIAS)
            group.attrs["weight_names"] = [b"c/kernel:0", b"c/bias:0"]
        fill_attack(h5, where)

    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return write_either(container, work / "model", fill=fill), reaches


def _files_holding(root: Path, data: bytes, skip: set[Path]) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p not in skip
            and data in p.read_bytes()]


@pytest.mark.parametrize("container", ["keras", "legacy"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_file_reaching_outside_itself_is_refused_naming_what_it_reaches(
        tmp_path, monkeypatch, container, attack):
    path, reaches = _attack_file(container, attack, tmp_path)
    if attack == "external ../relative":  # h5py itself does read the secret: the attack is real
        monkeypatch.chdir(path.parent)
        with h5py.File(path if container == "legacy" else
                       io.BytesIO(zipfile.ZipFile(path).read("model.weights.h5")), "r") as h5:
            assert h5[KERNEL_PATH[container]][()].tobytes() == SECRET
    message = whole_file_error(path)
    assert str(path) in message and reaches in message and "refused" in message
    if not attack.startswith("soft link "):  # the loops sit beside the kernel
        assert f"'/{KERNEL_PATH[container]}'" in message
    if container == "keras":
        assert "model.weights.h5" in message


@pytest.mark.parametrize(("container", "attack"), [
    *(("legacy", a) for a in ATTACKS),
    ("keras", "external absolute"), ("keras", "external link"), ("keras", "virtual dataset")])
def test_cli_import_of_a_file_reaching_outside_writes_nothing(tmp_path, container, attack):
    path, reaches = _attack_file(container, attack, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    one_error(gb("import", path, "--layer", "c", "-o", out / "x.gbc.json", cwd=path.parent),
              str(path.name), reaches)
    one_error(gb("import", path, "--list", cwd=path.parent), reaches)
    assert list(out.iterdir()) == []
    keep = {tmp_path / "secret.bin", tmp_path / "other.h5"}
    assert _files_holding(tmp_path, SECRET, keep) == []


def test_a_hard_link_cycle_neither_hangs_nor_is_refused(tmp_path):
    """HDF5 visits a group once however many hard links reach it."""
    def fill(h5):
        legacy_vars(h5)
        h5["model_weights/c/again"] = h5["model_weights"]
    found = read_keras(str(write_legacy(tmp_path / "m.h5", fill=fill)))
    assert [la.name for la in found.layers] == ["c"]


# -- 2. sizes before allocation -------------------------------------------------------------


@pytest.mark.parametrize("container", ["keras", "legacy"])
@pytest.mark.parametrize(("shape", "gib"), [((1, 1, 216 * 2**14, 2**16), "864.00 GiB"),
                                            ((1, 1, 448 * 2**14, 2**16), "1792.00 GiB")])
def test_unwritten_chunks_claiming_terabytes_are_not_allocated(tmp_path, container, shape, gib):
    def fill(h5):
        h5.create_dataset(KERNEL_PATH[container], shape=shape, dtype="f4", chunks=(1, 1, 1, 1024))
        if container == "legacy":
            h5["model_weights/c"].attrs["weight_names"] = [b"c/kernel:0"]
    config = model_config(conv_entry(kernel_size=[1, 1], use_bias=False))
    path = write_either(container, tmp_path / "m", config, fill=fill)
    assert path.stat().st_size < 2**20
    message = refusal(path)
    assert f"declares shape {list(shape)} float32 ({gib})" in message
    assert "more than the memory limit (2.00 GiB): not read" in message
    assert "layer 'c'" in message and str(path) in message


def test_cli_refuses_the_terabyte_dataset_with_one_line(tmp_path):
    def fill(h5):
        h5.create_dataset("layers/conv2d/vars/0", shape=(1, 1, 216 * 2**14, 2**16), dtype="f4",
                          chunks=(1, 1, 1, 1024))
    path = write_keras(tmp_path / "m.keras", model_config(conv_entry(kernel_size=[1, 1],
                                                                     use_bias=False)), fill=fill)
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "x.gbc.json"),
              "864.00 GiB", "memory limit")
    assert not (tmp_path / "x.gbc.json").exists()


@pytest.mark.parametrize("container", ["keras", "legacy"])
def test_contiguous_data_larger_than_the_file_is_not_allocated(tmp_path, container):
    def fill(h5):
        h5.create_dataset(KERNEL_PATH[container], shape=(1, 1, 1, 2**26), dtype="f4")
        if container == "legacy":
            h5["model_weights/c"].attrs["weight_names"] = [b"c/kernel:0"]
    config = model_config(conv_entry(kernel_size=[1, 1], filters=2**26, use_bias=False))
    message = refusal(write_either(container, tmp_path / "m", config, fill=fill))
    assert "(0.25 GiB) of contiguous data, more than the whole file" in message


@pytest.mark.parametrize("container", ["keras", "legacy"])
def test_weights_read_together_stay_within_the_memory_limit(tmp_path, container):
    kernel = np.ones((1, 1, 100, 100), np.float32)  # 40000 bytes each
    layers = [conv_entry(n, kernel_size=[1, 1], filters=100, use_bias=False) for n in "ab"]

    def fill(h5):
        for i, n in enumerate("ab"):
            if container == "keras":  # compressed: the zip member stays below the limit
                group = h5.create_group(f"layers/conv2d{'_1' if i else ''}/vars")
                group.create_dataset("0", data=kernel, compression="gzip")
            else:
                legacy_vars(h5, n, kernel, None)
    path = write_either(container, tmp_path / "m", model_config(*layers), fill=fill)
    found = read_keras(str(path), memory_limit=60_000)
    assert [la.name for la in found.layers] == ["a"]
    assert ("more than the memory limit (58.6 KiB) with the 39.1 KiB of weights read "
            "before it: not read") in found.refused["b"]
    assert [la.name for la in read_keras(str(path), memory_limit=80_000).layers] == ["a", "b"]


def _crc32_of_zeros(chunk: int, count: int) -> int:
    """zlib.crc32 of ``chunk * count`` zero bytes without reading them: the CRC of a chunk is
    affine in the CRC before it, so its 32 basis images give every step."""
    zeros = bytes(chunk)
    base = zlib.crc32(zeros, 0)
    columns = [zlib.crc32(zeros, 1 << i) ^ base for i in range(32)]
    crc = 0
    for _ in range(count):
        crc = base ^ reduce(xor, (c for i, c in enumerate(columns) if crc >> i & 1), 0)
    return crc


def _raw_zip(path: Path, members: list[tuple[str, int, int, int, bytes]]) -> None:
    """A zip of (name, method, crc, uncompressed size, stored bytes) members, written as
    zipfile writes them (sizes below 4 GiB: no zip64)."""
    local, central = b"", b""
    for name, method, crc, size, data in members:
        raw = name.encode()
        head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data),
                           size, len(raw), 0)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21,
                               crc, len(data), size, len(raw), 0, 0, 0, 0, 0, len(local)) + raw
        local += head + raw + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central),
                      len(local), 0)
    path.write_bytes(local + central + end)


def _zeros_member(name: str, size: int) -> tuple[str, int, int, int, bytes]:
    """A deflated member of ``size`` zero bytes (about 1000:1): one compressed 16 MiB block
    repeated (each block ends on a full flush, so the copies concatenate)."""
    chunk = 16 * 2**20
    assert size % chunk == 0
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = co.compress(bytes(chunk)) + co.flush(zlib.Z_FULL_FLUSH)
    data = block * (size // chunk) + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    return name, zipfile.ZIP_DEFLATED, _crc32_of_zeros(chunk, size // chunk), size, data


def test_the_zip_bomb_builder_makes_a_real_bomb(tmp_path):
    """A small one decompresses to its zeros with the right CRC (zipfile checks it)."""
    path = tmp_path / "small.zip"
    _raw_zip(path, [_zeros_member("z", 3 * 16 * 2**20)])
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("z")
        assert info.compress_size < info.file_size // 900
        assert z.read("z") == bytes(3 * 16 * 2**20)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bombs")
    config = json.dumps(model_config(conv_entry())).encode()
    weights = h5_bytes(keras_vars)
    stored = lambda name, data: (name, zipfile.ZIP_STORED, zlib.crc32(data), len(data), data)
    _raw_zip(d / "weights.keras", [stored("config.json", config),
                                   _zeros_member("model.weights.h5", 3 * 2**30)])
    _raw_zip(d / "config.keras", [_zeros_member("config.json", 96 * 2**20),
                                  stored("model.weights.h5", weights)])
    return {"weights": d / "weights.keras", "config": d / "config.keras"}


@pytest.mark.parametrize(("which", "words"), [
    ("weights", ("model.weights.h5 is 3.00 GiB uncompressed, more than the memory limit "
                "(2.00 GiB): not read")),
    ("config", ("config.json is 96.0 MiB uncompressed, more than a config may be (64.0 MiB): "
               "not read"))])
def test_zip_bombs_are_refused_before_they_are_read(bombs, monkeypatch, which, words):
    path = bombs[which]
    assert path.stat().st_size < 4 * 2**20
    opened = []
    real_open = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    message = whole_file_error(path)
    assert message == f"{path}: {words}"
    bomb = "model.weights.h5" if which == "weights" else "config.json"
    assert bomb not in opened


def test_cli_list_of_a_zip_bomb_is_one_line(bombs):
    one_error(gb("import", bombs["weights"], "--list"), "3.00 GiB uncompressed")


def test_member_names_climbing_out_do_not_matter(tmp_path):
    """Nothing is extracted: members named ../evil or /abs/evil are never written."""
    marker = f"evil_{tmp_path.name}"
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    path = write_keras(folder / "m.keras", extra=((f"../../{marker}.txt", b"x"),
                                                  (f"/tmp/{marker}_abs.txt", b"x"),
                                                  (f"layers/../../{marker}2.txt", b"x")))
    proc = gb("import", path, "--layer", "c", "-o", tmp_path / "a" / "x.gbc.json",
              cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.rglob(f"{marker}*"))
    assert not Path(f"/tmp/{marker}_abs.txt").exists()


# -- 3. configs of the wrong type -----------------------------------------------------------


LAYER_CASES = [
    # (config changes, class, expected words)
    ({"kernel_size": "3"}, "Conv2D", ("kernel_size is the string '3', expected a positive integer "
                                     "or a list of 2")),
    ({"kernel_size": 2.0}, "Conv2D", "kernel_size is the number 2.0"),
    ({"kernel_size": True}, "Conv2D", "kernel_size is the boolean true"),
    ({"kernel_size": [2]}, "Conv2D", "kernel_size is the list [2]"),
    ({"kernel_size": [2, 2, 2]}, "Conv2D", "kernel_size is the list [2, 2, 2]"),
    ({"kernel_size": [2, "2"]}, "Conv2D", "kernel_size is the list [2, '2']"),
    ({"kernel_size": [True, 2]}, "Conv2D", "kernel_size is the list [True, 2]"),
    ({"kernel_size": None}, "Conv2D", "kernel_size is null"),
    ({"kernel_size": 0}, "Conv2D", "kernel_size is the integer 0"),
    ({"kernel_size": {"h": 2}}, "Conv2D", "kernel_size is the object {'h': 2}"),
    ({"strides": "2"}, "Conv2D", "strides is the string '2'"),
    ({"strides": 2.0}, "Conv2D", "strides is the number 2.0"),
    ({"strides": [1, True]}, "Conv2D", "strides is the list [1, True]"),
    ({"strides": False}, "Conv2D", "strides is the boolean false"),
    ({"dilation_rate": [1, 1.0]}, "Conv2D", "dilation_rate is the list [1, 1.0]"),
    ({"dilation_rate": -1}, "Conv2D", "dilation_rate is the integer -1"),
    ({"padding": 1}, "Conv2D", "padding is the integer 1, expected 'same' or 'valid'"),
    ({"padding": ["same"]}, "Conv2D", "padding is the list ['same']"),
    ({"padding": "causal"}, "Conv2D", "padding is the string 'causal'"),
    ({"padding": None}, "Conv2D", "padding is null"),
    ({"data_format": 1}, "Conv2D", ("data_format is the integer 1, expected 'channels_last' or "
                                   "'channels_first'")),
    ({"data_format": "NHWC"}, "Conv2D", "data_format is the string 'NHWC'"),
    ({"use_bias": "yes"}, "Conv2D", "use_bias is the string 'yes', expected true or false"),
    ({"use_bias": 1}, "Conv2D", "use_bias is the integer 1"),
    ({"use_bias": None}, "Conv2D", "use_bias is null"),
    ({"groups": "2"}, "Conv2D", "groups is the string '2', expected a positive integer"),
    ({"groups": 2.0}, "Conv2D", "groups is the number 2.0"),
    ({"groups": True}, "Conv2D", "groups is the boolean true"),
    ({"groups": 0}, "Conv2D", "groups is the integer 0"),
    ({"filters": "4"}, "Conv2D", "filters is the string '4'"),
    ({"filters": 5}, "Conv2D", "filters is 5 but the kernel has shape [2, 2, 3, 4]"),
    ({"kernel_size": [3, 3]}, "Conv2D", ("kernel_size is [3, 3] but the kernel has shape "
                                        "[2, 2, 3, 4]")),
    ({"groups": 3}, "Conv2D", "groups 3 does not divide the kernel's 4 output channels"),
    ({"depth_multiplier": "4"}, "DepthwiseConv2D", "depth_multiplier is the string '4'"),
    ({"depth_multiplier": True}, "DepthwiseConv2D", "depth_multiplier is the boolean true"),
    ({"depth_multiplier": 2}, "DepthwiseConv2D", ("depth_multiplier is 2 but the kernel has "
                                                 "shape [2, 2, 3, 4]")),
]


@pytest.mark.parametrize("container", ["keras", "legacy"])
@pytest.mark.parametrize(("changes", "cls", "words"), LAYER_CASES,
                         ids=[f"{next(iter(c))}={c[next(iter(c))]!r}" for c, _, _ in LAYER_CASES])
def test_layer_attributes_of_the_wrong_type_are_named(tmp_path, container, changes, cls, words):
    entry = conv_entry(cls=cls, **changes)
    if cls == "DepthwiseConv2D" and "depth_multiplier" not in changes:
        entry["config"]["depth_multiplier"] = 4
    fill = ((lambda h5: keras_vars(h5, "layers/depthwise_conv2d")) if container == "keras"
            and cls == "DepthwiseConv2D" else keras_vars if container == "keras"
            else legacy_vars)
    path = write_either(container, tmp_path / "m", model_config(entry), fill=fill)
    message = refusal(path)
    assert message.startswith("layer 'c': ") and words in message and str(path) in message


@pytest.mark.parametrize("container", ["keras", "legacy"])
def test_a_missing_kernel_size_is_named(tmp_path, container):
    entry = conv_entry()
    del entry["config"]["kernel_size"]
    message = refusal(write_either(container, tmp_path / "m", model_config(entry)))
    assert "kernel_size is missing, expected a positive integer" in message


@pytest.mark.parametrize("container", ["keras", "legacy"])
@pytest.mark.parametrize("value", [[1, 2], "conv", None, 7])
def test_a_layer_config_that_is_not_an_object_is_named(tmp_path, container, value):
    entry = {"class_name": "Conv2D", "name": "c", "config": value}
    message = refusal(write_either(container, tmp_path / "m", model_config(entry)))
    assert message.startswith("layer 'c': its config is ") and "expected an object" in message


def _deep(levels: int) -> dict:
    config = model_config(conv_entry())
    config["config"]["extra"] = json.loads("[" * levels + "]" * levels)
    return config


WHOLE_CASES = [
    ("top list", [1, 2], "is the list [1, 2], expected an object (a model)"),
    ("top string", "model", "is the string 'model', expected an object"),
    ("top int", 3, "is the integer 3, expected an object"),
    ("config list", {"class_name": "Sequential", "config": []},
     "the model config's \"config\" is the list [], expected an object"),
    ("config string", {"class_name": "Sequential", "config": "x"},
     "\"config\" is the string 'x'"),
    ("config missing", {"class_name": "Sequential"}, "\"config\" is missing"),
    ("layers object", {"class_name": "Sequential", "config": {"layers": {}}},
     "the model config's \"layers\" are the object {}, expected a list"),
    ("layers null", {"class_name": "Sequential", "config": {"layers": None}},
     "\"layers\" are null"),
    ("entry string", model_config("conv"),
     "the layer at $.config.layers[1] is the string 'conv', expected an object"),
    ("entry int", model_config(5), "the layer at $.config.layers[1] is the integer 5"),
    ("entry null", model_config(None), "the layer at $.config.layers[1] is null"),
    ("entry list", model_config([conv_entry()]), "$.config.layers[1] is the list"),
    ("class_name int", model_config({"class_name": 3, "config": {"name": "c"}}),
     "has class_name the integer 3, expected a string"),
    ("name list", model_config({"class_name": "Conv2D", "config": {"name": ["c"]}}),
     "the 'Conv2D' layer at $.config.layers[1] has name the list ['c'], expected a string"),
    ("name missing", model_config({"class_name": "Conv2D", "config": [1]}),
     "has name missing, expected a string"),
    ("nested layers string", model_config({"class_name": "Sequential",
                                           "config": {"name": "inner", "layers": "x"}}),
     "model 'inner' at $.config.layers[1]: its layers are the string 'x', expected a list"),
    (f"nested {MAX_CONFIG_DEPTH + 100} deep", _deep(MAX_CONFIG_DEPTH + 100),
     f"nested more than {MAX_CONFIG_DEPTH} levels deep"),
]


@pytest.mark.parametrize("container", ["keras", "legacy"])
@pytest.mark.parametrize(("config", "words"), [c[1:] for c in WHOLE_CASES],
                         ids=[c[0] for c in WHOLE_CASES])
def test_a_config_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path, container, config,
                                                                  words):
    path = write_either(container, tmp_path / "m", config)
    message = whole_file_error(path)
    assert message.startswith(str(path)) and words in message


RAW_CASES = [
    ("nested 1500 deep", b'{"config": ' + b"[" * 1500 + b"]" * 1500 + b"}",
     f"nested more than {MAX_CONFIG_DEPTH} levels deep"),
    ("duplicate key", json.dumps(model_config(conv_entry())).replace(
        '"strides": [1, 1]', '"strides": [1, 1], "strides": [2, 2]').encode(),
     "duplicate key (each key may appear once) (at $.config.layers[1].config.strides)"),
    ("5000 digits", json.dumps(model_config(conv_entry())).replace(
        '"filters": 4', '"filters": 4' + "0" * 5000).encode(),
     "integer literal of 5001 digits is too long"),
    ("top null", b"null", "is null, expected an object (a model)"),
    ("not JSON", b"{'config': 1}", "not JSON"),
    ("not UTF-8", b'{"config": "\xff"}', "is not UTF-8 text"),
]


@pytest.mark.parametrize("container", ["keras", "legacy"])
@pytest.mark.parametrize(("raw", "words"), [c[1:] for c in RAW_CASES],
                         ids=[c[0] for c in RAW_CASES])
def test_raw_config_text_is_parsed_strictly(tmp_path, container, raw, words):
    if container == "keras":
        path = write_keras(tmp_path / "m.keras", config_bytes=raw)
    else:
        path = write_legacy(tmp_path / "m.h5", config_attr=raw)
    message = whole_file_error(path)
    assert message.startswith(str(path)) and words in message


def test_cli_on_json_nested_1500_deep_is_one_line(tmp_path):
    path = write_keras(tmp_path / "m.keras",
                       config_bytes=b'{"config": ' + b"[" * 1500 + b"]" * 1500 + b"}")
    one_error(gb("import", path, "--list"), "config.json", "nested more than 200 levels deep")


@pytest.mark.parametrize("attr", [np.arange(3), np.float64(1.5), np.array([b"{}", b"{}"])])
def test_a_model_config_attribute_that_is_not_a_string_is_named(tmp_path, attr):
    message = whole_file_error(write_legacy(tmp_path / "m.h5", config_attr=attr))
    assert "the model_config attribute is" in message and "expected a JSON string" in message


def test_cli_kernel_size_string_is_one_line_naming_layer_and_file(tmp_path):
    path = write_legacy(tmp_path / "m.h5", model_config(conv_entry(kernel_size="2")))
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "x.gbc.json"),
              "layer 'c'", "kernel_size is the string '2'", str(path))


# -- a dataset where a group belongs, and the other way round ---------------------------------


def _keras_fill(kind: str):
    def fill(h5):
        if kind == "vars is a dataset":
            h5.create_dataset("layers/conv2d/vars", data=KERNEL)
        elif kind == "kernel is a group":
            h5.create_group("layers/conv2d/vars/0/x")
            h5.create_dataset("layers/conv2d/vars/1", data=BIAS)
        elif kind == "no vars":
            h5.create_group("layers/conv2d")
        elif kind == "no bias":
            keras_vars(h5, bias=None)
        elif kind == "other layer's vars":
            keras_vars(h5, name="someone")
        elif kind == "int kernel":
            keras_vars(h5, kernel=KERNEL.astype(np.int32))
        elif kind == "string kernel":
            keras_vars(h5, kernel=np.array([b"ab"]))
        elif kind == "rank 3 kernel":
            keras_vars(h5, kernel=KERNEL[0])
        elif kind == "rank 0 kernel":
            keras_vars(h5, kernel=np.float32(1))
        elif kind == "empty dataspace":
            h5.create_dataset("layers/conv2d/vars/0", data=h5py.Empty("f4"))
            h5.create_dataset("layers/conv2d/vars/1", data=BIAS)
        elif kind == "layer path is a dataset":
            h5.create_dataset("layers/conv2d", data=KERNEL)
    return fill


KERAS_STRUCTURE = {
    "vars is a dataset": "the variables 'layers/conv2d/vars' is a dataset, expected a group",
    "kernel is a group": "the kernel 'layers/conv2d/vars/0' is a group, expected a dataset",
    "no vars": "has no variables at 'layers/conv2d/vars'",
    "no bias": "the bias 'layers/conv2d/vars/1' is missing",
    "other layer's vars": "the variables at 'layers/conv2d/vars' belong to layer 'someone'",
    "int kernel": "holds int32 values, expected floats",
    "string kernel": "holds |S2 values, expected floats",
    "rank 3 kernel": "the kernel has shape [2, 3, 4], expected 4 dimensions (H, W, in, out)",
    "rank 0 kernel": "the kernel has shape [], expected 4 dimensions",
    "empty dataspace": "holds no data (an empty dataspace)",
    "layer path is a dataset": "has no variables at 'layers/conv2d/vars'",
}


@pytest.mark.parametrize("kind", sorted(KERAS_STRUCTURE))
def test_keras_weights_of_the_wrong_kind_are_named(tmp_path, kind):
    path = write_keras(tmp_path / "m.keras", fill=_keras_fill(kind))
    message = refusal(path)
    assert message.startswith("layer 'c': ") and KERAS_STRUCTURE[kind] in message
    assert str(path) in message


def _legacy_fill(kind: str):
    def fill(h5):
        if kind == "model_weights is a dataset":
            h5.create_dataset("model_weights", data=KERNEL)
            return
        group = h5.create_group("model_weights/c")
        names = {"weight_names int": np.arange(2), "weight_names 2-D": np.array([[b"a"]]),
                 "weight_names scalar": np.int64(3),
                 "weight_names not UTF-8": [b"c/kernel:0\xff"]}
        if kind in names:
            group.attrs["weight_names"] = names[kind]
        elif kind == "listed kernel missing":
            group.attrs["weight_names"] = [b"c/kernel:0"]
        elif kind == "listed kernel is a group":
            group.create_group("c/kernel:0")
            group.attrs["weight_names"] = [b"c/kernel:0"]
        elif kind == "no weights listed":
            group.attrs["weight_names"] = np.array([], np.float64)
        elif kind == "no bias listed":
            group.create_dataset("c/kernel:0", data=KERNEL)
            group.attrs["weight_names"] = [b"c/kernel:0"]
        elif kind == "no kernel listed":
            group.create_dataset("c/bias:0", data=BIAS)
            group.attrs["weight_names"] = [b"c/bias:0"]
    return fill


LEGACY_STRUCTURE = {
    "model_weights is a dataset": "the group 'model_weights' is a dataset, expected a group",
    "weight_names int": "group 'c': weight_names is a 1-D int64 attribute",
    "weight_names 2-D": "group 'c': weight_names is a 2-D |S1 attribute",
    "weight_names scalar": "weight_names is a 0-D int64 attribute",
    "weight_names not UTF-8": "weight_names holds b'c/kernel:0\\xff', not UTF-8 text",
    "listed kernel missing": "the kernel 'model_weights/c/c/kernel:0' is missing",
    "listed kernel is a group": "the kernel 'model_weights/c/c/kernel:0' is a group, expected "
                                "a dataset",
    "no weights listed": "lists no weights for this layer",
    "no bias listed": "use_bias is true but its weight_names ['c/kernel:0'] name no bias",
    "no kernel listed": "its weight_names ['c/bias:0'] name no kernel",
}


@pytest.mark.parametrize("kind", sorted(LEGACY_STRUCTURE))
def test_legacy_weights_of_the_wrong_kind_are_named(tmp_path, kind):
    path = write_legacy(tmp_path / "m.h5", fill=_legacy_fill(kind))
    message = refusal(path)
    assert message.startswith("layer 'c': ") and LEGACY_STRUCTURE[kind] in message
    assert str(path) in message


def _bad_method(path: Path) -> None:
    """config.json's compression method patched to 99 (AES: not supported by zipfile)."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = -1
        while (at := data.find(signature, at + 1)) >= 0:
            name_at = at + (30 if signature == b"PK\x03\x04" else 46)
            if data[name_at:name_at + 11] == b"config.json":
                data[at + offset:at + offset + 2] = (99).to_bytes(2, "little")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("kind", "words"), [
    ("no config.json", "a .keras zip without config.json"),
    ("no weights", "a .keras zip without model.weights.h5"),
    ("weights not HDF5", "model.weights.h5 is not a readable HDF5 file"),
    ("method 99", "not a readable .keras zip (NotImplementedError"),
    ("random bytes", "not a Keras model (neither a .keras zip nor an HDF5 file)"),
    ("truncated zip", "not a Keras model"),
])
def test_broken_containers_are_one_line(tmp_path, kind, words):
    path = tmp_path / "m.keras"
    if kind == "random bytes":
        path.write_bytes(np.random.default_rng(0).bytes(4000))
    elif kind == "truncated zip":
        write_keras(path)
        path.write_bytes(path.read_bytes()[:300])
    else:
        with zipfile.ZipFile(path, "w") as z:
            if kind != "no config.json":
                z.writestr("config.json", json.dumps(model_config(conv_entry())))
            if kind != "no weights":
                z.writestr("model.weights.h5", h5_bytes(keras_vars) if kind == "method 99"
                           else b"not hdf5" * 10)
        if kind == "method 99":
            _bad_method(path)
    message = whole_file_error(path)
    assert message.startswith(str(path)) and words in message


@pytest.mark.parametrize("marked", [True, False])
def test_keras_bfloat16_variables_read_exactly_when_marked(tmp_path, marked):
    """Keras 3 writes a bfloat16 variable as 2-byte opaque values marked dtype="bfloat16";
    unmarked opaque values are not floats."""
    import ml_dtypes

    kernel = KERNEL.astype(ml_dtypes.bfloat16)

    def fill(h5):
        group = h5.create_group("layers/conv2d/vars")
        group.create_dataset("0", data=kernel)
        if marked:
            group["0"].attrs["dtype"] = "bfloat16"
    path = write_keras(tmp_path / "m.keras", model_config(conv_entry(use_bias=False)), fill=fill)
    if not marked:
        assert "holds |V2 values, expected floats" in refusal(path)
        return
    (layer,) = read_keras(str(path)).layers
    assert layer.weights.dtype == np.float32
    np.testing.assert_array_equal(layer.weights, kernel.astype(np.float32))


def test_names_with_control_characters_are_escaped_in_messages(tmp_path):
    name = "c\x07\x1b[31m"
    path = write_keras(tmp_path / "m.keras", model_config(conv_entry(name, kernel_size="2")))
    message = refusal(path, name)
    assert "\x07" not in message and "\x1b" not in message
    assert "layer 'c\\x07\\x1b[31m'" in message


# -- 4. the legacy reader is linear ---------------------------------------------------------


def write_many(path: Path, count: int) -> Path:
    """A legacy .h5 of ``count`` 1x1 Conv2D layers, layer i's kernel holding i."""
    layers = [{"class_name": "Conv2D", "config": {"name": f"c{i}", "filters": 1,
                                                   "kernel_size": [1, 1], "use_bias": False}}
              for i in range(count)]
    with h5py.File(path, "w") as h5:
        h5.attrs["model_config"] = json.dumps(model_config(*layers))
        root = h5.create_group("model_weights")
        for i in range(count):
            group = root.create_group(f"c{i}")
            group.create_dataset(f"c{i}/kernel:0", data=np.full((1, 1, 1, 1), i, np.float32))
            group.attrs["weight_names"] = [f"c{i}/kernel:0".encode()]
    return path


def test_two_thousand_layers_each_get_their_own_weights(tmp_path):
    found = read_keras(str(write_many(tmp_path / "m.h5", 2000)))
    assert not found.refused
    assert [la.name for la in found.layers] == [f"c{i}" for i in range(2000)]
    assert [float(la.weights[0, 0, 0, 0]) for la in found.layers] == list(range(2000))


# -- 5. Keras 3's own layouts, and what Keras computes ----------------------------------------


def reference(x: np.ndarray, layer: dict, kernel: np.ndarray, bias) -> np.ndarray:
    """The Keras layer on NHWC ``x`` by definition (tests/model_files.conv_nchw, float64):
    padding same = output ceil(in / stride) with the odd pad after."""
    c = layer["config"]
    if layer["class_name"] == "DepthwiseConv2D":
        ch, m = kernel.shape[2], kernel.shape[3]
        oihw, group = kernel.transpose(2, 3, 0, 1).reshape(ch * m, 1, *kernel.shape[:2]), ch
    else:
        oihw, group = kernel.transpose(3, 2, 0, 1), c.get("groups", 1)
    xc = x.transpose(0, 3, 1, 2)
    strides, dil = c["strides"], c["dilation_rate"]
    pads = [0, 0, 0, 0]
    if c["padding"] == "same":
        pads = []
        for size, k, s, d in zip(xc.shape[2:], oihw.shape[2:], strides, dil, strict=True):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            pads += [total // 2, total - total // 2]
    out = conv_nchw(xc, oihw, group, strides, dil, pads).transpose(0, 2, 3, 1)
    return out if bias is None else out + bias


def engine_forward(layer, x: np.ndarray) -> np.ndarray:
    """The imported layer through GradBlocks' own kernels (TF attributes from translate)."""
    hw = x.shape[1:3] if layer.data_format == "NHWC" else x.shape[2:4]
    conv = translate(layer, hw, batch=x.shape[0])
    a = conv.attrs
    op = kernels.depthwise_conv2d_native if conv.op == "DepthwiseConv2D" else kernels.conv2d
    out = op(x, layer.weights, a["strides"], a["padding"], a.get("explicit_paddings", ()),
             a["data_format"], a["dilations"])
    if layer.bias is not None:
        out = out + layer.bias.reshape([1, -1, 1, 1] if layer.data_format == "NCHW"
                                       else [1, 1, 1, -1])
    return out


def _k3(name, cls="Conv2D", kernel=(2, 2), cin=4, out=6, **cfg) -> tuple[dict, list]:
    """A Keras 3 layer config entry and its weights (kernel, bias when use_bias)."""
    c = {"name": name, "trainable": True, "kernel_size": list(kernel), "strides": [1, 1],
         "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1],
         "use_bias": True, "activation": "linear"}
    if cls == "Conv2D":
        c.update(filters=out, groups=1)
    else:
        c.update(depth_multiplier=out // cin)
    c.update(cfg)
    per = cin // c.get("groups", 1) if cls == "Conv2D" else cin
    last = out if cls == "Conv2D" else out // cin
    weights = [RNG.standard_normal((*kernel, per, last)).astype(np.float32)]
    if c["use_bias"]:
        weights.append(RNG.standard_normal(out).astype(np.float32))
    return {"class_name": cls, "config": c}, weights


#: Keras 3.15.1's own model.save("m.h5") / ("m.keras") of a Sequential (inspected with h5py).
SEQ = [_k3("c_same", padding="same"), _k3("c_stride", cin=6, kernel=(2, 1), strides=[2, 2],
                                          use_bias=False),
       _k3("g2", cin=6, kernel=(1, 1), groups=2), _k3("dw", "DepthwiseConv2D", (3, 3), 6, 12,
                                                      padding="same", strides=[2, 1]),
       _k3("gdw", cin=12, out=12, kernel=(2, 1), groups=12, padding="same"),
       _k3("dil", cin=12, out=4, kernel=(3, 3), dilation_rate=[2, 1], padding="same")]
SEQ_INPUT = (2, 9, 8, 4)


def _keras3_legacy(path: Path, model: str, entries: list, top: list[tuple[str, list[str],
                                                                            list]]) -> None:
    """Keras 3's legacy .h5: model_weights/<top layer> with weight_names = the variables' paths
    (``<model>/<layer>/kernel``, no ``:0``) and the datasets at those paths in the group."""
    with h5py.File(path, "w") as h5:
        h5.attrs.update({"backend": "jax", "keras_version": "3.15.1",
                         "model_config": json.dumps(
                             {"class_name": "Sequential" if model == "seq" else "Functional",
                              "config": {"name": model, "layers": entries}})})
        root = h5.create_group("model_weights")
        root.attrs.update({"backend": "jax", "keras_version": "3.15.1",
                           "layer_names": [t[0] for t in top]})
        for group_name, names, arrays in top:
            group = root.create_group(group_name)
            group.attrs["weight_names"] = names if names else np.array([], np.float64)
            for n, a in zip(names, arrays, strict=True):
                group.create_dataset(n, data=a)
        root.create_group("top_level_model_weights").attrs["weight_names"] = np.array(
            [], np.float64)


def _seq_files(tmp_path: Path) -> tuple[Path, Path]:
    entries = [{"class_name": "InputLayer", "config": {"batch_shape": [None, *SEQ_INPUT[1:]],
                                                       "name": "input_layer"}}]
    entries += [e for e, _ in SEQ] + [{"class_name": "Flatten", "config": {"name": "flat"}}]
    top = [(e["config"]["name"], [f"seq/{e['config']['name']}/{v}" for v in
                                  ("kernel", "bias")[:len(w)]], w) for e, w in SEQ]
    _keras3_legacy(tmp_path / "seq.h5", "seq", entries, top + [("flat", [], [])])

    def fill(h5):
        used: dict[str, int] = {}
        for (e, w) in SEQ:
            kind = "conv2d" if e["class_name"] == "Conv2D" else "depthwise_conv2d"
            used[kind] = used.get(kind, -1) + 1
            path = f"layers/{kind}" + (f"_{used[kind]}" if used[kind] else "")
            group = h5.create_group(f"{path}/vars")
            group.attrs["name"] = e["config"]["name"]
            for i, a in enumerate(w):
                group.create_dataset(str(i), data=a)
        h5.create_group("layers/flatten/vars").attrs["name"] = "flat"
        h5.create_group("vars").attrs["name"] = "seq"
    keras_entries = [dict(e, module="keras.layers") for e in entries]
    write_keras(tmp_path / "seq.keras", {"class_name": "Sequential", "config": {
        "name": "seq", "layers": keras_entries}}, fill=fill)
    return tmp_path / "seq.h5", tmp_path / "seq.keras"


@pytest.mark.parametrize("fmt", ["h5", "keras"])
def test_keras3_sequential_saves_import_and_compute_what_keras_defines(tmp_path, fmt):
    path = _seq_files(tmp_path)[0 if fmt == "h5" else 1]
    found = read_keras(str(path))
    assert not found.refused
    assert [la.name for la in found.layers] == [e["config"]["name"] for e, _ in SEQ]
    ops = {la.name: la.op for la in found.layers}
    assert ops == {"c_same": "Conv2D", "c_stride": "Conv2D", "g2": "grouped", "dw": "depthwise",
                   "gdw": "depthwise", "dil": "Conv2D"}
    shape = SEQ_INPUT
    for layer, (entry, w) in zip(found.layers, SEQ, strict=True):
        x = RNG.standard_normal((2, *shape[1:3], layer.in_channels)).astype(np.float32)
        want = reference(x.astype(np.float64), entry, w[0], w[1] if len(w) > 1 else None)
        np.testing.assert_allclose(engine_forward(layer, x), want, rtol=1e-4, atol=1e-4)
        shape = want.shape


def test_a_grouped_conv_with_one_channel_per_group_is_the_depthwise_conv(tmp_path):
    """Keras Conv2D(6, groups=2) on 2 channels: kernel [2, 1, 1, 6]; output channel o is group
    o // 3, exactly TF's depthwise output q * 3 + k of input q."""
    entry, (kernel, bias) = _k3("g", cin=2, out=6, kernel=(2, 1), groups=2)

    def fill(h5):
        keras_vars(h5, kernel=kernel, bias=bias, name="g")
    path = write_keras(tmp_path / "g.keras", model_config(entry), fill=fill)
    (layer,) = read_keras(str(path)).layers
    assert (layer.op, layer.groups, layer.in_channels, layer.out_channels) == (
        "depthwise", 2, 2, 6)
    assert layer.weights.shape == (2, 1, 2, 3)
    x = RNG.standard_normal((1, 5, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(engine_forward(layer, x), reference(x.astype(np.float64), entry,
                                                                   kernel, bias),
                               rtol=1e-5, atol=1e-5)


def test_keras3_functional_with_a_nested_model_in_both_formats(tmp_path):
    inner_c, wc = _k3("inner_c", cin=3, out=4, kernel=(3, 3), padding="same")
    inner_dw, wd = _k3("inner_dw", "DepthwiseConv2D", (2, 3), 4, 4, use_bias=False)
    outer, wo = _k3("outer_c", cin=4, out=2, kernel=(3, 3), strides=[1, 2])
    inner = {"class_name": "Sequential", "name": "inner", "config": {"name": "inner", "layers": [
        {"class_name": "InputLayer", "config": {"batch_shape": [None, 8, 7, 3], "name": "i"}},
        inner_c, inner_dw]}}
    entries = [{"class_name": "InputLayer", "name": "img",
                "config": {"batch_shape": [None, 8, 7, 3], "name": "img"}}, inner, outer]
    _keras3_legacy(tmp_path / "fun.h5", "fun", entries, [
        ("img", [], []),
        ("inner", ["inner/inner_c/kernel", "inner/inner_c/bias", "inner/inner_dw/kernel"],
         [*wc, *wd]),
        ("outer_c", ["outer_c/kernel", "outer_c/bias"], wo)])

    def fill(h5):
        keras_vars(h5, "layers/sequential/layers/conv2d", *wc, name="inner_c")
        keras_vars(h5, "layers/sequential/layers/depthwise_conv2d", wd[0], None, "inner_dw")
        keras_vars(h5, "layers/conv2d", *wo, name="outer_c")
    write_keras(tmp_path / "fun.keras", {"class_name": "Functional", "config": {
        "name": "fun", "layers": entries}}, fill=fill)
    for path in (tmp_path / "fun.h5", tmp_path / "fun.keras"):
        found = read_keras(str(path))
        assert not found.refused, found.refused
        by_name = {la.name: la for la in found.layers}
        assert list(by_name) == ["inner_c", "inner_dw", "outer_c"]
        for name, w in (("inner_c", wc), ("inner_dw", wd), ("outer_c", wo)):
            np.testing.assert_array_equal(by_name[name].weights, w[0])


def test_cli_imports_a_keras3_h5_and_writes_its_weights(tmp_path):
    h5_path, _ = _seq_files(tmp_path)
    proc = gb("import", h5_path, "--layer", "g2", "-o", tmp_path / "g2.gbc.json",
              "--input-size", "4,4")  # Keras 3's .h5 config gives the first layer's input only
    assert proc.returncode == 0, proc.stderr
    canvas = json.loads((tmp_path / "g2.gbc.json").read_text())
    filter_path = next(n["attrs"]["path"] for n in canvas["nodes"] if n["id"] == "filter")
    np.testing.assert_array_equal(np.load(tmp_path / filter_path), SEQ[2][1][0])


def test_keras_itself_agrees(tmp_path):
    """Keras (when installed) saves the models; each conv layer's own output on a fixed input
    is what the imported layer computes."""
    keras = pytest.importorskip("keras")
    layers = keras.layers
    keras.utils.set_random_seed(5)
    seq = keras.Sequential([keras.Input((7, 6, 2)),
                            layers.Conv2D(6, (2, 1), groups=2, padding="same", name="gdw"),
                            layers.Conv2D(6, 3, strides=2, padding="same", name="c"),
                            layers.DepthwiseConv2D(2, depth_multiplier=2, use_bias=False,
                                                   name="dw"),
                            layers.Conv2D(4, 1, groups=2, name="g")])
    rng = np.random.default_rng(6)
    for layer in seq.layers:
        layer.set_weights([rng.standard_normal(w.shape).astype("float32")
                           for w in layer.get_weights()])
    for suffix in (".h5", ".keras"):
        seq.save(tmp_path / f"m{suffix}")
        found = read_keras(str(tmp_path / f"m{suffix}"))
        assert not found.refused
        for ours, theirs in zip(found.layers, seq.layers, strict=True):
            x = rng.standard_normal((2, *theirs.input.shape[1:])).astype(np.float32)
            np.testing.assert_allclose(engine_forward(ours, x), np.asarray(theirs(x)),
                                       rtol=1e-4, atol=1e-4)
