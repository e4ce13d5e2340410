"""The diagnoses of issue 30: padding offsets at every padding mode, the TensorFlow depthwise
dilation mistake, empty outputs, refusals, and outputs read from memory never written.

Implementations making a mistake are the loops of :mod:`tests.test_verify_mistakes` (``loop_op``
with a mistake flag) and the targets of :mod:`tests.verify_zoo`; neither is written from
engine.verify.mistakes.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.base.errors import InvalidArgumentError
from engine.verify import mistakes as mk
from engine.verify.conventions import Geometry
from engine.verify.diagnose import diagnose, diagnose_refusal, diagnose_shape, refusal_key
from engine.verify.diagnosis import diagnose_failure
from engine.verify.report import Failure
from engine.verify.unwritten import impossible_values, unwritten_memory
from engine.verify.values import Case, call
from engine.verify.verdicts import Verdict
from tests import verify_zoo as zoo
from tests.test_verify_mistakes import (
    C2D,
    C2F,
    C2I,
    DW,
    DWF,
    DWI,
    case,
    loop_op,
    matching,
    reference,
)

#: loop_op's flag -> (the detail the diagnosis gives, cases) of padding_offset_by_one flavours
#: beyond test_verify_mistakes' top one too many; every padding mode.
OFFSETS = {
    "padding_offset_by_one/left-": [
        (C2I, {"h": 5, "w": 6, "k": (3, 3), "padding": "SAME", "fmt": "NCHW"},
         "left padding 0 instead of 1 (one too few)"),
        (C2D, {"h": 5, "w": 6, "k": (2, 2)}, "left padding -1 instead of 0 (one too few)"),
    ],
    "padding_offset_by_one/both": [
        (DW, {"h": 7, "w": 7, "k": (3, 3), "strides": (2, 2), "padding": "SAME", "o": 2},
         "top padding 2 instead of 1 (one too many), left padding 2 instead of 1 (one too many)"),
        (C2F, {"h": 5, "w": 5, "k": (2, 2), "padding": "EXPLICIT", "pads": (1, 0, 2, 1), "n": 2},
         "top padding 2 instead of 1 (one too many), left padding 3 instead of 2 (one too many)"),
        (DWI, {"h": 5, "w": 4, "k": (2, 2), "o": 2, "fmt": "NCHW"},
         "top padding 1 instead of 0 (one too many), left padding 1 instead of 0 (one too many)"),
    ],
    "padding_offset_by_one/mixed": [
        (C2D, {"h": 6, "w": 6, "k": (3, 3), "padding": "EXPLICIT", "pads": (3, 2, 1, 0),
               "fmt": "NCHW"},
         "top padding 2 instead of 3 (one too few), left padding 2 instead of 1 (one too many)"),
        (DWF, {"h": 7, "w": 6, "k": (4, 3), "padding": "SAME", "n": 2},
         "top padding 0 instead of 1 (one too few), left padding 2 instead of 1 (one too many)"),
    ],
}
OFFSET_PARAMS = [pytest.param(m, op, kw, detail, id=f"{m.split('/')[1]}-{op}-{n}")
                 for m, cases in OFFSETS.items() for n, (op, kw, detail) in enumerate(cases)]


@pytest.mark.parametrize(("mistake", "op", "kw", "detail"), OFFSET_PARAMS)
def test_padding_offset_by_one_every_side_sign_and_mode(mistake, op, kw, detail):
    args = case(op, **kw)
    ref = reference(op, args)
    got = loop_op(op, args, mistake)
    assert got.shape == ref.shape and not np.allclose(got, ref)
    d = diagnose(op, args, got, ref, "float32")
    assert d.id == "padding_offset_by_one", d.text
    assert d.text == (f"Matches padding_offset_by_one: {mk.MISTAKES['padding_offset_by_one']} "
                      f"({detail}), within the float32 tolerance.")
    assert matching(op, args, got) == {"padding_offset_by_one"}


def test_same_pad_extra_before_keeps_its_id_where_it_is_an_offset():
    """SAME with odd totals in both dimensions: the extra row and column before is also the
    padding one too many on both sides; the more specific id is named and the offset flavour
    with the same reads is not a second candidate."""
    args = case(C2D, h=6, w=6, k=(2, 2), padding="SAME")
    ref = reference(C2D, args)
    both = loop_op(C2D, args, "padding_offset_by_one/both")
    assert np.array_equal(both, loop_op(C2D, args, "same_pad_extra_before"))
    d = diagnose(C2D, args, both, ref, "float32")
    assert d.id == "same_pad_extra_before" and "indistinguishable" not in d.text
    assert matching(C2D, args, both) == {"same_pad_extra_before"}


def test_padding_ignored_keeps_its_id_where_it_is_an_offset():
    args = case(C2F, h=5, w=5, k=(3, 3), padding="SAME", n=2)  # padding before (1, 1)
    got = loop_op(C2F, args, "padding_ignored")
    d = diagnose(C2F, args, got, reference(C2F, args), "float32")
    assert d.id == "padding_ignored" and "padding_offset_by_one" not in d.text


def test_undilated_same_and_dilation_ignored_tell_apart():
    """The two dilation mistakes differ in the padding only; each is named on its own output."""
    args = case(DWF, h=7, w=6, k=(3, 3), dilations=(2, 2), padding="SAME", n=2)
    ref = reference(DWF, args)
    for mistake in ("dilation_ignored", "dilation_ignored_undilated_same"):
        got = loop_op(DWF, args, mistake)
        assert diagnose(DWF, args, got, ref, "float32").id == mistake
        assert matching(DWF, args, got) == {mistake}


def test_zoo_targets_of_the_new_ids_are_named():
    targets = [
        (zoo.padding_offset_by_one, C2D, {"h": 5, "w": 6, "k": (3, 2), "fmt": "NCHW"}),
        (zoo.positions_averaged, C2F, {"n": 2, "h": 5, "w": 4, "k": (2, 2)}),
        (zoo.output_padding_zeroed, C2I, {"h": 7, "w": 6, "k": (3, 3), "strides": (2, 2),
                                          "padding": "EXPLICIT", "pads": (1, 1, 1, 1)}),
        (zoo.tf_depthwise_cpu_backprop_input, DWI, {"h": 7, "w": 6, "k": (3, 3), "o": 2,
                                                     "dilations": (2, 2), "padding": "SAME"}),
    ]
    names = ["padding_offset_by_one", "positions_averaged", "output_padding_zeroed",
             "dilation_ignored_undilated_same"]
    for (target, op, kw), name in zip(targets, names, strict=True):
        args = case(op, **kw)
        got = np.asarray(target(**{k: (v.astype(np.float32) if isinstance(v, np.ndarray) else v)
                                   for k, v in args.items()}), np.float64)
        d = diagnose(op, args, got, reference(op, args), "float32")
        assert d.id == name, (name, d.text)


# -- TensorFlow itself ---------------------------------------------------------------------------


def _tf_args(op, args):
    tf = pytest.importorskip("tensorflow")
    return {k: (tf.constant(v, tf.float32) if isinstance(v, np.ndarray) else v)
            for k, v in args.items()}


@pytest.mark.parametrize("op", [DWF, DWI])
@pytest.mark.parametrize("kw", [
    {"h": 7, "w": 6, "k": (3, 3), "dilations": (2, 2)},
    {"h": 9, "w": 8, "k": (3, 2), "dilations": (2, 3), "strides": (2, 2), "n": 2},
])
def test_tensorflow_depthwise_backprops_with_a_dilation_at_same(op, kw):
    """TensorFlow 2.21's CPU depthwise backprops take the dilation as 1 with the undilated
    filter's SAME padding: the diagnosis names exactly that, on TF's own output."""
    tf = pytest.importorskip("tensorflow")
    args = case(op, padding="SAME", o=2, **kw)
    got = getattr(tf.raw_ops, op)(**_tf_args(op, args)).numpy().astype(np.float64)
    ref = reference(op, args)
    if np.allclose(got, ref, atol=1e-4):
        pytest.skip("this TensorFlow computes the dilated depthwise backprop right")
    d = diagnose(op, args, got, ref, "float32")
    assert d.id == "dilation_ignored_undilated_same", d.text
    assert np.allclose(got, loop_op(op, args, "dilation_ignored_undilated_same"), atol=1e-4)


@pytest.mark.parametrize("op", [DWF, DWI])
@pytest.mark.parametrize("padding", ["VALID", "EXPLICIT"])
def test_tensorflow_depthwise_backprops_refuse_a_dilation_at_valid(op, padding):
    """There TF refuses a valid case: refused_valid_case, its message quoted; two such
    refusals differing in sizes share a key. Which refusal depends on TF's kernels: its Eigen
    kernels check out_backprop against the undilated filter; where TF turns oneDNN on by itself
    (AVX-512 VNNI CPUs), oneDNN finds no primitive for the case."""
    tf = pytest.importorskip("tensorflow")
    messages = []
    for h in (7, 8):
        args = case(op, h=h, w=6, k=(3, 3), dilations=(2, 2), padding=padding,
                    pads=(1, 2, 2, 1), o=2)
        reference(op, args)  # a valid case: the exact kernels accept it
        try:
            getattr(tf.raw_ops, op)(**_tf_args(op, args))
        except tf.errors.OpError as err:
            messages.append(f"{type(err).__name__}: {err}")
        else:
            pytest.skip("this TensorFlow accepts dilated VALID depthwise backprops")
    d = diagnose_refusal(messages[0])
    assert d.id == "refused_valid_case"
    eigen = "Number of rows of out_backprop doesn't match computed" in d.text
    assert eigen or "could not create a primitive descriptor" in d.text, d.text
    assert refusal_key(messages[0]) == refusal_key(messages[1])
    if eigen:
        assert messages[0] != messages[1]  # the sizes differ, the key does not


# -- empty outputs and wrong shapes -------------------------------------------------------------


def test_an_empty_output_returned_non_empty():
    args = case(C2D, h=2, w=5, k=(3, 2), strides=(2, 1))  # VALID: 0 output rows
    assert reference(C2D, args).shape == (1, 0, 4, 2)
    got = zoo.empty_output_shape(**args)
    assert got.shape == (1, 1, 4, 2)
    d = diagnose_shape(C2D, args, got.shape)
    assert d.id == "empty_output_shape"
    assert d.text == (f"Matches empty_output_shape: {mk.ALL_MISTAKES['empty_output_shape']}: "
                      "the output has shape [1, 1, 4, 2] where TensorFlow's is [1, 0, 4, 2].")
    # one row more is also output_size_off_by_one's shape: the empty reference decides
    assert diagnose_shape(C2D, args, (1, 1, 4, 2)).id == "empty_output_shape"
    assert diagnose(C2D, args, got, reference(C2D, args), "float32").id == "empty_output_shape"


def test_empty_outputs_of_other_shapes():
    args = case(C2D, h=2, w=5, k=(3, 2), strides=(2, 1))  # reference [1, 0, 4, 2]
    assert diagnose_shape(C2D, args, (1, 0, 3, 2)).id == "output_size_off_by_one"  # specific
    assert diagnose_shape(C2D, args, (1, 0, 7, 2)).id == "empty_output_shape"
    args = case(C2D, h=3, w=5, k=(3, 2))  # reference [1, 1, 4, 2]
    assert diagnose_shape(C2D, args, (1, 0, 4, 2)).id == "output_size_off_by_one"
    assert diagnose_shape(C2D, args, (0, 1, 4, 2)).id == "empty_output_shape"
    assert diagnose_shape(C2D, args, (2, 1, 4, 2)).id is None


# -- refusals ------------------------------------------------------------------------------------


def _failure(verdict, got=None):
    c = Case("Conv2D", "tf", Geometry(1, 4, 4, 1, (2, 2), 1))
    cl = call(c)
    return Failure(c, verdict, cl, got, mk.TF_OPS["Conv2D"][0](**cl.tf_args))


def test_a_raised_case_is_a_refused_valid_case_with_its_message():
    message = "NotImplementedError\x1b[31m: kernel 2x2 with stride 1 is not supported"
    d = diagnose_failure(_failure(Verdict("raised", message=message)), lambda op, c, a: a)
    assert d.id == "refused_valid_case"
    assert d.text == ('Matches refused_valid_case: a geometry TensorFlow accepts refused with '
                      'an exception: "NotImplementedError\\x1b[31m: kernel 2x2 with stride 1 is '
                      'not supported".')


def test_refusal_key_ignores_numbers_and_shapes_only():
    a = "ValueError: operands could not be broadcast together with shapes (1,6,6,2) (1,5,5,2)"
    b = "ValueError: operands could not be broadcast together with shapes (2,8,8,3) (2,7,7,3)"
    assert refusal_key(a) == refusal_key(b) == ("ValueError: operands could not be broadcast "
                                                "together with shapes [#] [#]")
    assert refusal_key("stride 2 > 1 at 0x7f3a, 1.5e-3 off") == "stride # > # at <hex>, # off"
    assert refusal_key("float16 not supported") != refusal_key("float32 not supported")
    assert refusal_key("Conv2D:  dilation  3") == refusal_key("Conv2D: dilation 2")
    assert refusal_key("dilations not supported") != refusal_key("strides not supported")


# -- memory never written ------------------------------------------------------------------------

#: Random cases of every op (float32-exact normal values), each mistake's variants checked.
RANDOM_OPS = (C2D, C2F, C2I, DW, DWF, DWI)


def _random_case(op, rng):
    padding = str(rng.choice(["VALID", "SAME", "EXPLICIT"]))
    fmt = str(rng.choice(["NHWC", "NCHW"]))
    depthwise = op in (DW, DWF, DWI)
    groups = 1 if depthwise else int(rng.choice([1, 2]))
    c = groups * int(rng.integers(1, 3))
    k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    kw = {"n": int(rng.integers(1, 3)), "h": int(rng.integers(4, 8)), "w": int(rng.integers(4, 8)),
          "c": c, "k": k, "o": groups * int(rng.integers(1, 3)), "groups": groups,
          "strides": tuple(int(v) for v in rng.integers(1, 3, 2)),
          "dilations": tuple(int(v) for v in rng.integers(1, 3, 2)), "padding": padding,
          "pads": tuple(int(v) for v in rng.integers(0, 3, 4)), "fmt": fmt}
    args = case(op, **kw, seed=int(rng.integers(1 << 30)))
    arrays = mk.TF_OPS[op][1]
    for name in arrays:  # float32-exact normals, not the integers of case()
        args[name] = rng.standard_normal(args[name].shape).astype(np.float32).astype(float)
    return args


@pytest.mark.parametrize("op", RANDOM_OPS)
def test_no_mistake_reads_memory_it_never_wrote(op):
    """Every variant of every known mistake, in float64 and rounded to float32, float16 and
    bfloat16, on random and on structured values, and the zoo's scaled gradients: never
    flagged."""
    import ml_dtypes
    rng = np.random.default_rng(30)
    checked = 0
    for _ in range(12):
        try:
            args = _random_case(op, rng)
            variants = list(mk.variants(op, args))
        except InvalidArgumentError:  # a geometry TensorFlow refuses: draw another
            continue
        structured = {k: (np.arange(1.0, v.size + 1).reshape(v.shape) if k == "input" else
                          (np.eye(1, v.size).reshape(v.shape) if isinstance(v, np.ndarray) else v))
                      for k, v in args.items()}
        for a in (args, structured):
            for mid, out in [("reference", reference(op, a)), *mk.variants(op, a)]:
                for dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
                    rounded = out.astype(dtype).astype(np.float64)
                    finite = np.where(np.isfinite(rounded), rounded, 0.0)
                    for got in (out, finite, finite * 3, finite / 7):
                        assert not unwritten_memory(op, a, got), (mid, dtype)
                        checked += 1
        assert variants
    assert checked > 1000


def test_transform_residues_are_not_garbage():
    """An FFT conv in float64 (structured integer values: the quantum is 1) leaves residues of
    about 1e-15 where the exact value is 0: not memory never written."""
    args = case(C2D, h=6, w=6, c=1, o=1, k=(3, 3), padding="SAME")
    args["input"] = np.arange(1.0, 37.0).reshape(1, 6, 6, 1)
    args["filter"] = np.zeros((3, 3, 1, 1))
    args["filter"][0, 0] = 1.0  # the output is the input shifted: 0 where it reads padding
    x, w = args["input"][0, :, :, 0], args["filter"][:, :, 0, 0]
    size = (8, 8)
    full = np.fft.irfft2(np.fft.rfft2(x, size) * np.fft.rfft2(w[::-1, ::-1], size), size)
    got = full[1:7, 1:7].reshape(1, 6, 6, 1)  # SAME: the correlation's centre
    ref = reference(C2D, args)
    assert np.allclose(got, ref) and not np.array_equal(got, ref)
    residues = got[ref == 0]
    assert residues.size and np.all(np.abs(residues) < 1e-12)
    assert residues.any()
    assert not unwritten_memory(C2D, args, got)


def test_scaled_zoo_gradients_are_not_garbage():
    args = case(C2F, n=3, h=9, w=9, k=(2, 2))
    for bug in ("torch_mlir655", "positions_averaged", "batch_averaged"):
        got = zoo.backprop_filter(args["input"], args["filter_sizes"], args["out_backprop"],
                                  args, bug=bug)
        assert not unwritten_memory(C2F, args, got), bug


def _garbage_outputs(ref):
    rng = np.random.default_rng(7)
    huge = ref.copy()
    huge.flat[3] = 1e24
    subnormal = ref.copy()
    subnormal.flat[-1] = 1.0e-41  # a float32 subnormal bit pattern
    denormal64 = ref.copy()
    denormal64.flat[0] = 6.9e-310  # a float64 pointer read as a value
    bits = rng.integers(0, 1 << 32, ref.size, dtype=np.uint64).astype(np.uint32)
    random_bits = bits.view(np.float32).reshape(ref.shape).astype(np.float64)
    random_bits[~np.isfinite(random_bits)] = 0.0
    return {"1e24": huge, "float32 subnormal": subnormal, "float64 denormal": denormal64,
            "random float32 bits": random_bits}


@pytest.mark.parametrize("op", [C2D, C2F, DWI])
def test_garbage_reads_memory_it_never_wrote(op):
    args = case(op, n=2, h=6, w=6, k=(3, 3), strides=(2, 2), padding="SAME")
    ref = reference(op, args)
    assert not unwritten_memory(op, args, ref)
    for name, got in _garbage_outputs(ref).items():
        assert unwritten_memory(op, args, got), name
        d = diagnose(op, args, got, ref, "float32")
        assert d.id is None, (name, d.text)
        assert "reads memory it never wrote" in d.text, name


def test_garbage_in_the_last_row_is_not_output_size_off_by_one():
    """The issue's case: the last output row uninitialised (subnormal junk), otherwise right,
    agrees with output_size_off_by_one's zeros within tolerance; it must not be named so."""
    args = case(C2D, h=6, w=6, k=(3, 3))
    ref = reference(C2D, args)
    got = ref.copy()
    got[:, -1] = 1.4e-45 * np.arange(1, got[:, -1].size + 1).reshape(got[:, -1].shape)
    assert "output_size_off_by_one" in matching(C2D, args, got)  # what the values alone say
    d = diagnose(C2D, args, got, ref, "float32")
    assert d.id is None and d.text.startswith("The output reads memory it never wrote: 8 of "
                                              "32 elements hold values no sum of products")


