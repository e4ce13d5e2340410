"""Padding and the conv shape rules as small pure functions."""
