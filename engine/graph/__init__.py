"""The canvas model and its run: canvas (JSON, validated) -> compiler (plan) -> executor
(results), plus run budgets, labels, result names, reports and layer canvases."""
