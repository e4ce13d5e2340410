"""Explain an element (link, panel, terms, picture, shot) and the geometry
pictures of a conv block (geometry_view)."""
