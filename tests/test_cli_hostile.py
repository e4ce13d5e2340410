"""Hostile arguments, memory exhaustion and Ctrl+C on the command line: one line on stderr and
exit 2 (usage), 1 (out of memory) or 130 (interrupted), never a traceback; ``explain --json`` of
millions of terms and ``export`` of millions of literal numbers stay within memory; the exported
TensorFlow script of a depthwise conv with unequal strides runs (issue 20)."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from engine import kernels
from engine.base import literal as literal_module
from engine.base.errors import InvalidArgumentError
from engine.base.literal import PACK_ABOVE, literal
from engine.cli import commands, common, explain
from engine.explain.terms import check_index, explain_element
from engine.export.to_numpy import export_script
from engine.export.to_tf import PRELUDE
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from engine.graph.compiler import compile_canvas
from tests.crosscheck_support import crosscheck_cli, framework_python, report
from tests.export_support import assert_bitwise_equal, executor_outputs, run_script

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "assets" / "examples" / "enuspace_style.gbc.json"
BLOCK = "Conv2DBackpropFilter"
HUGE = "9" * 5000  # Python refuses int() of more than 4300 digits
INTERRUPTED = ("gradblocks: interrupted",
               "gradblocks: interrupted (files being written are left as they were)")


def gradblocks(*args: str, cwd: Path = ROOT, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=600, **kwargs)


def one_line(proc: subprocess.CompletedProcess, status: int) -> str:
    """The single stderr line of a command that exited with ``status`` (and printed nothing)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert (proc.returncode, proc.stdout) == (status, ""), proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradblocks"), proc.stderr
    return lines[0]


# -- explain, export, geometry: hostile arguments ------------------------------------------------

@pytest.mark.parametrize("index, message", [
    (f"{HUGE},0,0,0", ("entry 0 is out of range: '999999999999999999999999999999999999... "
                       "(5002 characters) has 5000 digits, too many for any array index or "
                       "count (at most 19)")),
    (f"-{HUGE},0,0,0", f"-{'9' * 26}... (5001 characters) is negative, indices must be >= 0"),
    ("99999999999999999999,0,0,0", "'99999999999999999999' has 20 digits"),
    ("9223372036854775808,0,0,0", "entry 0 is 9223372036854775808, out of range for size 2"),
    ("\u0663,0,0,0", "index '\\u0663,0,0,0': '\\u0663' is not an integer"),  # a non-ASCII digit
    ("0,\x07,0,0", "'\\x07' is not an integer"),  # BEL never reaches the terminal
    ("0x1,0,0,0", "'0x1' is not an integer"),
    ("1e3,0,0,0", "'1e3' is not an integer"),
    ("1_0,0,0,0", "'1_0' is not an integer"),
    ("0,0,0,0,", "expected comma-separated integers such as 0,1,2,3"),
    ("", "expected comma-separated integers such as 0,1,2,3"),
    (",".join(["0"] * 101), "has 101 entries, the output has 4 dimensions (shape [2, 2, 1, 1])"),
    ("0,0,0,0,0", "has 5 entries, the output has 4 dimensions"),
    ("2,0,0,0", "entry 0 is 2, out of range for size 2 (output shape [2, 2, 1, 1])"),
])
def test_a_hostile_explain_index_is_one_line_and_exit_2(index, message):
    assert message in one_line(gradblocks("explain", EXAMPLE, BLOCK, index), 2)


@pytest.mark.parametrize("index, expected", [("0" * 5000 + "1,0,0,0", [1, 0, 0, 0]),
                                             ("-0,+1,0,0", [0, 1, 0, 0]),
                                             ("0 , 1 0 0", [0, 1, 0, 0])])
