"""Conv layers read from ONNX, Keras and weights files, translated to TensorFlow's
conv attributes (model_import)."""
