"""Small 1-D and 3-D ONNX models for the import tests (built with onnx.helper, as
tests/model_files.py builds its 2-D one) and float64 references written with JAX: ONNX Conv by
``lax.conv_general_dilated`` (NC... data, [M, C / group, k...] weights, explicit pads), ONNX
ConvTranspose as the input gradient (``jax.vjp``) of the conv that maps its output to its input,
and every gradient by ``jax.vjp`` of those. The pads of a ConvTranspose come from the ONNX spec's
formula here, not from the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parents[1]
#: float32 canvas against a float64 or float32 reference: the largest error relative to the
#: largest value (at least 1); sums of at most a few hundred products of N(0, 1) values.
TOL = 1e-4


def gb(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``gradblocks ARGS`` as a user runs it (a subprocess)."""
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def close(got: np.ndarray, want: np.ndarray) -> float:
    """The largest error relative to the largest value (at least 1)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(1.0, np.max(np.abs(want))))


def write_onnx(path: Path, nodes: list[tuple], inputs: dict[str, list[int]], seed: int = 5
               ) -> dict[str, dict]:
    """A model of ``nodes`` (name, op, input name, weights [shape] or ("const", shape), bias
    size or None, attributes), each output a graph output; returns name -> its weights, bias
    and attributes (float32)."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(seed)
    graph_nodes, inits, outputs, made = [], [], [], {}
    for name, op, x, wspec, bias, attrs in nodes:
        const = isinstance(wspec, tuple) and wspec[0] == "const"
        shape = wspec[1] if const else wspec
        w = rng.standard_normal(shape).astype(np.float32)
        if const:  # a constant subgraph: Constant -> Identity
            graph_nodes.append(helper.make_node(
                "Constant", [], [f"{name}_Wc"], value=numpy_helper.from_array(w, f"{name}_Wv")))
            graph_nodes.append(helper.make_node("Identity", [f"{name}_Wc"], [f"{name}_W"]))
        else:
            inits.append(numpy_helper.from_array(w, f"{name}_W"))
        ins = [x, f"{name}_W"]
        b = None
        if bias:
            b = rng.standard_normal(bias).astype(np.float32)
            inits.append(numpy_helper.from_array(b, f"{name}_B"))
            ins.append(f"{name}_B")
        graph_nodes.append(helper.make_node(op, ins, [f"{name}_Y"], name=name, **attrs))
        outputs.append(helper.make_tensor_value_info(f"{name}_Y", TensorProto.FLOAT, None))
        made[name] = {"op": op, "w": w, "b": b, "attrs": attrs, "x": x}
    graph = helper.make_graph(
        graph_nodes, "nd", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v)
                            for k, v in inputs.items()], outputs, initializer=inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return made