def test_odd_but_valid_indices_are_read(index, expected):
    proc = gradblocks("explain", EXAMPLE, BLOCK, index, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["index"] == expected


@pytest.mark.parametrize("node, message", [
    (HUGE, (f"no block '{'9' * 56}... (5002 characters) in the canvas (by id or title); its "
            f"conv blocks: {BLOCK} ({BLOCK})")),
    ("\x1b[31mred", "no block '\\x1b[31mred' in the canvas"),
    (f"{BLOCK}.{'p' * 5000}", f"{BLOCK} ({BLOCK}) has no output port 'ppppp"),
])
def test_a_hostile_explain_node_is_one_line_and_exit_2(node, message):
    line = one_line(gradblocks("explain", EXAMPLE, node, "0,0,0,0"), 2)
    assert message in line and len(line) <= common.MAX_LINE


@pytest.mark.parametrize("value, message", [
    (HUGE, "has 5000 digits, too many for any array index or count (at most 19)"),
    ("100001", ("100001 is more than 100000, the most terms the table shows (--json lists "
                "every term)")),
    ("-1", "-1 is negative"),
    ("x", "'x' is not a whole number"),
    ("1e3", "'1e3' is not a whole number"),
    ("", "'' is not a whole number"),
])
def test_a_hostile_limit_is_one_line_and_exit_2(value, message):
    line = one_line(gradblocks("explain", EXAMPLE, BLOCK, "0,0,0,0", "--limit", value), 2)
    assert line.startswith("gradblocks explain: error: argument --limit: ") and message in line


def test_the_largest_limit_is_accepted():
    proc = gradblocks("explain", EXAMPLE, BLOCK, "0,0,0,0", "--limit", str(explain.MAX_LIMIT))
    assert proc.returncode == 0 and proc.stderr == ""
    assert "4 term(s)" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--frame", HUGE], "argument --frame: '9999"),
    (["--frame", "-1"], "argument --frame: -1 is negative"),
    (["--frame", "two"], "argument --frame: 'two' is not a whole number"),
    (["--frame", "99999999999"], f"--frame 99999999999: {BLOCK} ({BLOCK}) has 4 frame(s), 0 to 3"),
])
def test_a_hostile_geometry_frame_is_one_line_and_exit_2(tmp_path, args, message):
    line = one_line(gradblocks("geometry", EXAMPLE, BLOCK, "-o", tmp_path / "g.png", *args), 2)
    assert message in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["-o", ""], "'' is not a file name"),
    (["-o", "/"], "'/' is not a file name"),
    (["-o", "x.py", "--memory-limit-gib", HUGE], "argument --memory-limit-gib: "),
    (["-o", "x.py", "--memory-limit-gib", "nan"], "not a finite number of GiB: 'nan'"),
    (["-o", "x.py", "--to", "tf"], "argument --to: invalid choice: 'tf'"),
])
def test_hostile_export_arguments_are_one_line_and_exit_2(tmp_path, args, message):
    assert message in one_line(gradblocks("export", EXAMPLE, *args, cwd=tmp_path), 2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("index, message", [
    ([10**5000, 0, 0, 0], "entry 0 is a number of about 5001 digits, out of range for size 2"),
    ([-(10**5000), 0, 0, 0], "entry 0 is a negative number of about 5001 digits, indices must"),
    ([10**5000, 0, 0], "index [a number of about 5001 digits, 0, 0] has 3 entries"),
    ([np.uint64(2**64 - 1), 0, 0, 0], "entry 0 is 18446744073709551615, out of range"),
    ([10**5000, "x", 0, 0], "must be integers"),
])
def test_the_api_index_check_names_huge_entries(index, message):
    """Python cannot print an int of more than 4300 digits: the message says how long it is."""
    with pytest.raises(InvalidArgumentError) as err:
        check_index(index, (2, 2, 1, 1))
    assert message in str(err.value)


# -- memory --------------------------------------------------------------------------------------

def _filter_grad_canvas(path: Path, batch: int, size: int) -> Path:
    """dw[0,0,0,0] of a 1x1 VALID filter gradient: a sum of batch*size*size terms of ones."""
    c = Canvas()
    for name in ("x", "dy"):
        c.add_node("Tensor", attrs={"fill": "ones", "shape": [batch, size, size, 1]}, id=name)
    c.add_node("IntVector", attrs={"values": [1, 1, 1, 1]}, id="sizes")
    c.add_node("Conv2DBackpropFilter", id="dw", attrs={"padding": "VALID"})
    for src, port in (("x", "input"), ("sizes", "filter_sizes"), ("dy", "out_backprop")):
        c.connect((src, "output"), ("dw", port))
    save_canvas(c, path)
    return path


def test_json_written_in_chunks_is_exactly_json_dumps(monkeypatch):
    """Chunks of 3 terms (not a divisor of the count), NaN and infinite products, an odd port
    text: the streamed text is json.dumps of the whole object, byte for byte."""
    monkeypatch.setattr(explain, "CHUNK_TERMS", 3)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 6, 3))
    x[0, 1, 1, 0], x[1, 2, 2, 1], x[0, 3, 3, 2] = np.nan, np.inf, -np.inf
    cases = [("Conv2D", {"input": x, "filter": rng.standard_normal((3, 3, 3, 4))}, (0, 1, 1, 1)),
             ("Conv2DBackpropFilter", {"input": x, "filter_sizes": np.array([3, 3, 3, 4]),
                                       "out_backprop": rng.standard_normal((2, 4, 4, 4))},
              (1, 1, 0, 2)),
             # input row 1 is read by no output row at stride 3: a sum of no terms
             ("Conv2DBackpropInput", {"input_sizes": np.array([1, 6, 6, 1]),
                                      "filter": np.ones((1, 1, 1, 1)),
                                      "out_backprop": np.ones((1, 2, 2, 1))}, (0, 1, 0, 0))]
    sizes = []
    for type_id, inputs, index in cases:
        attrs = {"padding": "VALID", "strides": [1, 3, 3, 1] if "input_sizes" in inputs else
                 [1, 1, 1, 1]}
        e = explain_element(type_id, attrs, inputs, index)
        out = io.StringIO()
        explain.write_json(out, 'n"\u00e9', "output", math.nan, e)
        expected = json.dumps(explain.as_json('n"\u00e9', "output", math.nan, e),
                              allow_nan=False)
        assert out.getvalue() == expected + "\n"
        sizes.append(e.terms)
    assert sizes == [27, 32, 0]


