"""Write tests/golden/conv3d_cases.json: every geometry TensorFlow's own Conv3D tests use
(tensorflow/python/kernel_tests/nn_ops/conv_ops_3d_test.py), with their expected numbers.

``literal``: the test file's expected output values (TF's inputs: ``(1..N)/N`` ramps), copied
as written. ``tf``: TensorFlow 2.21's float64 CPU results on the same inputs (run this script
with TensorFlow installed to recompute them). Geometries TF's CPU refuses (dilations, which its
test runs only on GPUs) are computed with the undilated CPU op on the zero-stuffed filter,
which is the definition of a dilated conv. Gradient cases (the file's ``ConstructAndTestGradient``
geometries, both gradients each, and the dilated backprop geometries) use the ramps of the test
and a fixed ``out_backprop`` (:func:`out_backprop`).

Run: ``python tests/golden/make_conv3d_cases.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("conv3d_cases.json")

ONES = [0.18518519, 0.22222222, 0.25925926, 0.40740741, 0.5, 0.59259259, 0.62962963,
        0.77777778, 0.92592593, 0.85185185, 1.05555556, 1.25925926, 1.07407407, 1.33333333,
        1.59259259, 1.2962963, 1.61111111, 1.92592593]
F222 = [3.77199074, 3.85069444, 3.92939815, 4.2650463, 4.35763889, 4.45023148, 6.73032407,
        6.89236111, 7.05439815, 7.22337963, 7.39930556, 7.57523148, 9.68865741, 9.93402778,
        10.17939815, 10.18171296, 10.44097222, 10.70023148]
STRIDES = [0.06071429, 0.08988095, 0.10238095, 0.11488095, 0.12738095, 0.13988095, 0.08452381,
           0.26071429, 0.35238095, 0.36488095, 0.37738095, 0.38988095, 0.40238095, 0.23452381,
           0.46071429, 0.61488095, 0.62738095, 0.63988095, 0.65238095, 0.66488095, 0.38452381,
           1.12738095, 1.48988095, 1.50238095, 1.51488095, 1.52738095, 1.53988095, 0.88452381,
           1.32738095, 1.75238095, 1.76488095, 1.77738095, 1.78988095, 1.80238095, 1.03452381,
           1.52738095, 2.01488095, 2.02738095, 2.03988095, 2.05238095, 2.06488095, 1.18452381,
           2.19404762, 2.88988095, 2.90238095, 2.91488095, 2.92738095, 2.93988095, 1.68452381,
           2.39404762, 3.15238095, 3.16488095, 3.17738095, 3.18988095, 3.20238095, 1.83452381,
           2.59404762, 3.41488095, 3.42738095, 3.43988095, 3.45238095, 3.46488095, 1.98452381]
STRIDE3 = [1.51140873, 1.57167659, 1.63194444, 1.56349206, 1.62673611, 1.68998016, 1.6155754,
           1.68179563, 1.74801587, 1.9280754, 2.01215278, 2.09623016, 1.98015873, 2.0672123,
           2.15426587, 2.03224206, 2.12227183, 2.21230159, 4.4280754, 4.65500992, 4.88194444,
           4.48015873, 4.71006944, 4.93998016, 4.53224206, 4.76512897, 4.99801587, 4.84474206,
           5.09548611, 5.34623016, 4.8968254, 5.15054563, 5.40426587, 4.94890873, 5.20560516,
           5.46230159]
F222_S2_SAME = [3.77199074, 3.85069444, 3.92939815, 2.0162037, 2.06597222, 2.11574074,
                9.68865741, 9.93402778, 10.17939815, 4.59953704, 4.73263889, 4.86574074]
SMALL_K = [0.03703704, 0.11111111, 0.25925926, 0.33333333, 0.7037037, 0.77777778, 0.92592593,
           1.0]
SMALL_K3_SAME = [0.54081633, 0.58017493, 0.28061224, 0.81632653, 0.85568513, 0.40306122,
                 0.41873178, 0.4340379, 0.19642857, 2.46938776, 2.50874636, 1.1377551,
                 2.74489796, 2.78425656, 1.26020408, 1.16873178, 1.1840379, 0.51785714,
                 1.09511662, 1.10604956, 0.44642857, 1.17164723, 1.18258017, 0.47704082,
                 0.3691691, 0.37244898, 0.125]
SMALL_K3_VALID = [0.540816, 0.580175, 0.816327, 0.855685, 2.469388, 2.508746, 2.744898,
                  2.784257]

# (TF test, input NDHWC, filter, strides (d, h, w), padding, literal expected or None)
FORWARD = [
    ("testConv3D1x1x1Filter", [1, 2, 3, 1, 3], [1, 1, 1, 3, 3], [1, 1, 1], "VALID", ONES),
    ("testConv3D1x1x1Filter", [1, 2, 1, 3, 3], [1, 1, 1, 3, 3], [1, 1, 1], "VALID", ONES),
    ("testConv3D1x1x1Filter", [1, 1, 2, 3, 3], [1, 1, 1, 3, 3], [1, 1, 1], "VALID", ONES),
    ("testConv3D2x2x2Filter", [1, 4, 2, 3, 3], [2, 2, 2, 3, 3], [1, 1, 1], "VALID", F222),
    ("testConv3DStrides", [1, 5, 8, 7, 1], [1, 2, 3, 1, 1], [2, 3, 1], "SAME", STRIDES),
    ("testConv3D2x2x2FilterStride2", [1, 4, 2, 3, 3], [2, 2, 2, 3, 3], [2, 2, 2], "VALID",
     [3.77199074, 3.85069444, 3.92939815, 9.68865741, 9.93402778, 10.17939815]),
    ("testConv3DStride3", [1, 6, 7, 8, 2], [3, 2, 1, 2, 3], [3, 3, 3], "VALID", STRIDE3),
    ("testConv3D2x2x2FilterStride2Same", [1, 4, 2, 3, 3], [2, 2, 2, 3, 3], [2, 2, 2], "SAME",
     F222_S2_SAME),
    ("testKernelSmallerThanStride", [1, 3, 3, 3, 1], [1, 1, 1, 1, 1], [2, 2, 2], "SAME", SMALL_K),
    ("testKernelSmallerThanStride", [1, 3, 3, 3, 1], [1, 1, 1, 1, 1], [2, 2, 2], "VALID",
     SMALL_K),
    ("testKernelSmallerThanStride", [1, 7, 7, 7, 1], [2, 2, 2, 1, 1], [3, 3, 3], "SAME",
     SMALL_K3_SAME),
    ("testKernelSmallerThanStride", [1, 7, 7, 7, 1], [2, 2, 2, 1, 1], [3, 3, 3], "VALID",
     SMALL_K3_VALID),
    ("testKernelSizeMatchesInputSize", [1, 2, 1, 2, 1], [2, 1, 2, 1, 2], [1, 1, 1], "VALID",
     [1.5625, 1.875]),
    ("testConv3DExpandedBatch", [10, 2, 3, 1, 3], [1, 1, 1, 3, 3], [1, 1, 1], "VALID", None),
]
# (TF test, input, filter, strides, dilations, padding): GPU-only in TF's test
DILATED = [
    ("testConv3D1x1x1Filter2x1x1Dilation", [1, 3, 6, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1],
     [2, 1, 1], "VALID"),
    ("testConv3D2x2x2Filter1x2x1Dilation", [1, 4, 6, 3, 1], [2, 2, 2, 1, 1], [1, 1, 1],
     [1, 2, 1], "VALID"),
    ("testConv3D2x2Depth3ValidBackpropStride1x1Dilation2x1", [1, 3, 6, 1, 1],
     [2, 2, 1, 1, 1], [1, 1, 1], [2, 1, 1], "VALID"),
]
# (TF test, batch, input (d, h, w), filter (d, h, w), in_depth, out_depth, stride, padding)
GRADIENT = [
    ("ValidPaddingStrideOne/input", 2, (3, 5, 4), (3, 3, 3), 2, 3, 1, "VALID"),
    ("ValidPaddingStrideOne/filter", 4, (4, 6, 5), (2, 2, 2), 2, 3, 1, "VALID"),
    ("ValidPaddingStrideTwo/input", 2, (6, 3, 5), (3, 3, 3), 2, 3, 2, "VALID"),
    ("ValidPaddingStrideTwo/filter", 2, (7, 6, 5), (2, 2, 2), 2, 3, 2, "VALID"),
    ("ValidPaddingStrideThree/input", 2, (3, 7, 6), (3, 3, 3), 2, 3, 3, "VALID"),
    ("ValidPaddingStrideThree/filter", 2, (4, 4, 7), (4, 4, 4), 2, 3, 3, "VALID"),
    ("SamePaddingStrideOne/input", 2, (3, 2, 2), (3, 2, 1), 2, 1, 1, "SAME"),
    ("SamePaddingStrideOne/filter", 2, (3, 6, 5), (2, 2, 2), 2, 3, 1, "SAME"),
    ("SamePaddingStrideTwo/input", 2, (6, 3, 4), (3, 3, 3), 2, 3, 2, "SAME"),
    ("SamePaddingStrideTwo/filter", 4, (7, 3, 5), (2, 2, 2), 2, 3, 2, "SAME"),
    ("SamePaddingStrideThree/input", 2, (9, 3, 6), (3, 3, 3), 2, 3, 3, "SAME"),
    ("SamePaddingStrideThree/filter", 2, (9, 4, 7), (4, 4, 4), 2, 3, 3, "SAME"),
    ("SamePaddingDifferentStrides/input", 1, (5, 8, 7), (1, 2, 3), 2, 3, [2, 3, 1], "SAME"),
    ("SamePaddingDifferentStrides/filter (disabled in TF)", 1, (5, 8, 7), (1, 2, 3), 2, 3,
     [2, 3, 1], "SAME"),
    ("KernelSizeMatchesInputSize/filter", 2, (5, 4, 3), (5, 4, 3), 2, 3, 1, "VALID"),
    ("KernelSizeMatchesInputSize/input", 2, (5, 4, 3), (5, 4, 3), 2, 3, 1, "VALID"),
    ("ValidPaddingStrideOneFastPath/input", 2, (3, 5, 4), (2, 2, 2), 8, 2, 1, "VALID"),
    ("ValidPaddingStrideOneFastPath/filter", 2, (4, 6, 5), (2, 2, 2), 8, 2, 1, "VALID"),
]


def ramp(shape, start: int, normalized: bool) -> np.ndarray:
    """TF's test inputs: ``start .. start + size - 1``, divided by the size when normalized."""
    size = int(np.prod(shape))
    v = np.arange(start, start + size, dtype=np.float64)
    return (v / size if normalized else v).reshape(shape)


