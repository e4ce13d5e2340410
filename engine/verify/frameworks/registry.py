"""The frameworks a sweep can target by name, without importing any of them.

Each :class:`Framework` gives the module that tells whether it is installed, the pip line that
installs it, its adapter module (one function per tf.raw_ops op, named after it) and the
``--support`` SPEC of what it documents as unsupported, which is combined with the user's.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown
from engine.shapes.ops import CONV_OPS
from engine.verify.defaults import TF_OP_NAMES

#: The package every adapter module sits in.
ADAPTERS = "engine.verify.frameworks"

_ONNX_OPS = ("Conv2D", "Conv2DBackpropInput", "DepthwiseConv2dNative",
             "DepthwiseConv2dNativeBackpropInput")


@dataclass(frozen=True)
class Framework:
    """A framework verified under the tf convention through ``adapter``."""

    name: str
    module: str  # importable exactly when the framework is installed
    install: str
    adapter: str  # module name in ADAPTERS
    ops: tuple[str, ...]
    support: str  # what the framework documents it refuses, as a --support SPEC
    how: str  # what the adapter calls, for the one-line refusal of a missing op
    op_support: tuple[tuple[str, str], ...] = ()  # (op, SPEC) for one op, added to support

    def spec(self, op: str) -> str:
        """The SPEC the framework documents for ``op``."""
        return " ".join([self.support, *(s for o, s in self.op_support if o == op)]).strip()


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    # TF's CPU kernels: "only supports NHWC" (Conv2D, both custom backprops, depthwise); the
    # conv backprops: "Current CPU implementations do not yet support dilation rates larger
    # than 1", "Gradients for grouped convolutions are not supported on CPU"; the depthwise
    # trio: "Current implementation only supports equal length strides in the row and column
    # dimensions"; Conv3D and its gradients: "in_channels must match between input and filter"
    # (no groups; CPU: NDHWC only, as layouts=NHWC says for every rank)
    Framework("tensorflow", "tensorflow", "pip install tensorflow-cpu", "tensorflow_ops",
              TF_OP_NAMES, "layouts=NHWC", "tf.raw_ops",
              (*((op, "dilations=1 groups=1") for op in ("Conv2DBackpropFilter",
                                                         "Conv2DBackpropInput")),
               *((op, "equal_strides") for op in TF_OP_NAMES if op.startswith("Depthwise")),
               *((op.name, "groups=1") for op in CONV_OPS if op.rank == 3))),
    Framework("jax", "jax", "pip install jax", "jax_ops", TF_OP_NAMES, "",
              "jax.lax.conv_general_dilated and jax.vjp"),
    # ONNX Conv and ConvTranspose take NCHW tensors only
    Framework("onnxruntime", "onnxruntime", "pip install onnxruntime", "onnxruntime_ops",
              _ONNX_OPS, "layouts=NCHW", "ONNX Conv and ConvTranspose"),
    Framework("onnx.reference", "onnx", "pip install onnx", "onnx_reference_ops", _ONNX_OPS,
              "layouts=NCHW", "ONNX Conv and ConvTranspose"),
)}


def installed(name: str) -> bool:
    """Whether framework ``name``'s package can be found (it is not imported)."""
    return importlib.util.find_spec(FRAMEWORKS[name].module) is not None


def combined_support(framework: Framework, op: str, user: str | None) -> str:
    """The user's SPEC narrowed by the framework's: number tokens of both apply; a word (e.g.
    ``layouts``) keeps the values both allow, and none left is an error naming both."""
    from engine.verify.support import WORDS, parse_support  # the kernels: for a sweep only

    spec = framework.spec(op)
    mine, theirs = parse_support(spec), parse_support(user)
    tokens = [t for t in (user or "").split() if t.split("=")[0].rstrip("<>") not in WORDS]
    tokens += [t for t in spec.split() if t.split("=")[0].rstrip("<>") not in WORDS]
    for word in WORDS:
        if word not in mine.words and word not in theirs.words:
            continue
        allowed = [v for v in WORDS[word] if v in mine.words.get(word, WORDS[word])
                   and v in theirs.words.get(word, WORDS[word])]
        if not allowed:
            raise InvalidArgumentError(
                f"--support {word}={','.join(sorted(theirs.words[word]))}: {framework.name} "
                f"supports {word}={','.join(sorted(mine.words[word]))} only", "support")
        tokens.append(f"{word}={','.join(allowed)}")
    return " ".join(tokens)


def resolve(name: str, op: str, convention: str, support: str | None) -> tuple[str, str]:
    """The adapter's ``MODULE:FUNCTION`` for ``op`` and the combined SPEC; a framework that is
    not installed, an op it lacks or another convention is an :class:`InvalidArgumentError`."""
    f = FRAMEWORKS[name]
    if convention != "tf":
        raise InvalidArgumentError(f"{name} is verified under the tf convention (its "
                                   f"adapters take tf.raw_ops arguments), not {shown(convention)}",
                                   "convention")
    if op not in f.ops:
        raise InvalidArgumentError(f"{name} has no {op} ({f.how}: {', '.join(f.ops)})", "op")
    if not installed(name):
        raise InvalidArgumentError(f"{name} is not installed ({f.install})", "target")
    return f"{ADAPTERS}.{f.adapter}:{op}", combined_support(f, op, support)
