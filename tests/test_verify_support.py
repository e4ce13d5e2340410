"""``--support``: every token parsed (and every bad one named in one line), each declaration's
test on hand-computed geometries, every case the catalogue, the random search and the shrinker
make satisfying it (a property over seeds, ops and declarations, checked against TensorFlow's
padding rules written out here), the catalogue classes a declaration excludes, and sweeps of
targets that refuse what they document: 0 failures once declared."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import api
from engine.base.errors import InvalidArgumentError
from engine.verify import cases
from engine.verify.conventions import Geometry, shapes, shapes_nd
from engine.verify.defaults import OPS
from engine.verify.shrink import shrink
from engine.verify.support import parse_support
from engine.verify.values import call
from tests import verify_zoo as zoo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
G = Geometry(batch=1, height=5, width=5, channels=1, kernel=(3, 3), out_channels=1)


def allows(spec: str, g: Geometry) -> bool:
    return parse_support(spec).allows(g, shapes(g))


# -- TensorFlow's padding and output sizes, written out (the reference of the property test) ----
def pads_of(g: Geometry) -> tuple[int, ...]:
    if g.padding == "EXPLICIT":
        return g.pads
    if g.padding == "VALID":
        return (0, 0) * g.rank
    out: list[int] = []
    for size, k, d, s in zip(g.sizes, g.kernel, g.dilations, g.strides):
        total = max((-(-size // s) - 1) * s + d * (k - 1) + 1 - size, 0)
        out += [total // 2, total - total // 2]
    return tuple(out)


def dims(g: Geometry):
    """Per dimension (size, pad before, pad after, kernel, stride, dilation)."""
    p = pads_of(g)
    return tuple((n, p[2 * i], p[2 * i + 1], g.kernel[i], g.strides[i], g.dilations[i])
                 for i, n in enumerate(g.sizes))


def holds(token: str, g: Geometry) -> bool:
    """Whether ``g`` satisfies the declaration ``token``, from the definitions in the guide."""
    if token == "equal_strides":
        return len(set(g.strides)) == 1
    if token == "no_strided_dilation":
        return not (max(g.strides) > 1 and max(g.dilations) > 1)
    if token == "nonempty":
        return min(g.batch, g.channels, g.out_channels) > 0 and all(
            (n + a + b - d * (k - 1) - 1) // s + 1 > 0 for n, a, b, k, s, d in dims(g))
    if token == "no_remainder":
        return all((n + a + b - d * (k - 1) - 1) % s == 0 for n, a, b, k, s, d in dims(g))
    assert token == "padding=valid,same"
    valid = not any(pads_of(g))
    same = max(g.strides) == 1 and all(
        (a, b) == (d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
        for n, a, b, k, s, d in dims(g))
    return valid or same


# -- parsing ------------------------------------------------------------------------------------
def test_every_token_parses_and_the_text_is_kept():
    text = ("strides<=2 dilations=1,2 groups>=1 multiplier<3 kernel>0 batch=1,2 pads<=4 "
            "layouts=NHWC dtypes=float32,float64 padding=SAME,valid,same equal_strides "
            "no_strided_dilation nonempty no_remainder")
    s = parse_support(text)
    assert s.text == text
    assert [name for name, _ in s.numbers] == ["strides", "dilations", "groups", "multiplier",
                                               "kernel", "batch", "pads"]
    assert s.words == {"layouts": {"NHWC"}, "dtypes": {"float32", "float64"},
                       "padding": {"SAME", "valid", "same"}}
    assert s.flags == {"equal_strides", "no_strided_dilation", "nonempty", "no_remainder"}
    assert s.dtypes(["float16", "float64", "float32"]) == ["float64", "float32"]
    assert parse_support(None).text == "" and parse_support("  ").flags == set()


@pytest.mark.parametrize(("spec", "g", "allowed"), [
    ("equal_strides", G.with_(strides=(2, 2)), True),
    ("equal_strides", G.with_(strides=(1, 2)), False),
    ("no_strided_dilation", G.with_(strides=(2, 1)), True),
    ("no_strided_dilation", G.with_(dilations=(2, 2), height=9, width=9), True),
    ("no_strided_dilation", G.with_(strides=(2, 1), dilations=(1, 2), width=9), False),
    ("nonempty", G, True),
    ("nonempty", G.with_(batch=0), False),
    ("nonempty", G.with_(out_channels=0), False),
    ("nonempty", G.with_(height=2), False),  # VALID, kernel 3: no output row
    ("no_remainder", G.with_(strides=(2, 2)), True),  # (5 - 2 - 1) mod 2 = 0
    ("no_remainder", G.with_(strides=(2, 2), width=6), False),  # (6 - 3) mod 2 = 1
    ("no_remainder", G.with_(strides=(3, 3), padding="SAME"), True),  # SAME pads 5 to 6
    ("no_remainder", G.with_(strides=(2, 2), padding="EXPLICIT", pads=(1, 0, 0, 0)), False),
    ("padding=valid", G, True),
    ("padding=valid", G.with_(padding="EXPLICIT"), True),  # every pad 0
    ("padding=valid", G.with_(padding="SAME", kernel=(1, 1)), True),  # SAME pads nothing
    ("padding=valid", G.with_(padding="SAME"), False),
    ("padding=same", G.with_(padding="SAME"), True),
    ("padding=same", G.with_(padding="EXPLICIT", pads=(1, 1, 1, 1)), True),
    ("padding=same", G.with_(padding="SAME", strides=(2, 2)), False),  # torch: stride 1 only
    ("padding=same", G.with_(padding="SAME", kernel=(2, 2)), True),  # 0 before, 1 after
    ("padding=same", G.with_(padding="EXPLICIT", pads=(1, 0, 1, 0), kernel=(2, 2)), False),
    ("padding=same", G.with_(padding="SAME", dilations=(2, 1)), True),  # any dilation
    ("padding=same", G, False),
    ("padding=SAME,valid", G, True),  # any word listed
    ("padding=SAME", G, False),
    ("equal_strides no_remainder", G.with_(strides=(2, 2), width=6), False),
    ("equal_strides strides<=1", G.with_(strides=(2, 2)), False),
])
def test_each_declaration_on_a_geometry(spec, g, allowed):
    assert allows(spec, g) is allowed
    if spec in TOKENS:  # the property test's reference agrees
        assert holds(spec, g) is allowed


@pytest.mark.parametrize(("token", "message"), [
    ("equal_strides=1", ("'equal_strides=1': equal_strides is a flag: give it alone, without = "
                        "and a value")),
    ("nonempty<=2", "'nonempty<=2': nonempty is a flag: give it alone, without <= and a value"),
    ("nonzero", ("'nonzero': unknown flag (one of equal_strides, no_strided_dilation, nonempty, "
                "no_remainder)")),
    ("strides", "'strides': strides needs a comparison, e.g. strides<=2 or strides=1,2"),
    ("padding", ("'padding': padding needs = and a comma list of SAME, VALID, EXPLICIT, valid, "
                "same")),
    ("padding=Same", ("'padding=Same': padding takes = and a comma list of SAME, VALID, EXPLICIT, "
                     "valid, same")),
    ("padding<=same", ("'padding<=same': padding takes = and a comma list of SAME, VALID, "
                      "EXPLICIT, valid, same")),
    ("strides<<2", "'strides<<2': strides takes whole numbers"),
    ("strides<=1,2", "'strides<=1,2': <= takes one number"),
    ("colour=red", ("'colour=red': unknown name 'colour' (one of strides, dilations, groups, "
                   "multiplier, kernel, batch, pads, layouts, dtypes, padding; flags: "
                   "equal_strides, no_strided_dilation, nonempty, no_remainder)")),
    ("Strides<=2", ("'Strides<=2': expected NAME=VALUES, NAME<=N or a flag (e.g. strides<=2, "
                   "padding=SAME,VALID, equal_strides)")),
    ("strides=", ("'strides=': expected NAME=VALUES, NAME<=N or a flag (e.g. strides<=2, "
                 "padding=SAME,VALID, equal_strides)")),
])
def test_each_bad_token_is_one_line_naming_it(token, message):
    with pytest.raises(InvalidArgumentError) as err:
        parse_support(f"strides<=2 {token} nonempty")
    assert str(err.value) == f"--support token {message}"
    assert err.value.argument == "support"


def test_a_bad_token_on_the_command_line_exits_2_with_one_line():
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-m", "engine.cli", "verify", "verify_zoo:loops_conv2d",
                        "--op", "Conv2D", "--convention", "tf", "--support",
                        "nonempty equal_strides=1"],
                       capture_output=True, text=True, check=False, timeout=300,
                       cwd=os.path.join(ROOT, "tests"), env=env)
    assert p.returncode == 2
    assert p.stderr == ("gradblocks: verify: --support token 'equal_strides=1': equal_strides "
                        "is a flag: give it alone, without = and a value\n")
    assert p.stdout == ""


# -- what is generated ----------------------------------------------------------------------
TOKENS = ("equal_strides", "no_strided_dilation", "nonempty", "no_remainder",
          "padding=valid,same")
PAIRS = [(c, op) for c in ("tf", "torch") for op in OPS[c]]
_PARSED: dict[str, object] = {}


def _support(spec: str):
    """One Support per spec: excluded_classes is cached per Support."""
    return _PARSED.setdefault(spec, parse_support(spec))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), pair=st.sampled_from(PAIRS),
       tokens=st.sets(st.sampled_from(TOKENS), min_size=1))
def test_every_generated_and_shrunk_case_satisfies_the_declaration(seed, pair, tokens):
    convention, op = pair
    spec = " ".join(sorted(tokens))
    support = _support(spec)
    made = list(cases.generate(op, convention, ["float32"], 45, seed, support))
    assert len(made) == 45  # the search does not give up
    excluded = cases.excluded_classes(op, convention, support)
    assert not {c.edge for c in made} & set(excluded)
    for case in made:
        for token in tokens:
            assert holds(token, case.geometry), (token, case)
    if "nonempty" in tokens:
        for case in made[:20]:
            kwargs = call(case).kwargs
            assert all(np.size(v) > 0 for v in kwargs.values() if isinstance(v, np.ndarray))
    tried = []

    def still_fails(case) -> bool:
        tried.append(case)
        return True

    start = max(made, key=lambda c: shapes_nd(c.geometry).out_spatial[0] * c.geometry.width)
    smallest, _ = shrink(start, still_fails, support)
    assert smallest == (tried[-1] if tried else start)  # an empty case may be minimal already
    for case in tried:
        for token in tokens:
            assert holds(token, case.geometry), (token, case)


def test_no_class_is_excluded_without_a_declaration():
    for convention, op in PAIRS:
        assert cases.excluded_classes(op, convention, parse_support("")) == ()


@pytest.mark.parametrize(("convention", "op", "spec", "excluded"), [
    ("tf", "Conv2D", "nonempty", {"empty_output", "zero_batch", "zero_channels"}),
    ("torch", "conv2d", "nonempty", {"zero_batch"}),
    ("tf", "Conv2DBackpropInput", "no_strided_dilation", {"dilation_with_stride",
                                                          "non_square"}),
    ("tf", "DepthwiseConv2dNative", "equal_strides", {"non_square"}),
    ("torch", "conv2d_weight", "no_remainder", {"output_remainder"}),
    ("torch", "conv2d_input", "padding=same", {"output_remainder", "one_by_one_stride",
                                               "filter_wider_than_stride",
                                               "dilation_with_stride", "non_square"}),
    ("tf", "Conv2D", "strides=1 layouts=NHWC", {"output_remainder", "one_by_one_stride",
                                                "filter_wider_than_stride",
                                                "dilation_with_stride", "empty_output",
                                                "non_square", "layout_nchw"}),
])
def test_the_classes_a_declaration_excludes_are_not_tried(convention, op, spec, excluded):
    support = parse_support(spec)
    assert set(cases.excluded_classes(op, convention, support)) == excluded
    edges = {c.edge for c in cases.generate(op, convention, ["float32", "float64"], 60, 3,
                                            support)}
    assert edges == set(cases.edge_classes(op, convention)) - excluded | {"random"}


# -- sweeps of targets refusing what they document ----------------------------------------------
def _hw(v, fmt):
    return tuple(v[1:3]) if fmt == "NHWC" else tuple(v[2:4])


def refusing_conv2d(**kw):
    """tf Conv2D refusing, with a ValueError, unequal strides, a stride > 1 with a dilation > 1,
    empty arrays and an output-size remainder (what TF's CPU depthwise kernels and many
    libraries document)."""
    fmt = kw["data_format"]
    s, d = _hw(kw["strides"], fmt), _hw(kw["dilations"], fmt)
    if s[0] != s[1]:
        raise ValueError("only equal strides in the row and column dimensions")
    if max(s) > 1 and max(d) > 1:
        raise ValueError("strides > 1 are not supported with dilations > 1")
    if kw["input"].size == 0 or kw["filter"].size == 0:
        raise ValueError("empty input")
    y = zoo.loops_conv2d(**kw)
    if y.size == 0:
        raise ValueError("empty output")
    x_hw, k_hw = _hw(kw["input"].shape, fmt), kw["filter"].shape[:2]
    pads = kw.get("explicit_paddings")
    for i in range(2):
        reach = (_hw(y.shape, fmt)[i] - 1) * s[i] + d[i] * (k_hw[i] - 1) + 1
        if kw["padding"] == "EXPLICIT":
            padded = x_hw[i] + sum(_hw(pads[j::2], fmt)[i] for j in range(2))
        elif kw["padding"] == "SAME":
            padded = max(x_hw[i], reach)
        else:
            padded = x_hw[i]
        if padded != reach:
            raise ValueError("the output size must divide exactly")
    return y


def refusing_torch_conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch conv2d taking only the padding strings 'valid' and 'same'."""
    if not isinstance(padding, str):
        raise TypeError(f"padding {padding}: only 'valid' and 'same' are supported")
    assert padding in ("valid", "same") and (padding == "valid" or stride == (1, 1))
    return zoo.torch_conv2d(input, weight, bias, stride, padding, dilation, groups)


