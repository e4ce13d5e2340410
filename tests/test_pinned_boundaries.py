"""Boundaries and refusals that survived the issue 32 point 7 mutation probe: each test asserts a
computed result on both sides of one line (the mutant it kills is in its docstring, checked by
applying it): the ONNX tensor size against the memory limit and the file, the member names and
the old members of a file set, the stale-folder sweep, the out_backprop shape of the check
blocks and the executor cache's byte budget."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from blocks.check_support import forward_geometry
from blocks.registry import get_spec
from blocks.spec import AttrError, TensorSpec
from engine.base import atomic
from engine.graph.executor import OutputCache, _Entry


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


# -- engine.io.models.onnx_tensors: the size of a tensor against the limit and the file ----------

def _tensor(array: np.ndarray):
    onnx = pytest.importorskip("onnx")
    return onnx, onnx.numpy_helper.from_array(array, "w")


def test_a_tensor_of_exactly_the_limit_is_read_and_one_byte_less_refuses_it(tmp_path):
    """Mutant ``nbytes >= limit`` (or ``nbytes > limit + 1``) in ``tensor_array``: a 216-byte
    initializer under a 216-byte limit is read, exactly; under 215 it is refused, saying both."""
    from engine.io.models.model_import import ModelImportError
    from engine.io.models.onnx_tensors import tensor_array

    w = np.arange(54, dtype=np.float32).reshape(3, 2, 3, 3)
    onnx, t = _tensor(w)
    got = tensor_array(onnx, t, "layer 'c': weights 'W'", 10**6, str(tmp_path), limit=216)
    np.testing.assert_array_equal(got, w)
    assert got.dtype == np.float32
    with pytest.raises(ModelImportError) as err:
        tensor_array(onnx, t, "layer 'c': weights 'W'", 10**6, str(tmp_path), limit=215)
    assert str(err.value) == ("layer 'c': weights 'W': dims [3, 2, 3, 3] need 216 bytes, more "
                              "than the memory limit (215 bytes): not read")


def test_dims_claiming_more_than_the_file_say_so_only_past_its_size(tmp_path):
    """Mutant ``nbytes >= file_bytes`` in ``tensor_array``: dims needing exactly the file's
    bytes are not "more than the whole file"; one byte more are."""
    from engine.io.models.model_import import ModelImportError
    from engine.io.models.onnx_tensors import tensor_array

    onnx, t = _tensor(np.zeros((2, 3), np.float32))
    t.raw_data = t.raw_data[:20]  # 24 bytes needed, 20 held
    with pytest.raises(ModelImportError) as err:
        tensor_array(onnx, t, "w", 24, str(tmp_path))
    assert str(err.value) == ("w: dims [2, 3] need 6 FLOAT elements (24 bytes), but its data "
                              "has 20 bytes")
    with pytest.raises(ModelImportError) as err:
        tensor_array(onnx, t, "w", 23, str(tmp_path))
    assert str(err.value) == ("w: dims [2, 3] need 6 FLOAT elements (24 bytes, more than the "
                              "whole file (23 bytes)), but its data has 20 bytes")


@pytest.mark.parametrize("dims", [[-1, 2], [2, -1], [-2, -3]])
def test_negative_dims_are_refused_as_such(tmp_path, dims):
    """Mutant ``d < -1`` in ``tensor_array``: a dim of -1 (whose product with another -1 or a
    zero count can match the data) is "negative dims", not a count of elements."""
    from engine.io.models.model_import import ModelImportError
    from engine.io.models.onnx_tensors import tensor_array

    onnx, t = _tensor(np.zeros(6, np.float32))
    del t.dims[:]
    t.dims.extend(dims)
    with pytest.raises(ModelImportError) as err:
        tensor_array(onnx, t, "w", 10**6, str(tmp_path))
    assert str(err.value) == f"w: negative dims {dims}"


# -- engine.base.atomic: member names, the old members, the stale-folder sweep ------------------

@pytest.mark.parametrize("names", [[".."], ["."], [""], ["a/b"], ["a\x00b"], ["m.npy", "m.npy"],
                                   ["main.json"]])
def test_a_member_name_that_is_not_a_distinct_plain_file_name_is_a_value_error(tmp_path, names):
    """Mutants: ``_plain_name`` without ``..`` (or ``.``), the check raising OSError instead of
    ValueError, the duplicate or main-name condition dropped: nothing is written."""
    main = tmp_path / "main.json"
    members = [atomic.Member.of_bytes(n, b"x") for n in names]
    with pytest.raises(ValueError) as err:
        atomic.write_file_set(main, atomic.bytes_writer(b"{}"), members)
    assert type(err.value) is ValueError
    assert str(err.value) == f"member names must be distinct plain file names: {names!r}"
    assert list(tmp_path.iterdir()) == []


def test_an_old_member_list_naming_the_main_file_never_removes_it(tmp_path):
    """Mutant ``stale == real`` (or the condition dropped) in the removal of old members: the
    old main file names itself and 'old.npy'; the new set keeps the new main file and its one
    member, and removes only 'old.npy'."""
    main = tmp_path / "main.json"
    main.write_bytes(b"old")
    (tmp_path / "old.npy").write_bytes(b"old member")
    written = atomic.write_file_set(
        main, atomic.bytes_writer(b"new"), [atomic.Member.of_bytes("new.npy", b"n")],
        owned_before=lambda real: [real.name, "old.npy"])
    assert written == [tmp_path / "new.npy", main]
    assert main.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main.json", "new.npy"]


def test_a_kept_old_member_stays_and_the_others_go(tmp_path):
    """Mutant ``_identities([stale]) | kept`` (or ``not`` dropped): only the kept one stays."""
    main = tmp_path / "main.json"
    main.write_bytes(b"old")
    for n in ("a.npy", "b.npy"):
        (tmp_path / n).write_bytes(n.encode())
    atomic.write_file_set(main, atomic.bytes_writer(b"new"), [],
                          owned_before=lambda _real: ["a.npy", "b.npy"],
                          keep=[tmp_path / "b.npy"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.npy", "main.json"]


def _stale_folder(parent: Path, pid: int, name: str = "out", seconds: float = 0) -> Path:
    folder = parent / atomic.temp_name(name, pid, bytes(range(atomic.TEMP_RANDOM_BYTES)))
    folder.mkdir()
    for n in ("l00.gbc.json", "l00.filter.npy"):
        (folder / n).write_bytes(b"x")
    _age(folder, seconds or atomic.STALE_TEMP_S + 5)
    return folder


def test_the_sweep_removes_an_old_folder_of_files_of_a_gone_process(tmp_path):
    """Mutants in ``_remove_temp_folder`` and the sweep's folder branch (``S_ISDIR`` dropped,
    ``all`` as ``any``, the unlink or rmdir dropped, ``STALE_TEMP_S`` compared with ``<=``...): an
    old folder of regular files is removed whole; a fresh one, one holding a folder or a
    symbolic link, and one of a live process stay as they were."""
    gone = _dead_pid()
    removable = _stale_folder(tmp_path, gone, "a")
    with_folder = _stale_folder(tmp_path, gone, "b")
    (with_folder / "sub").mkdir()
    _age(with_folder, atomic.STALE_TEMP_S + 5)
    with_link = _stale_folder(tmp_path, gone, "c")
    (with_link / "link").symlink_to(tmp_path / "elsewhere")
    _age(with_link, atomic.STALE_TEMP_S + 5)
    fresh = _stale_folder(tmp_path, gone, "d", seconds=atomic.STALE_TEMP_S - 30)
    alive = _stale_folder(tmp_path, os.getppid(), "e")
    assert atomic.sweep_stale_temps(tmp_path) == [removable]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (with_folder, with_link, fresh, alive))
    assert sorted(p.name for p in with_folder.iterdir()) == ["l00.filter.npy", "l00.gbc.json",
                                                             "sub"]
    assert sorted(p.name for p in with_link.iterdir()) == ["l00.filter.npy", "l00.gbc.json",
                                                           "link"]
    assert len(list(fresh.iterdir())) == len(list(alive.iterdir())) == 2


def test_a_stale_file_just_past_the_age_goes_and_one_just_under_stays(tmp_path):
    """Mutant ``now - st.st_mtime <= STALE_TEMP_S`` / ``> STALE_TEMP_S`` / a smaller constant:
    ages of STALE_TEMP_S - 5 and + 5 seconds on each side."""
    gone = _dead_pid()
    young = tmp_path / atomic.temp_name("y.npy", gone, b"\x01" * atomic.TEMP_RANDOM_BYTES)
    old = tmp_path / atomic.temp_name("o.npy", gone, b"\x02" * atomic.TEMP_RANDOM_BYTES)
    for path, seconds in ((young, atomic.STALE_TEMP_S - 5), (old, atomic.STALE_TEMP_S + 5)):
        path.write_bytes(b"x")
        _age(path, seconds)
    assert atomic.sweep_stale_temps(tmp_path) == [old]
    assert [p.name for p in tmp_path.iterdir()] == [young.name]


# -- blocks: the check blocks' out_backprop ------------------------------------------------------

def _check_inputs(dy_shape) -> dict[str, TensorSpec]:
    return {"input": TensorSpec((2, 6, 5, 4), "float32"),
            "filter": TensorSpec((3, 3, 4, 3), "float32"),
            "out_backprop": TensorSpec(tuple(dy_shape), "float32")}


@pytest.mark.parametrize("dy_shape", [(1, 6, 5, 3), (3, 6, 5, 3), (2, 5, 5, 3), (2, 6, 4, 3),
                                      (2, 6, 5, 4), (2, 6, 5), (2, 6, 5, 3, 1)])
def test_an_out_backprop_of_another_shape_is_refused_naming_the_port(dy_shape):
    """Mutant: ``forward_geometry`` comparing ``dy.shape[1:]`` (the batch not compared) or a
    prefix: each axis off by one, and a rank off by one, is refused by AdjointCheck's infer with
    the port and both shapes; the right shape infers its outputs."""
    spec = get_spec("AdjointCheck")
    attrs, _ = spec.resolve_attrs({"op": "Conv2D"})
    with pytest.raises(AttrError) as err:
        spec.infer(attrs, _check_inputs(dy_shape))
    assert err.value.attr == "out_backprop"
    assert err.value.message == (f"out_backprop shape {list(dy_shape)} does not match the "
                                 f"Conv2D output shape: expected [2, 6, 5, 3], got "
                                 f"{list(dy_shape)}")
    out = spec.infer(attrs, _check_inputs((2, 6, 5, 3)))
    assert out["ok"] == TensorSpec((), "bool")
    g = forward_geometry(attrs, _check_inputs((2, 6, 5, 3)), set())
    assert tuple(g.output_shape) == (2, 6, 5, 3)


# -- engine.graph.executor: the cache's byte budget ---------------------------------------------

def _entry(nbytes: int) -> _Entry:
    return _Entry({"output": np.zeros(nbytes, np.uint8)}, 0.0)


def test_the_cache_holds_exactly_its_budget_and_evicts_one_byte_past_it():
    """Mutants ``self.bytes > self.max_bytes + 1`` / ``>=`` in ``put`` and ``> max_bytes + 1``
    / ``>=`` in ``evict``: 64 + 36 bytes fill a 100-byte cache exactly (both stay); 64 + 37
    evict the least recently used one."""
    cache = OutputCache(100)
    cache.put("a", _entry(64))
    cache.put("b", _entry(36))
    assert (cache.keys(), cache.bytes) == (["a", "b"], 100)
    cache = OutputCache(100)
    cache.put("a", _entry(64))
    cache.put("b", _entry(37))
    assert (cache.keys(), cache.bytes) == (["b"], 37)
    cache = OutputCache(100)
    cache.put("a", _entry(64))
    cache.put("b", _entry(37), keep=frozenset({"a", "b"}))  # the plan being run stays whole
    assert (cache.keys(), cache.bytes) == (["a", "b"], 101)
    cache.evict(101)
    assert cache.keys() == ["a", "b"]
    cache.evict(100)
    assert (cache.keys(), cache.bytes) == (["b"], 37)


def test_eviction_of_only_the_free_entries_counts_them_alone():
    """Mutant ``only_free`` ignored (or ``_kept_bytes`` added): with 'k' kept (50 bytes) and
    'f' free (40), ``evict(40, keep, only_free=True)`` keeps both; ``evict(39, ...)`` drops 'f'."""
    keep = frozenset({"k"})
    cache = OutputCache(1000)
    cache.put("k", _entry(50), keep)
    cache.put("f", _entry(40), keep)
    cache.evict(40, keep, only_free=True)
    assert (cache.keys(), cache.bytes) == (["k", "f"], 90)
    cache.evict(39, keep, only_free=True)
    assert (cache.keys(), cache.bytes) == (["k"], 50)


# -- engine.graph.compiler: a node on a cycle of its own ----------------------------------------

def test_a_node_wired_to_itself_is_still_in_the_order_and_reported():
    """Mutant ``len(order) < len(names) - 1`` in ``topological_order``: a cycle of one node (a
    hand-built self-loop; ``connect`` refuses it) leaves exactly one node unplaced, which must
    still come last so the compiler reports it."""
    from engine.graph.canvas import Canvas, Edge
    from engine.graph.compiler import compile_canvas, topological_order

    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, 3, 4, 5]}, id="src")
    c.add_node("Transpose", id="t")
    c.add_node("Transpose", id="loop")
    c.connect(("src", "output"), ("t", "input"))
    looped = Canvas(nodes=c.nodes, edges=[*c.edges, Edge(("loop", "output"), ("loop", "input"))])
    assert topological_order(looped) == ["src", "t", "loop"]
    assert set(compile_canvas(looped).errors) == {"loop"}
