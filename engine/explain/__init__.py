"""The terms of one output element (terms, over element_index: an index checked, the op's
geometry), reverse lookups (reverse), and the conv's geometry (geometry) and its pictures
(geometry_render); the layers are the ``explain`` contract in ``pyproject.toml``."""
