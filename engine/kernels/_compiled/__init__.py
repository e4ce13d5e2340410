"""The compiled (numba) twins of the NumPy paths: private, reached only through
:mod:`engine.kernels` (the ops) and :mod:`engine.kernels.accel` (whether they run)."""
