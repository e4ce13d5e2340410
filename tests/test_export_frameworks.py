"""``gradblocks export --to tensorflow|pytorch|jax`` without the frameworks: what the scripts
import, the companion source values, refusals, and the default numpy target."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.cli import commands
from engine.export import frameworks
from engine.export.frameworks import sources_path
from engine.graph.canvas_file import load_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from tests.crosscheck_support import REPO, conventions_canvas

TARGETS = ("tensorflow", "pytorch", "jax")
#: Modules a script may import per target: never GradBlocks's own.
ALLOWED = {"os", "sys", "zipfile", "numpy"}
FRAMEWORK_MODULES = {"tensorflow": {"tensorflow"}, "pytorch": {"torch", "torch.nn.functional"},
                     "jax": {"jax", "jax.numpy"}}
OPS = {"tensorflow": ("tf.raw_ops.Conv2DBackpropFilter", "tf.raw_ops.DepthwiseConv2dNative"),
       "pytorch": ("F.conv2d", "torch.autograd.grad"),
       "jax": ("jax.lax.conv_general_dilated", "jax.vjp")}


def _export(canvas: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "export", str(canvas), "-o",
                           str(script), *args], check=False, capture_output=True, text=True,
                          cwd=REPO)


def _imports(script: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module)
    return names


@pytest.mark.parametrize("target", TARGETS)
def test_export_to_a_framework_writes_a_script_using_its_ops_and_the_exact_source_values(
        tmp_path, target):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    script = tmp_path / f"by {target}.py"
    proc = _export(canvas, script, "--to", target)
    assert proc.returncode == 0, proc.stderr
    text = script.read_text(encoding="utf-8")
    assert _imports(text) == ALLOWED | FRAMEWORK_MODULES[target]  # no engine, no blocks
    for op in OPS[target]:
        assert op in text
    companion = sources_path(script)  # named by its content, beside the script
    assert companion.parent == tmp_path
    assert re.fullmatch(rf"by {target}\.sources\.[0-9a-f]{{12}}\.npz", companion.name)
    assert str(companion) in proc.stdout

    # the companion holds each Tensor block's values bit for bit, in step order
    plan = compile_canvas(load_canvas(canvas), tmp_path)
    result = Executor().run(plan)
    tensors = [s.node_id for s in plan.steps if s.spec.type_id == "Tensor"]
    with np.load(companion, allow_pickle=False) as data:
        assert data.files == [f"s{i}" for i in range(len(tensors))]
        for i, node in enumerate(tensors):
            want = result.outputs[(node, "output")]
            assert data[f"s{i}"].dtype == want.dtype
            assert data[f"s{i}"].tobytes() == want.tobytes()


def test_export_without_to_is_still_the_numpy_script(tmp_path):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    proc = _export(canvas, tmp_path / "s.py")
    assert proc.returncode == 0, proc.stderr
    assert "from engine import kernels" in (tmp_path / "s.py").read_text(encoding="utf-8")
    assert not list(tmp_path.glob("s.sources*"))


def test_unknown_export_target_is_a_usage_error(tmp_path):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    proc = _export(canvas, tmp_path / "s.py", "--to", "mxnet")
    assert proc.returncode == 2
    assert "--to" in proc.stderr and "mxnet" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s.py").exists()


def test_a_block_without_a_translation_is_refused_by_name_with_exit_2(tmp_path, monkeypatch,
                                                                         capsys):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    monkeypatch.delitem(frameworks.EMITTERS, "Transpose")
    status = commands.main(["export", str(canvas), "--to", "jax", "-o", str(tmp_path / "s.py")])
    err = capsys.readouterr().err
    assert status == 2
    assert "block t (Transpose) has no jax translation" in err
    assert not (tmp_path / "s.py").exists()
    assert not list(tmp_path.glob("s.sources*"))


def test_every_block_type_has_a_translation():
    from blocks.registry import REGISTRY

    missing = [t for t, spec in REGISTRY.items() if frameworks._emitter(spec) is None]
    assert missing == []


def test_the_scripts_compare_gives_inf_minus_inf_as_nan_quietly():
    """The exported scripts' Compare helper is a copy of the block's (scripts never import
    GradBlocks): Inf - Inf is NaN in its output, without NumPy's RuntimeWarning, as the block."""
    import warnings

    from engine.export.frameworks import COMMON

    namespace: dict = {}
    exec(compile(COMMON, "<COMMON>", "exec"), namespace)  # noqa: S102 - this module's fixed text
    namespace["_np"] = np.asarray  # what each target's prelude defines (tensor -> NumPy)
    a = np.array([np.inf, 1.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = namespace["_compare"](a, a, "float32", "float32")
    assert np.isnan(got["output"][0]) and got["output"][1] == 0 and not got["agree"]


def test_every_script_prints_its_result_names_the_same_way(tmp_path):
    """The NumPy and the framework scripts print ``name shape dtype`` alike: names unquoted,
    escaped where not printable (issue 34 2.8: the TF/JAX scripts quoted them)."""
    jax = pytest.importorskip("jax")  # noqa: F841 - the framework script runs
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    names = {}
    for target in ("numpy", "jax"):
        script = tmp_path / f"by_{target}.py"  # not numpy.py: it would shadow NumPy
        assert _export(canvas, script, "--to", target).returncode == 0
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              cwd=REPO, check=False, timeout=600)
        assert proc.returncode == 0, proc.stderr
        names[target] = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert names["numpy"] == names["jax"]
    assert names["numpy"] and not any(n[0] in "'\"" for n in names["numpy"])