def out_backprop(shape) -> np.ndarray:
    """The fixed out_backprop of the gradient cases: ``((7 k) mod 11 - 5) / 8``, exact in every
    dtype."""
    k = np.arange(int(np.prod(shape)))
    return (((7 * k) % 11 - 5) / 8.0).reshape(shape)


def stuffed(w: np.ndarray, dil) -> np.ndarray:
    """The filter of a dilated conv as an undilated one (zeros between the taps)."""
    k = w.shape[:3]
    out = np.zeros(tuple((n - 1) * d + 1 for n, d in zip(k, dil)) + w.shape[3:])
    out[::dil[0], ::dil[1], ::dil[2]] = w
    return out


def main() -> None:
    import tensorflow as tf

    r = tf.raw_ops

    def fwd(x, w, st, pad):
        return r.Conv3D(input=x, filter=w, strides=[1, *st, 1], padding=pad).numpy()

    cases = []
    for test, xs, ws, st, pad, lit in FORWARD:
        x, w = ramp(xs, 1, True), ramp(ws, 1, True)
        cases.append({"test": test, "kind": "forward", "input": xs, "filter": ws, "strides": st,
                      "dilations": [1, 1, 1], "padding": pad, "ramp": "normalized",
                      "literal": lit, "tf": fwd(x, w, st, pad).ravel().tolist()})
    for test, xs, ws, st, dil, pad in DILATED:
        x, w = ramp(xs, 1, False), ramp(ws, 1, False)
        ws_big = list(stuffed(w, dil).shape)
        y = fwd(x, stuffed(w, dil), st, pad)
        dy = out_backprop(y.shape)
        dw_big = r.Conv3DBackpropFilterV2(input=x, filter_sizes=ws_big, out_backprop=dy,
                                          strides=[1, *st, 1], padding=pad).numpy()
        dx = r.Conv3DBackpropInputV2(input_sizes=xs, filter=stuffed(w, dil), out_backprop=dy,
                                     strides=[1, *st, 1], padding=pad).numpy()
        dw = dw_big[::dil[0], ::dil[1], ::dil[2]]
        cases.append({"test": test, "kind": "all", "input": xs, "filter": ws, "strides": st,
                      "dilations": dil, "padding": pad, "ramp": "integers", "literal": None,
                      "tf": y.ravel().tolist(), "tf_filter": dw.ravel().tolist(),
                      "tf_input": dx.ravel().tolist()})
    for test, batch, insp, fsp, ind, outd, stride, pad in GRADIENT:
        st = list(stride) if isinstance(stride, list) else [stride] * 3
        xs, ws = [batch, *insp, ind], [*fsp, ind, outd]
        x, w = ramp(xs, 0, True), ramp(ws, 0, True)
        y = fwd(x, w, st, pad)
        dy = out_backprop(y.shape)
        dw = r.Conv3DBackpropFilterV2(input=x, filter_sizes=ws, out_backprop=dy,
                                      strides=[1, *st, 1], padding=pad).numpy()
        dx = r.Conv3DBackpropInputV2(input_sizes=xs, filter=w, out_backprop=dy,
                                     strides=[1, *st, 1], padding=pad).numpy()
        cases.append({"test": "test" + test, "kind": "all", "input": xs, "filter": ws,
                      "strides": st, "dilations": [1, 1, 1], "padding": pad,
                      "ramp": "normalized from 0", "literal": None, "tf": y.ravel().tolist(),
                      "tf_filter": dw.ravel().tolist(), "tf_input": dx.ravel().tolist()})
    doc = {"source": "tensorflow/python/kernel_tests/nn_ops/conv_ops_3d_test.py",
           "tensorflow": tf.__version__, "generator": "tests/golden/make_conv3d_cases.py",
           "empty": {"test": "_TestConv3DEmptyTensorOutputShape", "input": [0, 112, 112, 112, 32],
                     "filter": [3, 3, 3, 32, 64], "padding": "SAME",
                     "output": [0, 112, 112, 112, 64]},
           "refused": [{"test": "testZeroSizedFilterThrowsIllegalArgument",
                        "input": [1, 1, 1, 1, 1], "filter": [1, 1, 0, 1, 1], "padding": "SAME",
                        "argument": "filter"},
                       {"test": "testConv3DExpandedBatch (6-D input to the raw op)",
                        "input": [2, 5, 2, 3, 1, 3], "filter": [1, 1, 1, 3, 3],
                        "padding": "VALID", "argument": "input"}],
           "cases": cases}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()