def _limited(args: list[str], extra_bytes: int, **kwargs) -> subprocess.Popen:
    """``gradblocks ARGS`` whose address space may grow ``extra_bytes`` beyond what it has once
    its modules are loaded (the NumPy kernels: numba maps more address space as it loads)."""
    code = ("import resource, sys\nimport engine.cli\n"
            "vm = next(int(v.split()[1]) * 1024 for v in open('/proc/self/status') "
            "if v.startswith('VmSize:'))\n"
            f"resource.setrlimit(resource.RLIMIT_AS, (vm + {extra_bytes}, "
            "resource.RLIM_INFINITY))\n"
            "sys.exit(engine.cli.main(sys.argv[1:]))\n")
    env = {**os.environ, "GRADBLOCKS_KERNELS": "numpy"}
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, env=env, **kwargs)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_explain_json_of_a_million_terms_fits_where_one_string_would_not(tmp_path):
    """2**20 terms in 512 MiB more than start-up: as one list of dicts and one string the JSON
    took about 1.2 GB (MemoryError, a traceback); written in chunks it needs about 150 MB."""
    canvas = _filter_grad_canvas(tmp_path / "c.gbc.json", 4, 512)
    out = tmp_path / "out.json"
    with out.open("wb") as stdout:
        proc = _limited(["explain", str(canvas), "dw", "0,0,0,0", "--json"], 512 << 20,
                        stdout=stdout, stderr=subprocess.PIPE)
        err = proc.communicate(timeout=900)[1].decode()
    assert proc.returncode == 0, err
    assert err == ""
    data = out.read_bytes()
    assert data.startswith(b'{"node": "dw", "port": "output", "index": [0, 0, 0, 0], "value": '
                           b'1048576.0, "sum": 1048576.0, "padding_terms": 0, "terms": [{')
    assert data.endswith(b'{"port": "out_backprop", "index": [3, 511, 511, 0]}], '
                         b'"product": 1.0}]}\n')
    assert data.count(b'"factors"') == 2**20 and data.count(b"\n") == 1


