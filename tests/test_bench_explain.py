"""The explain benchmark runs every op on its layer (timing itself is never asserted)."""

import io

from engine.bench import explain


def test_every_op_is_explained_with_its_term_count():
    table = explain.rows(batch=2, repeat=1, size=5, depth=4)
    assert table[0] == ["op", "terms", "explain ms", "sum ms", "json ms"]
    terms = {row[0]: int(row[1]) for row in table[1:]}
    # 3x3 taps x 4 channels; depthwise 3x3 taps; the centre tap's gradient: 2 x 5 x 5 positions
    assert terms == {"Conv2D": 36, "DepthwiseConv2D": 9, "Conv2DBackpropFilter": 50,
                     "DepthwiseBackpropFilter": 50, "Conv2DBackpropInput": 36,
                     "DepthwiseBackpropInput": 9}


def test_main_prints_the_table():
    # its own stream: in one full CI run sys.stdout was not capsys's here (cause not found)
    out = io.StringIO()
    assert explain.main(["--batch", "1", "--repeat", "1"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["op", "terms", "explain", "ms", "sum", "ms", "json", "ms"]
    assert len(lines) == 7
