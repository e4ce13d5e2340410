"""What a tensor looks like: statistics, slices, marks, thumbnails, colormaps."""