def ort_outputs(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every graph output of the model run by ONNX Runtime (float32), by output name."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    given = {i.name for i in sess.get_inputs()}
    return dict(zip(names, sess.run(names, {k: v for k, v in feeds.items() if k in given}),
                    strict=True))


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def conv_pads(node: dict, sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    """(begin, end) per axis of an ONNX Conv on ``sizes``, by the ONNX spec."""
    a, k = node["attrs"], node["w"].shape[2:]
    rank = len(k)
    s, d = a.get("strides", [1] * rank), a.get("dilations", [1] * rank)
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for n, kn, sn, dn in zip(sizes, k, s, d, strict=True):
            total = max(0, (-(-n // sn) - 1) * sn + (kn - 1) * dn + 1 - n)
            small = total // 2
            out.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return out
    if auto == "VALID":
        return [(0, 0)] * rank
    p = a.get("pads", [0] * 2 * rank)
    return [(p[i], p[rank + i]) for i in range(rank)]


def transpose_geometry(node: dict, sizes: tuple[int, ...]) -> tuple[list, list]:
    """(output sizes, (begin, end) pads per axis) of an ONNX ConvTranspose on ``sizes``, by the
    ONNX spec (output_shape and auto_pad included)."""
    a, k = node["attrs"], node["w"].shape[2:]
    rank = len(k)
    s, d = a.get("strides", [1] * rank), a.get("dilations", [1] * rank)
    op = a.get("output_padding", [0] * rank)
    auto = a.get("auto_pad", "NOTSET")
    outs, pads = [], []
    for i, (n, kn, sn, dn) in enumerate(zip(sizes, k, s, d, strict=True)):
        full = sn * (n - 1) + op[i] + (kn - 1) * dn + 1
        if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
            out = a["output_shape"][i] if "output_shape" in a else n * sn
            total = full - out
            begin = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads.append((begin, total - begin))
            outs.append(out)
        else:
            p = a.get("pads", [0] * 2 * rank)
            pads.append((p[i], p[rank + i]))
            outs.append(full - p[i] - p[rank + i])
    return outs, pads


def reference(node: dict, x: np.ndarray, w: np.ndarray, dy: np.ndarray) -> dict[str, np.ndarray]:
    """The float64 forward (bias excluded) and the gradients w.r.t. the input and the ONNX
    weights of ``node`` on ``x`` (NC...), by JAX."""
    jax = _jax()
    from jax import lax

    a, rank = node["attrs"], w.ndim - 2
    s, d = a.get("strides", [1] * rank), a.get("dilations", [1] * rank)
    group = a.get("group", 1)

    def conv(v, k, pads):
        return lax.conv_general_dilated(v, k, s, pads, rhs_dilation=d,
                                        feature_group_count=group)

    sizes = tuple(x.shape[2:])
    if node["op"] == "Conv":
        pads = conv_pads(node, sizes)

        def f(v, k):
            return conv(v, k, pads)
    else:
        outs, pads = transpose_geometry(node, sizes)
        y_shape = (x.shape[0], w.shape[1] * group, *outs)

        def f(v, k):  # the input gradient of the conv mapping Y to X
            _, back = jax.vjp(lambda y: conv(y, k, pads), np.zeros(y_shape))
            return back(v)[0]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    y, vjp = jax.vjp(f, x64, w64)
    gx, gw = vjp(dy.astype(np.float64))
    return {"forward": np.asarray(y), "grad_input": np.asarray(gx), "grad_filter": np.asarray(gw)}


def tf_filter(gw: np.ndarray, node: dict, depthwise: bool) -> np.ndarray:
    """A gradient w.r.t. ONNX weights ([M, C / g, k...], or [C, M / g, k...] transposed) in the
    canvas filter's layout: [k..., C / g, M] (DHWIO / HWIO; 1-D weights as height 1), depthwise
    [1, k, C, M / C], transposed [k..., M / g, C]."""
    if gw.ndim == 3:  # 1-D: height 1
        gw = gw[:, :, None, :]
    rank = gw.ndim - 2
    if depthwise:
        m, _, kh, kw = gw.shape
        c = node["attrs"]["group"]
        return gw.reshape(c, m // c, kh, kw).transpose(2, 3, 0, 1)
    return gw.transpose(*range(2, rank + 2), 1, 0)


def all_canvases(model: Path, out: Path) -> tuple[str, list[dict]]:
    """``--list`` output and ``--all`` index of ``model`` (both as subprocesses)."""
    listed = gb("import", model, "--list")
    assert listed.returncode == 0, listed.stderr
    done = gb("import", model, "--all", "-o", out)
    assert done.returncode == 0, done.stderr
    return listed.stdout, json.loads((out / "index.json").read_text())


def run_canvas(canvas: Path) -> dict[str, np.ndarray]:
    """The canvas run headless in-process (engine.api): every output by node id."""
    from engine import api
    from engine.graph.canvas_file import load_canvas

    results = api.load(canvas).run()
    return {k: np.asarray(results[k]) for k in load_canvas(canvas).nodes if k in results}


def run_cli(canvas: Path) -> dict[str, np.ndarray]:
    """The canvas run with ``gradblocks run --out`` (a subprocess): every output by node id."""
    out = canvas.with_suffix(".npz")
    proc = gb("run", canvas, "--out", out)
    assert proc.returncode == 0, proc.stderr
    titles = {n["id"]: n["title"] for n in json.loads(canvas.read_text())["nodes"]}
    with np.load(out) as z:
        return {node: z[title] for node, title in titles.items() if title in z}