def test_an_operand_all_zero_makes_any_nonzero_value_garbage():
    args = case(C2D, h=4, w=4)
    args["filter"] = np.zeros_like(args["filter"])
    ref = reference(C2D, args)
    assert not ref.any() and not unwritten_memory(C2D, args, ref)
    got = ref.copy()
    got.flat[0] = 1e-3
    assert impossible_values(C2D, args, got).sum() == 1


def test_uninitialised_strided_input_gradient():
    """The issue's uninitialised values for strided outputs: the input rows no tap reads keep
    what the memory held; with 1e24 there it is memory never written; with plausible values the
    pattern says only elements with no terms are wrong."""
    args = case(C2I, h=7, w=7, k=(2, 2), strides=(3, 3))
    ref = reference(C2I, args)
    got = zoo.uninitialised_strided(**args).astype(np.float64)
    d = diagnose(C2I, args, got, ref, "float32")
    assert d.id is None and "reads memory it never wrote" in d.text
    plausible = np.where(got == zoo.GARBAGE, 2.5, got)
    d = diagnose(C2I, args, plausible, ref, "float32")
    assert d.id is None and "Every wrong element has no terms (no window reads it" in d.text


def test_a_wrong_shape_of_garbage_says_so():
    args = case(C2D, h=2, w=5, k=(3, 2), strides=(2, 1))
    got = zoo.empty_output_shape(**args)
    f = _failure(Verdict("wrong_shape", message="shape"), got)
    f = Failure(f.case, f.verdict, type(f.call)(args, C2D, args), got, reference(C2D, args))
    d = diagnose_failure(f, lambda op, c, a: a)
    assert d.id == "empty_output_shape"
    assert d.text.endswith("The output reads memory it never wrote: 8 of 8 elements hold values "
                           "no sum of products of these operands gives (e.g. 1e+24 at [0, 0, 0, "
                           "0]).")
