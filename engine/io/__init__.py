"""Arrays, images and files in and out; models/ reads conv layers from model files."""
