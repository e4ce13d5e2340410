"""The names results are stored under: ``gradblocks run --out`` keys and an exported script's.

- A canvas with Output blocks stores each Output's result under its ``name`` (the attribute a
  spec names in :attr:`blocks.spec.BlockSpec.result_name`) and nothing else.
- A canvas without Output blocks stores every block output under ``<label>.<port>``, or
  ``<label>`` for a block with one output, where the label is the block's title
  (:mod:`engine.graph.labels`: ``title (id)`` when titles collide). ``/`` and ``\\`` in a title
  become ``_``; a key that still collides gets `` #2``, `` #3``... in step order. Never the id
  alone.

A result name follows :func:`result_name_problem`: a .npz file is a zip of ``<name>.npy``
members, and unzip tools create the member paths on disk, so a name must be safe as one file
name: non-empty, at most 200 characters, no ``/`` or ``\\``, no control character, no
leading or trailing space, and not ``.`` or ``..``.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.base.names import shown, text_problem

PortKey = tuple[str, str]

RULE = ("a result name must be non-empty, without '/' or '\\', control characters or leading "
        "or trailing spaces, and not '.' or '..' (it becomes a file name inside the .npz)")


def result_name_problem(value: object, what: str = "name") -> str | None:
    """Why ``value`` cannot be a result name (None when it can)."""
    problem = text_problem(value, what)
    if problem:
        return problem
    assert isinstance(value, str)
    if not value:
        return f"{what} is empty: {RULE}"
    bad = next((ch for ch in value if ch in "/\\"), None)
    if bad is not None:
        return f"{what} {shown(value)} contains {shown(bad)}: {RULE}"
    if value != value.strip():
        return f"{what} {shown(value)} starts or ends with a space: {RULE}"
    if value in (".", ".."):
        return f"{what} {shown(value)} is not allowed: {RULE}"
    return None


def _safe(label: str) -> str:
    return label.replace("/", "_").replace("\\", "_")


def result_keys(steps: list, labels: Mapping[str, str]) -> dict[PortKey, str]:
    """``{(node_id, port): key}`` for the outputs of ``steps`` (a plan's steps, in order) that
    are stored, by the rule in the module docstring; ``labels`` maps node ids to labels."""
    named = [s for s in steps if s.spec.result_name]
    if named:
        return {(s.node_id, s.spec.output_names()[0]): s.attrs[s.spec.result_name]
                for s in named}
    keys: dict[PortKey, str] = {}
    taken: set[str] = set()
    for step in steps:
        ports = step.spec.output_names()
        base = _safe(labels.get(step.node_id, step.node_id))
        if base in (".", ".."):
            base = step.node_id
        for port in ports:
            key = base if len(ports) == 1 else f"{base}.{port}"
            unique, n = key, 1
            while unique in taken:
                n += 1
                unique = f"{key} #{n}"
            taken.add(unique)
            keys[(step.node_id, port)] = unique
    return keys
