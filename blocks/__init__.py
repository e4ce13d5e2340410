"""Declarative block specs: one spec per block type, no Qt."""
