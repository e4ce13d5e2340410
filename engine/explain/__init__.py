"""The terms of one output element (terms), reverse lookups (reverse), and the
conv's geometry (geometry) and its pictures (geometry_render)."""
