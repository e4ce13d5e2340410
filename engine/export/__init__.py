"""Scripts from a canvas (to_numpy, to_tf, to_torch, to_jax; frameworks and conv
hold what the framework scripts share) and the cross-check that runs them."""
