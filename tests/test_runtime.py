"""engine.base.runtime: the process settings the kernels' speed depends on are in effect."""

import os
import subprocess
import sys


def test_importing_engine_sets_blas_idle_and_malloc_reuse():
    code = ("import os, engine, engine.base.runtime as r\n"
            "print(os.environ['OPENBLAS_THREAD_TIMEOUT'], r._tune_malloc())")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    expected_malloc = "True" if sys.platform.startswith("linux") else "False"
    assert out.stdout.split() == ["4", expected_malloc]


def test_a_users_blas_setting_wins():
    code = "import os, engine\nprint(os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "OPENBLAS_THREAD_TIMEOUT": "10"}, check=True)
    assert out.stdout.strip() == "10"
