

import pytest


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


def _spinning(request):
    """The kernel team with its spinning waits installed (as accel installs them with numba)."""
    import pytest

    from engine.kernels import parallel

    pytest.importorskip("numba")
    from engine.kernels._compiled import spin

    if parallel.workers() < 2:
        pytest.skip("one core: a single range")
    saved = parallel._spin, parallel._spin_polls
    parallel.use_spin(spin.wait_change, spin.polls_for(parallel.SPIN_SECONDS))
    request.addfinalizer(lambda: parallel.use_spin(*saved))
    return parallel


def test_the_spinning_wait_sees_another_threads_store_and_gives_up_after_its_polls():
    import threading

    import numpy as np
    import pytest

    pytest.importorskip("numba")
    from engine.kernels._compiled import spin

    flags = np.zeros(4, np.int64)
    assert spin.wait_change(flags, 2, 0, 1000) is False
    flags[2] = 7
    assert spin.wait_change(flags, 2, 0, 1) is True and spin.wait_change(flags, 2, 7, 10) is False
    assert spin.polls_for(0.01) >= 1
    seen = []
    waiter = threading.Thread(target=lambda: seen.append(spin.wait_change(flags, 1, 0, 10**9)),
                              daemon=True)  # 10**9 polls: half a minute or more unseen
    waiter.start()
    flags[1] = 1  # another thread's store, while (or before) it polls
    waiter.join(30)
    assert seen == [True]


@pytest.mark.parametrize("spin", [False, True])
def test_the_team_returns_every_range_in_order_and_raises_a_workers_error(request, spin):
    """With or without spinning waits: results in range order, the other thread's range run
    off the calling thread, its error raised in the caller after every range ended, and the
    team usable again afterwards."""
    import threading

    from engine.kernels import parallel

    if spin:
        _spinning(request)
    elif parallel.workers() < 2:
        pytest.skip("one core: a single range")
    total = 4 * parallel.MIN_POSITIONS_PER_RANGE
    me = threading.current_thread()
    for _ in range(50):  # back to back, as a kernel's chunks go
        seen = parallel.map_ranges(lambda lo, hi: (lo, hi, threading.current_thread() is me),
                                   total)
        assert [s[:2] for s in seen] == parallel.ranges(total)
        assert seen[0][2] and not any(s[2] for s in seen[1:])

    def fails_off_the_caller(lo, hi):
        if lo:
            raise ArithmeticError(f"range {lo}")
        return lo

    with pytest.raises(ArithmeticError, match="range"):
        parallel.map_ranges(fails_off_the_caller, total)
    assert parallel.map_ranges(lambda lo, hi: hi - lo, total) == [
        hi - lo for lo, hi in parallel.ranges(total)]


def test_nested_and_concurrent_calls_neither_deadlock_nor_mix_their_ranges(request):
    """A range that itself calls map_ranges, and two threads calling at once, get the thread
    pool while the team is taken: every call still gets its own ranges' results."""
    import threading

    from engine.kernels import parallel

    _spinning(request)
    total = 4 * parallel.MIN_POSITIONS_PER_RANGE
    expect = [hi - lo for lo, hi in parallel.ranges(total)]
    nested = parallel.map_ranges(lambda lo, hi: parallel.map_ranges(
        lambda a, b: (lo, b - a), total), total)
    assert [[n for _, n in inner] for inner in nested] == [expect] * len(expect)
    assert [inner[0][0] for inner in nested] == [lo for lo, _ in parallel.ranges(total)]

    def fails_off_the_caller(lo, hi):
        if lo:
            raise ArithmeticError(f"range {lo}")
        return lo

    with pytest.raises(ArithmeticError, match="range"):  # raised through the pool too
        parallel.map_ranges(lambda lo, hi: parallel.map_ranges(fails_off_the_caller, total),
                            total)
    results: dict[int, list] = {}

    def caller(k):
        results[k] = [parallel.map_ranges(lambda lo, hi: (k, hi - lo), total)
                      for _ in range(100)]

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [0, 1, 2]
    for k, calls in results.items():
        assert all(call == [(k, n) for n in expect] for call in calls)


def test_the_team_keeps_no_result_and_more_ranges_than_threads_go_to_the_pool(request,
                                                                             monkeypatch):
    """A range's result and its function (which may hold a chunk's operands) are the caller's
    alone once the call returns (the team keeps no reference), and when the cores this process may use grow after the team was made, the
    extra ranges still all run."""
    import gc
    import weakref

    from engine.kernels import parallel

    _spinning(request)
    total = 4 * parallel.MIN_POSITIONS_PER_RANGE

    class Result:
        pass

    refs = []

    def run_once():
        operand = Result()
        refs.append(weakref.ref(operand))

        def fn(lo, hi):
            r = Result()
            refs.append(weakref.ref(r))
            return (r, operand)

        parallel.map_ranges(fn, total)

    run_once()
    gc.collect()
    assert len(refs) == 1 + len(parallel.ranges(total)) and all(r() is None for r in refs)
    team_size = len(parallel._the_team().tasks)
    monkeypatch.setattr(parallel, "workers", lambda: team_size + 3)
    total = (team_size + 3) * parallel.MIN_POSITIONS_PER_RANGE
    assert parallel.map_ranges(lambda lo, hi: hi - lo, total) == [
        hi - lo for lo, hi in parallel.ranges(total)]
