"""``gradblocks import MODEL --all -o DIR`` run as a user runs it: index.json, every canvas
accepted by ``gradblocks check``, skipped layers with their reasons, the folders refused;
``--list`` lines agree with what imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import keras_files as kf

ROOT = Path(__file__).parents[1]


def gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          check=False, capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("all")
    config = kf.model_config(keras2=True)
    config["config"]["layers"][3]["class_name"] = "Lambda"  # bn: the walk cannot pass it
    return {"keras": kf.write_keras(folder / "m.keras"), "h5": kf.write_h5(folder / "m.h5"),
            "lambda": kf.write_h5(folder / "lambda.h5", config)}


def test_all_writes_a_canvas_per_layer_and_the_index(models, tmp_path):
    out = tmp_path / "new" / "dir"
    proc = gb("import", models["keras"], "--all", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (f"wrote 6 canvases and {out}/index.json (0 conv "
                                            "layers skipped)")
    index = json.loads((out / "index.json").read_text())
    assert [item["layer"] for item in index] == ["c1", "dw", "c2", "sep", "tconv",
                                                  "tconv_valid"]
    assert index[0] == {"layer": "c1", "op": "Conv2D", "input_shape": [1, 10, 10, 3],
                        "output_shape": [1, 4, 4, 4],
                        "attrs": {"strides": [1, 2, 2, 1], "dilations": [1, 1, 1, 1],
                                  "padding": "VALID", "data_format": "NHWC"},
                        "canvas": "c1.gbc.json"}
    assert (index[3]["canvas"], index[3]["op"], index[3]["input_shape"],
            index[3]["output_shape"]) == ("sep.gbc.json", "separable", [1, 3, 3, 16],
                                          [1, 2, 2, 5])
    assert (index[4]["op"], index[4]["input_shape"], index[4]["output_shape"]) == (
        "transposed", [1, 2, 2, 5], [1, 4, 4, 3])
    for item in index:
        check = gb("check", out / item["canvas"])
        assert check.returncode == 0, (item, check.stdout, check.stderr)
    # a second run over its own set is allowed and leaves the same index
    again = gb("import", models["keras"], "--all", "-o", out)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "index.json").read_text()) == index
    arrays = sorted(p.name for p in out.glob("*.npy"))
    assert len(arrays) == 10  # 7 filters (sep has 2), 3 biases (c1, sep, tconv): no more


def test_skipped_layers_say_why_in_the_index_and_the_output(models, tmp_path):
    proc = gb("import", models["lambda"], "--all", "-o", tmp_path / "d")
    assert proc.returncode == 0, proc.stderr
    index = json.loads((tmp_path / "d" / "index.json").read_text())
    assert "canvas" in index[0] and index[0]["layer"] == "c1"
    skipped = index[1]
    assert skipped == {"layer": "dw", "op": "depthwise", "skipped": (
        "layer 'dw': the model does not say its input size (the walk stopped at layer 'bn' "
        "('Lambda'): its type 'Lambda' is not one whose output shape the import computes): "
        "give --input-size H,W or --input FILE.npy")}
    assert all("skipped" in item for item in index[1:])
    assert f"skipped: {skipped['skipped']}" in proc.stdout.splitlines()


@pytest.mark.parametrize("what", ["file", "fifo", "user file", "user array"])
def test_a_folder_that_is_not_one_or_holds_the_users_files_is_refused(models, tmp_path, what):
    out = tmp_path / "d"
    if what == "file":
        out.write_text("mine")
    elif what == "fifo":
        os.mkfifo(out)
    else:
        out.mkdir()
        (out / ("c1.gbc.json" if what == "user file" else "dw.filter.npy")).write_text("mine")
    proc = gb("import", models["h5"], "--all", "-o", out)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    reason = {"file": "is a file, not a folder", "fifo": "is a FIFO, not a folder"}.get(
        what, "a file no earlier `import --all` wrote")
    assert reason in proc.stderr
    if what.startswith("user"):
        assert sorted(p.name for p in out.iterdir()) in (["c1.gbc.json"], ["dw.filter.npy"])


def test_all_needs_a_folder_and_no_input(models):
    for extra in ([], ["-o", "x", "--input", "x.npy"]):
        proc = gb("import", models["h5"], "--all", *extra)
        assert proc.returncode == 2 and "import --all needs -o DIR" in proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_all_input_size_is_for_the_layers_the_model_gives_no_size(models, tmp_path):
    """c1's size is the model's (10x10); the layers after the Lambda take --input-size."""
    out = tmp_path / "d"
    proc = gb("import", models["lambda"], "--all", "-o", out, "--input-size", "6,6")
    assert proc.returncode == 0, proc.stderr
    index = json.loads((out / "index.json").read_text())
    assert [i["layer"] for i in index if "canvas" in i] == [
        "c1", "dw", "c2", "sep", "tconv", "tconv_valid"], index
    assert index[0]["input_shape"] == [1, 10, 10, 3]
    assert index[1]["input_shape"][1:3] == [6, 6]
    for item in index:
        check = gb("check", out / item["canvas"])
        assert check.returncode == 0, (item, check.stdout, check.stderr)


def test_list_shows_what_imports_and_why_the_rest_does_not(models, tmp_path):
    proc = gb("import", models["lambda"], "--list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split()[:2] == ["c1", "Conv2D"]
    # a layer whose size the walk cannot find is listed (it imports with --input-size)
    assert [line.split()[0] for line in lines[1:7]] == [
        "c1", "dw", "c2", "sep", "tconv", "tconv_valid"]
    listed = gb("import", models["h5"], "--list").stdout.splitlines()
    for line in listed[1:]:
        name = line.split()[0]
        done = gb("import", models["h5"], "--layer", name, "-o", tmp_path / "c.gbc.json")
        assert done.returncode == 0, (name, done.stderr)
