"""The tensor viewer: its window (tensor_viewer), the dock that holds it, and its
parts (image, table, histogram, stats line, controls, pictures, export)."""
