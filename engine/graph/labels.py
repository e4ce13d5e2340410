"""How a person reads a block reference: its title, made unambiguous.

Messages, logs, tables and results files name blocks by title, the text the user gave them. A
title two blocks share is followed by the block's id in parentheses (``dy (tensor_2)``), and a
block without a title is named by its id, so every label names exactly one block. Ids stay
where machines read (JSON paths, ``--select``, the data behind a log entry).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from engine.graph.canvas import Canvas


def labels_from_titles(titles: Mapping[str, str]) -> dict[str, str]:
    """``{node_id: label}`` for ``{node_id: title}``: the title, ``title (id)`` when another
    node has the same title, the id when the title is empty or blank."""
    counts = Counter(title.strip() for title in titles.values())
    out = {}
    for node_id, title in titles.items():
        text = title.strip()
        if not text:
            out[node_id] = node_id
        elif counts[text] > 1 and text != node_id:
            out[node_id] = f"{text} ({node_id})"
        else:
            out[node_id] = text
    return out


def block_labels(canvas: Canvas) -> dict[str, str]:
    """The label of every node of ``canvas`` (see :func:`labels_from_titles`)."""
    return labels_from_titles({node_id: node.title for node_id, node in canvas.nodes.items()})


def label_list(labels: Mapping[str, str], node_ids: Iterable[str]) -> str:
    """``"a, b"``: the labels of ``node_ids`` (the id itself for a node no longer known)."""
    return ", ".join(labels.get(n, n) for n in node_ids)
