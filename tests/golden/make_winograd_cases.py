"""Write winograd_cases.json + winograd_arrays.npz: TensorFlow's 3x3 stride-1 conv ops (the
Winograd path's geometry) on small odd/even sizes, every padding, three dtypes.

Run with a Python that has TensorFlow, from the repository root:
``python tests/golden/make_winograd_cases.py``. ``exact`` and ``bound`` come from the slow
reference (tests/reference.py) in float64; TensorFlow's output must agree within rtol.
"""

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from engine.base.dtypes import RTOL, to_dtype
from tests import reference

HERE = Path(__file__).parent
SHAPES = [((2, 7, 6, 5), (3, 3, 5, 4)), ((1, 4, 9, 3), (3, 3, 3, 6)), ((3, 1, 2, 2), (3, 3, 2, 2))]
PADDINGS = [("SAME", []), ("VALID", []), ("EXPLICIT", [0, 0, 1, 2, 2, 0, 0, 0])]
DTYPES = ["float32", "float64", "float16"]


def main() -> None:
    rng = np.random.default_rng(12)
    cases, arrays = [], {}
    for x_shape, w_shape in SHAPES:
        for padding, pads in PADDINGS:
            for dtype in DTYPES:
                dt = to_dtype(dtype)
                attrs = {"strides": [1, 1, 1, 1], "padding": padding, "data_format": "NHWC",
                         "dilations": [1, 1, 1, 1]}
                if pads:
                    attrs["explicit_paddings"] = pads
                g = reference.geometry(x_shape, w_shape, **attrs)
                if g.out_rows <= 0 or g.out_cols <= 0:
                    continue
                x = rng.standard_normal(x_shape).astype(dt).astype(np.float64)
                w = rng.standard_normal(w_shape).astype(dt).astype(np.float64)
                dy = rng.standard_normal(g.output_shape).astype(dt).astype(np.float64)
                for op in ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"):
                    cid = f"w{len(cases):03d}"
                    if op == "Conv2D":
                        inputs = {"input": x, "filter": w}
                        exact, bound = reference.conv2d(x, w, g), reference.conv2d(abs(x), abs(w), g)
                    elif op == "Conv2DBackpropFilter":
                        inputs = {"input": x, "filter_sizes": list(w_shape), "out_backprop": dy}
                        exact = reference.backprop_filter(x, dy, g)
                        bound = reference.backprop_filter(abs(x), abs(dy), g)
                    else:
                        inputs = {"input_sizes": list(x_shape), "filter": w, "out_backprop": dy}
                        exact = reference.backprop_input(w, dy, g)
                        bound = reference.backprop_input(abs(w), abs(dy), g)
                    tf_args = {k: (tf.constant(v.astype(dt)) if isinstance(v, np.ndarray)
                                   else tf.constant(v, tf.int32)) for k, v in inputs.items()}
                    expected = getattr(tf.raw_ops, op)(**tf_args, **attrs).numpy()
                    err = np.abs(expected.astype(np.float64) - exact)
                    assert np.all(err <= RTOL[dtype] * bound + 1e-30), (cid, op, dtype)
                    case_inputs = {}
                    for name, value in inputs.items():
                        if isinstance(value, np.ndarray):
                            arrays[f"{cid}.{name}"] = value
                            case_inputs[name] = f"{cid}.{name}"
                        else:
                            case_inputs[name] = value
                    arrays[f"{cid}.expected"] = expected.astype(np.float64)
                    arrays[f"{cid}.exact"], arrays[f"{cid}.bound"] = exact, bound
                    cases.append({"id": cid, "op": op, "dtype": dtype, "attrs": attrs,
                                  "inputs": case_inputs, "rtol": RTOL[dtype]})
    (HERE / "winograd_cases.json").write_text(json.dumps({"cases": cases}, indent=1) + "\n")
    np.savez_compressed(HERE / "winograd_arrays.npz", **arrays)
    print(f"{len(cases)} cases")


if __name__ == "__main__":
    main()
