"""Benchmarks: ``python -m engine.bench`` (the conv kernels, :mod:`.kernels`),
``python -m engine.bench.explain | .graph | .memory | .startup``."""
