"""Attribute values as text: what the user typed parsed into a value (raising
InvalidArgumentError naming the attribute and what was expected) and values written back as
the fields show them. Never evaluates code."""

from __future__ import annotations

import ast
import json

from engine.base.errors import InvalidArgumentError


def parse_int(attr: str, text: str) -> int:
    text = text.strip()
    try:
        return int(text, 10)
    except ValueError:
        raise InvalidArgumentError(
            f"{attr} must be an integer, got {text!r}" if text
            else f"{attr} must be an integer, got an empty field") from None


def parse_float(attr: str, text: str) -> float:
    """'1e-3', '0.001', '2' -> a float; anything else (an empty field included) is a message
    naming the attribute. Range and finiteness are the spec's to check."""
    text = text.strip()
    if not text:
        raise InvalidArgumentError(f"{attr} must be a number (e.g. 0.001 or 1e-3), got an "
                                   "empty field")
    try:
        return float(text)
    except ValueError:
        raise InvalidArgumentError(
            f"{attr} must be a number (e.g. 0.001 or 1e-3), got {text[:40]!r}") from None


def parse_int_list(attr: str, text: str) -> list[int]:
    """'1, 2, 3' or '[1, 2, 3]' -> [1, 2, 3]."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    if not body.strip():
        return []
    parts = [p for p in body.replace(";", ",").replace(",", " ").split()]
    out = []
    for i, part in enumerate(parts):
        try:
            out.append(int(part, 10))
        except ValueError:
            raise InvalidArgumentError(
                f"{attr}[{i}] must be an integer, got {part!r}") from None
    return out


def parse_literal(attr: str, text: str):
    """A JSON or Python literal (numbers, nested lists); never evaluates code."""
    body = text.strip()
    if not body:
        raise InvalidArgumentError(f"{attr} must be a list of numbers (e.g. [[1, 2], [3, 4]]), "
                                   "got an empty field")
    try:
        return json.loads(body)
    except ValueError:
        pass
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise InvalidArgumentError(
            f"{attr} must be a literal list of numbers, got {body[:40]!r} "
            f"({type(exc).__name__}: {exc})") from None


def list_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def literal_text(value) -> str:
    if value is None:
        return ""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text

