

def test_ranges_run_in_the_callers_context():
    """NumPy's errstate (a context variable) and our own context variables reach the worker
    threads: a kernel's quiet floats stay quiet on every core."""
    import contextvars

    import numpy as np

    from engine.kernels import parallel

    var = contextvars.ContextVar("probe", default="unset")
    token = var.set("caller")
    try:
        with np.errstate(over="ignore"):
            seen = parallel.map_ranges(lambda lo, hi: (var.get(), np.geterr()["over"]),
                                       4 * parallel.MIN_POSITIONS_PER_RANGE)
    finally:
        var.reset(token)
    assert len(seen) == parallel.workers() and set(seen) == {("caller", "ignore")}


def test_the_first_range_runs_in_the_calling_thread_and_the_call_waits_for_every_range():
    """The caller computes the first range itself; when it raises, the call still returns only
    after the other ranges have ended (no kernel writes into a buffer after its call)."""
    import threading
    import time

    import pytest

    from engine.kernels import parallel

    if parallel.workers() < 2:
        pytest.skip("one core: a single range")
    total = 4 * parallel.MIN_POSITIONS_PER_RANGE
    me = threading.current_thread()
    seen = parallel.map_ranges(lambda lo, hi: (lo, threading.current_thread() is me), total)
    assert seen[0] == (0, True) and all(not mine for _, mine in seen[1:])
    assert [lo for lo, _ in seen] == [lo for lo, _ in parallel.ranges(total)]

    ended = []

    def fn(lo, hi):
        if lo == 0:
            raise ValueError("first range")
        time.sleep(0.2)
        ended.append(lo)

    with pytest.raises(ValueError, match="first range"):
        parallel.map_ranges(fn, total)
    assert len(ended) == len(parallel.ranges(total)) - 1
