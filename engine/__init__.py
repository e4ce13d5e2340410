"""GradBlocks engine: Qt-free kernels, shape rules, canvas model, compiler, executor and CLI."""
