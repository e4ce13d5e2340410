"""engine.io.sources: chunked generation gives exactly the one-shot values, within its workspace."""

import tracemalloc

import numpy as np
import pytest

from engine.base.dtypes import DTYPES
from engine.io import sources


def one_shot(fill: str, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """The definition without chunks: the whole shape in float64 (random values of the
    narrower dtypes drawn in float32), then cast."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype != "float64" and fill != "arange":
        f32 = (rng.standard_normal(shape, dtype=np.float32) if fill == "random_normal"
               else rng.random(shape, dtype=np.float32) * np.float32(2) - np.float32(1))
        return np.ascontiguousarray(f32, dtype=DTYPES[dtype])
    full = {"arange": lambda: np.arange(1, n + 1, dtype=np.float64).reshape(shape),
            "random_normal": lambda: rng.standard_normal(shape),
            "random_uniform": lambda: rng.uniform(-1.0, 1.0, shape)}[fill]()
    return np.ascontiguousarray(full, dtype=DTYPES[dtype])


@pytest.mark.parametrize("fill", ["arange", "random_normal", "random_uniform"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("chunk", [1, 7, 1000, 1 << 20])
def test_chunked_generation_equals_one_shot_generation(monkeypatch, fill, dtype, chunk):
    monkeypatch.setattr(sources, "CHUNK", chunk)
    shape = (3, 5, 7, 11)
    out = sources.generate(fill, shape, dtype, seed=5)
    expected = one_shot(fill, shape, dtype, 5)
    assert out.dtype == DTYPES[dtype] and out.shape == shape and out.flags.c_contiguous
    assert out.tobytes() == expected.tobytes()


def test_a_shape_over_one_chunk_gives_the_one_shot_values():
    shape = (3, sources.CHUNK // 2 + 3)
    for fill in ("random_normal", "arange"):
        out = sources.generate(fill, shape, "float32", seed=9)
        assert out.tobytes() == one_shot(fill, shape, "float32", 9).tobytes()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_half_and_float32_sources_never_make_a_float64_array_of_the_whole_shape(dtype):
    shape = (4, 1024, 1024)  # 4 Mi elements: the float64 of the whole shape would be 32 MiB
    out_bytes = 4 * 2**20 * DTYPES[dtype].itemsize
    for fill in ("random_normal", "random_uniform", "arange"):
        tracemalloc.start()
        try:
            out = sources.generate(fill, shape, dtype, seed=1)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert out.nbytes == out_bytes
        assert peak <= out_bytes + sources.workspace_bytes(fill, shape, dtype) + 2**20, fill
        assert sources.workspace_bytes(fill, shape, dtype) < 8 * 4 * 2**20 / 1.5


def test_a_literal_beyond_the_dtype_range_is_an_error_on_values_not_a_silent_infinity():
    from engine.graph.canvas import Canvas
    from engine.graph.compiler import compile_canvas

    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "values", "values": [1.0, 1e308], "dtype": "float16"},
               id="x")
    (err,) = compile_canvas(c).errors["x"]
    assert err.attr == "values" and "1e+308" in err.message and "65504" in err.message
    c.set_attr("x", "values", [1.0, float("inf"), 65504.0])  # Infinity is said on purpose
    assert compile_canvas(c).ok


def test_a_64x128x128x64_float32_normal_source_is_drawn_in_float32_not_through_float64(
        monkeypatch):
    """The big source is made in its dtype: no float64 draw happens (the slower path); its values are still deterministic per seed and in the normal range."""
    calls = []
    real = sources._float64_values
    monkeypatch.setattr(sources, "_float64_values",
                        lambda *a: calls.append(a) or real(*a))
    a = sources.generate("random_normal", (4, 128, 128, 64), "float32", seed=3)
    assert not calls and a.dtype == np.float32
    assert a.tobytes() == sources.generate("random_normal", (4, 128, 128, 64), "float32",
                                           seed=3).tobytes()
    assert abs(float(a.mean())) < 0.01 and abs(float(a.std()) - 1) < 0.01
    assert float(np.abs(a).max()) < 16.0