@pytest.mark.parametrize(("target", "op", "convention", "spec"), [
    ("refusing_conv2d", "Conv2D", "tf", ("equal_strides no_strided_dilation nonempty "
                                        "no_remainder")),
    ("refusing_torch_conv2d", "conv2d", "torch", "padding=valid,same"),
])
def test_a_declared_refusal_is_never_a_failure(target, op, convention, spec):
    fn = f"tests.test_verify_support:{target}"
    undeclared = api.verify(fn, op, convention, cases=20, path=ROOT)
    assert undeclared.failed > 0
    assert {f.verdict.verdict for f in undeclared.failures} == {"raised"}
    declared = api.verify(fn, op, convention, cases=40, path=ROOT, support=spec)
    assert declared.ok and declared.failed == 0 and declared.unsupported == 0
    assert declared.cases == 40
    excluded = cases.excluded_classes(op, convention, parse_support(spec))
    assert not set(declared.classes) & set(excluded)
    if convention == "tf":  # nonempty and no_remainder exclude these
        assert {"empty_output", "zero_batch", "output_remainder"} <= set(excluded)
    # the report says so: the class table, the JSON
    assert declared.excluded == excluded and declared.to_json()["excluded"] == list(excluded)
    text = str(declared)
    assert all(f"  {name:<26}-        excluded by --support" in text for name in excluded), text