def test_explain_refuses_an_element_whose_terms_exceed_the_memory_limit(tmp_path):
    canvas = _filter_grad_canvas(tmp_path / "c.gbc.json", 1, 256)
    line = one_line(gradblocks("explain", canvas, "dw", "0,0,0,0", "--memory-limit-gib", "0.005"),
                    2)  # the run itself needs 3.5 MiB
    assert line == ("gradblocks: dw (dw).output[0, 0, 0, 0] is a sum of 65536 "
                    "terms: listing them needs about 8.0 MiB, more than the memory limit (5.1 "
                    "MiB; --memory-limit-gib raises it)")
    assert gradblocks("explain", canvas, "dw", "0,0,0,0", "--memory-limit-gib", "0.01",
                      "--limit", "0").returncode == 0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_running_out_of_memory_is_one_line_and_exit_1(tmp_path):
    """A 45 MB canvas read with 64 MiB to spare: MemoryError while parsing it."""
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    node = next(n for n in doc["nodes"] if n["type"] == "Tensor")
    node["attrs"]["values"] = np.random.default_rng(0).standard_normal((1, 500, 500, 4)).tolist()
    big = tmp_path / "big.gbc.json"
    big.write_text(json.dumps(doc), encoding="utf-8")
    for command, doing in (("check", "checking"), ("export", "exporting")):
        extra = ["-o", str(tmp_path / "s.py")] if command == "export" else []
        proc = _limited([command, str(big), *extra], 64 << 20, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=600)
        assert (proc.returncode, out) == (1, ""), err
        suffix = " (files being written are left as they were)" if extra else ""
        assert err == f"gradblocks: out of memory while {doing} {str(big)!r}{suffix}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.gbc.json"]


@pytest.mark.parametrize("argv, module, name, doing", [
    (["check", "c.gbc.json"], "engine.cli.canvas_commands", "cmd_check", "checking 'c.gbc.json'"),
    (["run", "c.gbc.json", "--out", "o.npz"], "engine.cli.canvas_commands", "cmd_run",
     "running 'c.gbc.json' (files being written are left as they were)"),
    (["export", "c.gbc.json", "-o", "s.py"], "engine.cli.canvas_commands", "cmd_export",
     "exporting 'c.gbc.json' (files being written are left as they were)"),
    (["explain", "c.gbc.json", "n", "0,0,0,0"], "engine.cli.explain", "cmd_explain",
     "explaining 'c.gbc.json'"),
    (["crosscheck", "c.gbc.json"], "engine.cli.crosscheck", "cmd_crosscheck",
     "cross-checking 'c.gbc.json'"),
    (["geometry", "c.gbc.json", "n", "-o", "g.png"], "engine.cli.geometry", "cmd_geometry",
     "drawing the geometry of 'c.gbc.json' (files being written are left as they were)"),
    (["import", "m.onnx", "--list"], "engine.cli.import_model", "cmd_import", "importing 'm.onnx'"),
])
def test_a_memory_error_anywhere_in_a_subcommand_is_one_line(capsys, monkeypatch, argv, module,
                                                             name, doing):
    def exhausted(*_args):
        raise MemoryError

    monkeypatch.setattr(f"{module}.{name}", exhausted)
    assert commands.main(argv) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"gradblocks: out of memory while {doing}\n")


def test_a_closed_stdout_ends_the_command_quietly():
    """``gradblocks check C | head -0``: the table cannot be written; no BrokenPipeError."""
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "check", str(EXAMPLE)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=300), err) == (1, "")


# -- literal values in an exported script --------------------------------------------------------

def _bits(x: int) -> float:
    return struct.unpack("<d", x.to_bytes(8, "little"))[0]


