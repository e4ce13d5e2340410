"""engine.kernels.buffers: zeroed buffers and contiguous operand copies made on all cores."""

import threading

import ml_dtypes
import numpy as np
import pytest

from engine.kernels import buffers, parallel


def test_zeroed_is_zero_whatever_the_allocator_hands_back():
    for _ in range(3):
        dirty = np.empty(1 << 16, np.float32)
        dirty.fill(7.0)
        del dirty
        out = buffers.zeroed((256, 256), np.float32)
        assert out.flags.c_contiguous and not out.any()


def test_contiguous_returns_a_contiguous_array_of_the_dtype_itself():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert buffers.contiguous(a, np.float32) is a


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_contiguous_copies_views_and_conversions_image_by_image_on_every_core(monkeypatch, dtype):
    """An NCHW view (and a half-type source) becomes a C-contiguous copy equal to
    ``np.ascontiguousarray``, its images copied by several threads."""
    monkeypatch.setattr(parallel, "MIN_COPY_BYTES", 1)  # one image per range
    monkeypatch.setattr(parallel, "workers", lambda: 3)
    rng = np.random.default_rng(0)
    nchw = rng.standard_normal((5, 3, 4, 6)).astype(np.float16)
    view = nchw.transpose(0, 2, 3, 1)
    calls = []
    lock = threading.Lock()
    original = parallel.copy_ranges

    def spying(fn, images, per_image):
        def part(lo, hi):
            with lock:
                calls.append((lo, hi))
            fn(lo, hi)
        original(part, images, per_image)

    monkeypatch.setattr(buffers, "copy_ranges", spying)
    out = buffers.contiguous(view, dtype)
    assert out.flags.c_contiguous and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.ascontiguousarray(view, dtype))
    assert sorted(calls) == [(0, 1), (1, 3), (3, 5)]  # one range per (patched) core


def test_contiguous_of_an_empty_batch_and_of_a_scalar():
    empty = np.zeros((0, 3, 4), np.float16).transpose(0, 2, 1)
    assert buffers.contiguous(empty, np.float32).shape == (0, 4, 3)
    scalar = np.array(2.5, np.float16)
    out = buffers.contiguous(scalar, np.float32)
    assert out.dtype == np.float32 and float(out) == 2.5
