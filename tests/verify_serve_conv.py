"""A ``--cmd-serve`` command for the tests and the bench (NumPy only, so it starts fast): answers
each ``IN OUT`` line on stdin with tf ``Conv2D`` (the tap loop below, independent of
engine.kernels) and ``unsupported`` for any other op. Its mode (the first argument) makes it
misbehave once: on the third request answered by any process started with the same STATE
file (the second argument, counting the requests)

- ``crash``: dies of SIGSEGV; ``hang``: sleeps; ``garbage``: prints a line that is no answer;

and in mode ``child`` it starts a ``sleep`` child (its pid appended to STATE) and is correct.
``correct`` (the default) is always correct.
"""

import os
import signal
import subprocess
import sys
import time

import numpy as np


def conv2d(input, filter, strides, padding, data_format, dilations, explicit_paddings=()):
    nhwc = data_format == "NHWC"
    x = input if nhwc else input.transpose(0, 2, 3, 1)
    (s0, s1), (d0, d1) = (strides[1:3], dilations[1:3]) if nhwc else (strides[2:], dilations[2:])
    n, h, w, c = x.shape
    kh, kw, fin, fout = filter.shape
    pads, outs = [], []
    for i, (size, k, s, d) in enumerate(((h, kh, s0, d0), (w, kw, s1, d1))):
        span = d * (k - 1) + 1
        if padding == "SAME":
            total = max((-(-size // s) - 1) * s + span - size, 0)
            lo, hi = total // 2, total - total // 2
        elif padding == "VALID":
            lo = hi = 0
        else:
            lo, hi = explicit_paddings[(2 if nhwc else 4) + 2 * i:][:2]
        pads.append((lo, hi))
        outs.append(max((size + lo + hi - span) // s + 1, 0))
    oh, ow = outs
    y = np.zeros((n, oh, ow, fout))
    groups = c // fin if fin else 1
    per = fout // groups
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    for i in range(kh if oh and ow else 0):
        for j in range(kw):
            patch = xp[:, i * d0: i * d0 + s0 * (oh - 1) + 1: s0,
                       j * d1: j * d1 + s1 * (ow - 1) + 1: s1]
            for g in range(groups):
                y[..., g * per:(g + 1) * per] += (patch[..., g * fin:(g + 1) * fin]
                                                  @ filter[i, j, :, g * per:(g + 1) * per])
    return y if nhwc else y.transpose(0, 3, 1, 2)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "correct"
    state = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode == "child":
        with open(state, "a") as f:
            f.write(f"{subprocess.Popen(['sleep', '1000']).pid}\n")
    for line in sys.stdin:
        src, dst = line.split()
        misbehave = False
        if mode in ("crash", "hang", "garbage"):
            with open(state, "a+") as f:
                f.write("request\n")
                f.seek(0)
                misbehave = len(f.readlines()) == 3
        args = {name[:-4]: np.load(os.path.join(src, name)) for name in os.listdir(src)}
        if str(args["op"]) != "Conv2D":
            print(f"unsupported this script computes Conv2D, not {args['op']}", flush=True)
            continue
        if misbehave:
            if mode == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            if mode == "hang":
                time.sleep(1000)
            print("hello there", flush=True)
            continue
        kwargs = {k: (str(args[k]) if args[k].dtype.kind == "U" else args[k].tolist())
                  for k in ("strides", "padding", "data_format", "dilations",
                            "explicit_paddings") if k in args}
        np.save(dst, conv2d(args["input"], args["filter"], **kwargs))
        print("ok", flush=True)


if __name__ == "__main__":
    main()