def _same(a, b) -> bool:
    """Equal nests, floats compared by their bits, types included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return struct.pack("<d", a) == struct.pack("<d", b) if isinstance(a, float) else a == b


def test_large_number_lists_are_packed_and_rebuilt_bit_for_bit():
    rng = np.random.default_rng(2)
    floats = rng.standard_normal((2, 3, 1000)).tolist()
    floats[0][0][:4] = [_bits(0x7FF8000000000123), -0.0, math.inf, -math.nan]
    ints = rng.integers(-(2**63), 2**63 - 1, (5000,), dtype=np.int64).tolist()
    ints[:2] = [2**63 - 1, -(2**63)]
    for value in (floats, ints, [[1.5] * (PACK_ABOVE + 1)]):
        text = literal(value)
        assert "frombuffer" in text and text.isascii() and "\n" not in text
        assert _same(eval(text, {}), value)


@pytest.mark.parametrize("value", [
    [1.0] * PACK_ABOVE,  # small enough to read
    [1.0] * 4000 + [1] * 1000,  # a float among ints: 1 and 1.0 stay what they are
    [2**63] + [1] * 5000,  # beyond int64
    [True] * 5000,
    [(1.0, 2.0)] * 3000,  # tuples stay tuples
    [[1.0] * 3000, [2.0] * 3001],  # ragged
    [np.float64(1.0)] * 5000,
])
def test_other_lists_are_written_out(value):
    text = literal(value)
    assert text.startswith("[")  # not packed
    assert _same(eval(text, {}), [v.item() if isinstance(v, np.generic) else v for v in value])


def _values_plan(shape: tuple[int, ...]):
    c = Canvas()
    values = np.random.default_rng(3).standard_normal(shape)
    values.flat[:3] = [_bits(0x7FF8000000000123), -0.0, np.inf]
    c.add_node("Tensor", attrs={"fill": "values", "values": values.tolist(), "dtype": "float64"},
               id="x")
    c.add_node("Tensor", attrs={"fill": "ones", "shape": [2, 2, shape[-1], 1],
                                "dtype": "float64"},
               id="w")
    c.add_node("Conv2D", id="conv", attrs={"padding": "SAME"})
    c.connect(("x", "output"), ("conv", "input"))
    c.connect(("w", "output"), ("conv", "filter"))
    return compile_canvas(c)


def test_export_of_many_literal_numbers_parses_in_little_memory(monkeypatch):
    """3 million numbers written out took more than 4 GiB to parse (ast.parse, at export and
    when the script runs); packed, a script costs about 54 bytes per number to build."""
    n = 100_000
    plan = _values_plan((1, 100, 250, 4))
    assert not plan.errors

    def peak_per_number() -> float:
        tracemalloc.start()
        try:
            export_script(plan)
            return tracemalloc.get_traced_memory()[1] / n
        finally:
            tracemalloc.stop()

    packed = peak_per_number()
    monkeypatch.setattr(literal_module, "PACK_ABOVE", 10**12)
    written_out = peak_per_number()
    assert packed < 100
    assert written_out > 1000  # the measure sees the difference


def test_a_script_with_packed_values_reproduces_the_run_bit_for_bit(tmp_path):
    plan = _values_plan((1, 40, 40, 3))
    script = tmp_path / "s.py"
    script.write_text(export_script(plan), encoding="utf-8")
    assert "frombuffer" in script.read_text(encoding="utf-8")
    run_script(script, tmp_path / "o.npz")
    assert_bitwise_equal(tmp_path / "o.npz", executor_outputs(plan))


# -- Ctrl+C --------------------------------------------------------------------------------------

_PROJECT = tuple(str(ROOT / d) + os.sep for d in ("engine", "app", "blocks"))
#: What runs before engine/cli/commands.py's first line: the engine package and its process
#: settings, and the console script's app.launch (with the app package, which imports engine).
_BEFORE_CLI = tuple(str(ROOT / "engine" / f) for f in ("__init__.py", "base/__init__.py",
                                                       "base/runtime.py", "cli/__init__.py")) \
    + tuple(str(ROOT / "app" / f) for f in ("__init__.py", "__main__.py", "launch.py"))


def _before_gradblocks(err: str) -> bool:
    """Whether a traceback's frames are all before engine/cli/commands.py starts: the interpreter's
    own start-up (site, .pth files such as an editable install's finder) and the engine package."""
    assert all(os.path.isfile(f) for f in _BEFORE_CLI), _BEFORE_CLI  # kept true by moves
    files = [f for f in re.findall(r'File "([^"]+)"', err) if f.startswith(_PROJECT)]
    return all(f in _BEFORE_CLI for f in files)


def _interrupt(command: list[str], delays: list[float], env: dict, cwd: Path) -> Counter:
    """Start ``command`` and send SIGINT after each delay; check each outcome, count them."""
    seen: Counter = Counter()
    for delay in delays:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=300)
        lines = err.splitlines()
        if "Traceback" in err or "Exception ignored" in err:
            assert _before_gradblocks(err), err
            seen["interrupted before gradblocks' code ran, Python printed a traceback"] += 1
        elif proc.returncode == -signal.SIGINT:
            # the interpreter had no handler yet (starting) or any more (its last moment, the
            # command's output complete): the signal ended it, which a shell shows as 130
            seen["ended by the signal outside Python's handling"] += 1
        elif proc.returncode == commands.EXIT_INTERRUPTED:
            assert sum(line in INTERRUPTED for line in lines) == 1, err
            seen["gradblocks: interrupted"] += 1
        else:
            assert proc.returncode in (0, 2) and "interrupted" not in err, err
            seen[f"finished first, exit {proc.returncode}"] += 1
    return seen


