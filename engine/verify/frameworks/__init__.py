"""Frameworks as ready targets: ``gradblocks verify tensorflow --op Conv2D`` (also ``jax``,
``onnxruntime``, ``onnx.reference``). :mod:`.registry` names each framework, its ops and what it
documents as unsupported, and imports no framework; one adapter module per framework
(``tensorflow_ops``, ``jax_ops``, ``onnxruntime_ops``, ``onnx_reference_ops``, the ONNX models
in ``onnx_models``) is the glue a user would write, imported only in the worker processes.
Each adapter function is named after the tf.raw_ops op it implements, takes TF's keyword
arguments and returns a NumPy array; a documented refusal raises ``NotImplementedError``
(the ``unsupported`` verdict).
"""
