"""Port kinds: what each input takes and output gives, and which blocks fit a dropped wire."""

from blocks.port_kinds import PORT_KINDS, fits, fitting_inputs, fitting_outputs, tensor_kind
from blocks.registry import REGISTRY, get_spec
from blocks.spec import TensorSpec
from engine.graph.compiler import compile_canvas
from tests.app_support import grad_canvas


def test_every_port_declares_a_known_kind():
    for spec in REGISTRY.values():
        for port in spec.inputs + spec.outputs:
            assert port.kind in PORT_KINDS, (spec.type_id, port.name, port.kind)


def test_declared_output_kinds_match_the_inferred_tensors():
    c = grad_canvas()
    c.add_node("ShapeOf", id="shape")
    c.connect(("x", "output"), ("shape", "input"))
    c.add_node("Compare", id="cmp")
    c.connect(("grad", "output"), ("cmp", "a"))
    c.connect(("grad", "output"), ("cmp", "b"))
    plan = compile_canvas(c)
    assert not plan.errors
    for (nid, port), ts in plan.specs.items():
        declared = next(p.kind for p in get_spec(c.nodes[nid].type).outputs if p.name == port)
        assert declared in ("any", tensor_kind(ts)), (nid, port, ts)


def test_fitting_ports():
    assert tensor_kind(TensorSpec((4,), "int32")) == "int_vector"
    assert tensor_kind(TensorSpec((1, 2), "float16")) == "float"
    assert tensor_kind(TensorSpec((), "bool")) == "bool"
    assert tensor_kind(TensorSpec((2, 2), "int32")) == "other"
    grad = get_spec("Conv2DBackpropFilter")
    assert [p.name for p in fitting_inputs(grad, "float")] == ["input", "out_backprop"]
    assert [p.name for p in fitting_inputs(grad, "int_vector")] == ["filter_sizes"]
    assert fitting_inputs(grad, "bool") == []
    assert fitting_inputs(get_spec("Tensor"), "float") == []
    assert [p.name for p in fitting_inputs(get_spec("Output"), "bool")] == ["input"]
    assert [p.name for p in fitting_outputs(get_spec("Compare"), "float")] == [
        "output", "max_abs_error", "max_rel_error"]
    assert fitting_outputs(get_spec("IntVector"), "float") == []
    assert fits("any", "int_vector") and fits("other", "any") and not fits("other", "float")