def _spread(command: list[str], env: dict, cwd: Path, count: int, limit: float) -> list[float]:
    """``count`` delays from 0 to the time ``command`` takes uninterrupted (at most ``limit``)."""
    start = time.monotonic()
    subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=600, check=False)
    span = min(time.monotonic() - start, limit)
    return [span * k / (count - 1) for k in range(count)]


def _gradblocks_script() -> str | None:
    return shutil.which("gradblocks", path=str(Path(sys.executable).parent))


def test_ctrl_c_while_the_handlers_switch_back_is_one_line(monkeypatch, capfd):
    """A SIGINT that lands just as a finished command hands SIGINT back to the quick exit (the
    subcommand's handler raising KeyboardInterrupt inside that switch, which CI's Ctrl+C fuzz
    once caught as a traceback): one line and exit 130, the quick exit's answer."""
    real = commands._set_sigint

    def switch(handler: object) -> object:
        if handler is commands._quit_now and commands._signal.getsignal(
                commands._signal.SIGINT) is commands._raise_interrupted:
            raise KeyboardInterrupt  # the subcommand's handler fired inside the switch
        return real(handler)

    def exit_(status: int) -> None:
        raise SystemExit(status)

    monkeypatch.setattr(commands, "_set_sigint", switch)
    monkeypatch.setattr(commands.os, "_exit", exit_)
    try:
        with pytest.raises(SystemExit) as ended:
            commands.main(["check", str(EXAMPLE)])
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert ended.value.code == commands.EXIT_INTERRUPTED
    assert capfd.readouterr().err.splitlines()[-1] == "gradblocks: interrupted"


@pytest.mark.parametrize("how, args", [
    ("python -m engine.cli", ["check", "missing.gbc.json"]),
    ("gradblocks", ["check", "missing.gbc.json"]),
    ("python -m engine.cli", ["run", str(EXAMPLE), "--out", "r.npz"]),
    ("gradblocks", ["explain", str(EXAMPLE), BLOCK, "0,1,0,0", "--json"]),
])
def test_ctrl_c_at_any_moment_of_a_command_is_one_line(tmp_path, how, args):
    """SIGINT after delays spread over the whole command (imports included): exit 130 and one
    line, or the command finished first; a traceback only if the signal came before
    engine/cli/commands.py started (the interpreter's start-up and ``import engine``)."""
    script = _gradblocks_script()
    if how == "gradblocks" and script is None:
        pytest.skip("the gradblocks console script is not installed next to this python")
    command = [script] if how == "gradblocks" else [sys.executable, "-m", "engine.cli"]
    command += args
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    delays = _spread(command, env, tmp_path, 8, 5.0)
    seen = _interrupt(command, delays + delays, env, tmp_path)
    print(f"\n{' '.join(args[:1])} via {how}, delays 0-{delays[-1]:.2f} s: {dict(seen)}")
    assert seen["gradblocks: interrupted"] > 0
    if (tmp_path / "r.npz").exists():  # written whole, never half
        with np.load(tmp_path / "r.npz") as data:
            assert data.files
    assert [p.name for p in tmp_path.iterdir() if p.name != "r.npz"] == []


