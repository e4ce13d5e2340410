"""GradBlocks engine: Qt-free kernels, shape rules, canvas model, compiler, executor and CLI."""

from engine.runtime import configure as _configure

_configure()
