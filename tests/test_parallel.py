

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