def _app_env(tmp_path: Path) -> dict:
    home = tmp_path / "home"
    return {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
            "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("args", [[], ["--run", "--screenshot", "shot.png"]])
def test_ctrl_c_while_the_app_starts_is_one_line(tmp_path, args):
    """``gradblocks [CANVAS]``: interrupted while Qt, the window and the canvas load."""
    pytest.importorskip("PySide6")
    command = [sys.executable, "-m", "app", str(EXAMPLE), *args]
    env = _app_env(tmp_path)
    # the app alone never ends: spread over the screenshot's time
    delays = _spread([*command[:4], "--run", "--screenshot", "shot.png"], env, tmp_path, 8, 6.0)
    seen = _interrupt(command, delays, env, tmp_path)
    print(f"\napp {args}, delays 0-{delays[-1]:.2f} s: {dict(seen)}")
    assert seen["gradblocks: interrupted"] > 0


_SPY = """
import contextlib, sys
import app.launch, app.startup
ctrl_c_closes = app.startup.ctrl_c_closes

@contextlib.contextmanager
def announced(window):
    with ctrl_c_closes(window) as interrupted:
        print("event loop", flush=True)
        yield interrupted

app.startup.ctrl_c_closes = announced
sys.exit(app.launch.main(sys.argv[1:]))
"""


def test_ctrl_c_in_the_running_app_closes_it_with_one_line(tmp_path):
    """Once Qt's loop waits for events no Python runs: the signal must still wake it."""
    pytest.importorskip("PySide6")
    proc = subprocess.Popen([sys.executable, "-c", _SPY, str(EXAMPLE)], cwd=tmp_path,
                            env=_app_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "event loop\n"
        time.sleep(0.5)  # idle in the loop
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == commands.EXIT_INTERRUPTED, err
    assert "Traceback" not in err and err.count("gradblocks: interrupted\n") == 1


def test_ctrl_c_closes_as_the_close_button_does(qtbot, tmp_path):
    """A cancelled save prompt keeps the app running (and the exit status 0); the handlers in
    place before are back afterwards."""
    from app.startup import ctrl_c_closes
    from tests.app_support import close_window, make_window

    window = make_window(qtbot, tmp_path)
    before = signal.getsignal(signal.SIGINT)
    with (mock.patch.object(window.files, "maybe_save", return_value=False),
          ctrl_c_closes(window) as interrupted):
        signal.raise_signal(signal.SIGINT)
        qtbot.wait(200)
        assert window.isVisible() and not interrupted()
    with ctrl_c_closes(window) as interrupted:
        window.doc.undo_stack.setClean()
        signal.raise_signal(signal.SIGINT)
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
        assert interrupted()
    assert signal.getsignal(signal.SIGINT) is before
    close_window(window)


# -- the TensorFlow script of a depthwise conv with unequal strides ------------------------------

def _unequal_strides_canvas(path: Path, data_format: str = "NHWC") -> Path:
    """Float64 depthwise (multiplier 2) with strides 1 x 2 and dilations 2 x 1, SAME padding, its
    two gradients and both check blocks."""
    c = Canvas()
    nhwc = data_format == "NHWC"
    x_shape = [2, 9, 8, 3] if nhwc else [2, 3, 9, 8]
    conv = {"strides": [1, 1, 2, 1] if nhwc else [1, 1, 1, 2], "padding": "SAME",
            "data_format": data_format, "dilations": [1, 2, 1, 1] if nhwc else [1, 1, 2, 1]}
    for name, shape, seed in (("x", x_shape, 1), ("w", [3, 2, 3, 2], 2)):
        c.add_node("Tensor", attrs={"shape": shape, "dtype": "float64", "seed": seed,
                                    "fill": "random_normal"}, id=name)
    c.add_node("DepthwiseConv2D", attrs=conv, id="dconv")
    c.add_node("IntVector", attrs={"values": [3, 2, 3, 2]}, id="w_sizes")
    c.add_node("IntVector", attrs={"values": x_shape}, id="x_sizes")
    c.add_node("DepthwiseBackpropFilter", attrs=conv, id="ddw")
    c.add_node("DepthwiseBackpropInput", attrs=conv, id="ddx")
    c.add_node("AdjointCheck", attrs={"op": "DepthwiseConv2dNative", **conv}, id="adj")
    c.add_node("GradCheck", attrs={"op": "DepthwiseConv2dNative", **conv, "wrt": "filter",
                                   "samples": 4, "seed": 1}, id="gc")
    wires = [("x", "dconv", "input"), ("w", "dconv", "filter"), ("x", "ddw", "input"),
             ("w_sizes", "ddw", "filter_sizes"), ("dconv", "ddw", "out_backprop"),
             ("x_sizes", "ddx", "input_sizes"), ("w", "ddx", "filter"),
             ("dconv", "ddx", "out_backprop"), ("x", "adj", "input"), ("w", "adj", "filter"),
             ("dconv", "adj", "out_backprop"), ("x", "gc", "input"), ("w", "gc", "filter"),
             ("dconv", "gc", "out_backprop"), ("ddw", "gc", "gradient")]
    for src, dst, port in wires:
        c.connect((src, "output"), (dst, port))
    save_canvas(c, path)
    return path


def _prelude_helpers(monkeypatch) -> dict:
    """The TensorFlow prelude's functions, TensorFlow itself stubbed (only dicts are used)."""
    monkeypatch.setitem(sys.modules, "tensorflow", mock.MagicMock())
    namespace: dict = {"np": np}
    exec(PRELUDE, namespace)  # noqa: S102 - our own fixed prelude text
    return namespace


def test_the_tensorflow_script_runs_unequal_strides_as_the_grouped_conv(tmp_path, monkeypatch):
    """TensorFlow's CPU depthwise kernels refuse unequal row and column strides (every dtype);
    the script runs such a conv as the grouped Conv2D it is. The exported geometry has unequal
    strides, the prelude rewrites it, and the rewritten conv is the same sum (GradBlocks' own
    kernels, both ways)."""
    canvas = _unequal_strides_canvas(tmp_path / "c.gbc.json")
    script = tmp_path / "s.py"
    proc = gradblocks("export", canvas, "--to", "tensorflow", "-o", script)
    assert proc.returncode == 0, proc.stderr
    text = script.read_text(encoding="utf-8")
    geometries = [eval(m, {}) for m in re.findall(r"(\{'op': .*?\})\)$", text, re.MULTILINE)]
    assert sorted(g["op"] for g in geometries) == ["filter", "forward", "input"]
    helpers = _prelude_helpers(monkeypatch)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 9, 8, 3)), rng.standard_normal((3, 2, 3, 2))
    for g in geometries:
        assert g["depthwise"] and g["strides"] == [1, 2] and helpers["_unequal_strides"](g)
        grouped = helpers["_grouped"](g)
        assert grouped == {**g, "depthwise": False, "groups": 3, "filter_shape": [3, 2, 1, 6]}
        assert not helpers["_unequal_strides"](grouped)
        assert not helpers["_unequal_strides"]({**g, "strides": [2, 2]})
    attrs = {"strides": [1, 1, 2, 1], "padding": "SAME", "dilations": [1, 2, 1, 1]}
    wg = w.reshape(3, 2, 1, 6)
    y = kernels.depthwise_conv2d_native(x, w, **attrs)
    np.testing.assert_allclose(kernels.conv2d(x, wg, **attrs), y, rtol=1e-13, atol=1e-13)
    dy = rng.standard_normal(y.shape)
    np.testing.assert_allclose(
        kernels.conv2d_backprop_filter(x, [3, 2, 1, 6], dy, **attrs).reshape(w.shape),
        kernels.depthwise_conv2d_native_backprop_filter(x, [3, 2, 3, 2], dy, **attrs),
        rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(
        kernels.conv2d_backprop_input(list(x.shape), wg, dy, **attrs),
        kernels.depthwise_conv2d_native_backprop_input(list(x.shape), w, dy, **attrs),
        rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_tensorflow_runs_a_depthwise_conv_with_unequal_strides(tmp_path, data_format):
    """Was: InvalidArgumentError "Current implementation only supports equal length strides in
    the row and column dimensions" from DepthwiseConv2dNative, a traceback."""
    python = framework_python("tensorflow")
    if python is None:
        pytest.skip("tensorflow is not installed (set GRADBLOCKS_TF_PYTHON to a python that "
                    "has it)")
    canvas = _unequal_strides_canvas(tmp_path / "c.gbc.json", data_format)
    proc = crosscheck_cli(canvas, "--with", "tensorflow", "--python", python)
    data = report(proc)
    assert data["frameworks"] == {"tensorflow": "ran"}, proc.stderr
    assert [r["output"] for r in data["rows"] if not r["agree"]] == []
    assert proc.returncode == 0
