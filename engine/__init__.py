"""GradBlocks engine: Qt-free kernels, shape rules, canvas model, compiler, executor and CLI."""

import os

# The kernels run BLAS both ways: OpenBLAS's own threads for wide products, and one BLAS thread
# per core-sized range of positions for thin ones (engine.parallel). OpenBLAS's idle threads
# spin for a while after each threaded call and would then steal those cores (measured: a
# filter gradient right after an input gradient took 25 ms instead of 15). This makes them
# sleep at once; it only takes effect if set before NumPy loads OpenBLAS, and a user's own
# setting wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
