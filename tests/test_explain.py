"""The explorer's shared pieces: the view shapes and options of `seqlab.contract.views` (torch-free), and the
recordings of `seqlab.nn.inside` (gates and attention from a network's own forward pass). The families' views
are tested in tests/test_explain_<family>.py."""

from __future__ import annotations

import json
import math

import pytest
import torch

from seqlab.contract import views
from seqlab.contract.views import ExplainOptions, Panel, View, ViewSpec
from seqlab.errors import SeqlabError
from seqlab.nn.cells import Weights, run_cell
from seqlab.nn.cross_attention import CrossAttention
from seqlab.nn.inside import attention_kept, kept, recurrent_record, same_outputs
from seqlab.nn.recurrent import RecurrentStack
from seqlab.nn.transformer import TransformerBlock


def test_explain_options_refuse_each_value_out_of_range_by_name():
    assert ExplainOptions(top_k=3.0).top_k == 3 and isinstance(ExplainOptions(top_k=3.0).top_k, int)
    for given, named in (({"top_k": 0}, "top_k"), ({"units": 10_000}, "units"), ({"temperature": math.nan},
                         "temperature"), ({"top_p": 1.5}, "top_p"), ({"beam": 2.5}, "beam"),
                         ({"max_tokens": True}, "max_tokens"), ({"seed": "1"}, "seed")):
        with pytest.raises(SeqlabError, match=named):
            ExplainOptions(**given)
    with pytest.raises(SeqlabError, match="strategy"):
        ExplainOptions(strategy="nucleus")
    with pytest.raises(SeqlabError, match="unknown explain option 'topk'"):
        ExplainOptions.from_dict({"topk": 3})
    assert ExplainOptions.from_dict(None) == ExplainOptions()


def test_explain_view_json_has_its_kind_only_and_no_nan():
    spec = ViewSpec("next-token", "tokens", "Next token", "p(w_t | w_<t)", exported=True)
    view = View.of(spec, tokens=["a", "b"], values=[1.5, math.inf], label="bits", details=[{}, {}])
    out = view.to_json()
    assert set(out) == {"name", "kind", "title", "about", "note", "tokens", "values", "details", "label"}
    assert out["values"] == [1.5, None]
    json.dumps(out, allow_nan=False)
    panel = Panel("h", ["unit 1"], ["a", "b"], [[0.5, math.nan]], range=(0, 1), group="layer 1")
    matrix = View(name="gates", kind="matrix", title="Gates", panels=[panel]).to_json()
    assert matrix["panels"][0]["values"] == [[0.5, None]] and "tokens" not in matrix
    json.dumps(matrix, allow_nan=False)


def test_explain_shapes_refuse_what_the_page_could_not_draw():
    with pytest.raises(ValueError, match="kind 'heat'"):
        ViewSpec("x", "heat", "X", "x", exported=True)
    with pytest.raises(ValueError, match="say why"):
        ViewSpec("x", "matrix", "X", "x")                      # neither on an export nor saying why not
    with pytest.raises(ValueError, match="2 rows of values for 1 labels"):
        Panel("p", ["r"], ["a"], [[1.0], [2.0]])
    with pytest.raises(ValueError, match="each of 2 columns"):
        Panel("p", ["r"], ["a", "b"], [[1.0]])


def test_explain_choose_offers_the_architectures_views_and_names_the_choices():
    declared = [ViewSpec("a", "bars", "A", "a", exported=True),
                ViewSpec("g", "matrix", "G", "g", archs=("lstm",), why_not_exported="the graphs output logits"),
                ViewSpec("t", "matrix", "T", "t", archs=("transformer",), why_not_exported="the graphs output logits")]
    assert [s.name for s in views.choose(declared, "lstm", None)] == ["a", "g"]
    assert [s.name for s in views.choose(declared, "lstm", None, exported=True)] == ["a"]
    assert [s.name for s in views.choose(declared, "transformer", ["t", "a"])] == ["a", "t"]    # declared order
    with pytest.raises(SeqlabError, match="a lstm model has no view 't': choose from a, g"):
        views.choose(declared, "lstm", ["t"])
    with pytest.raises(SeqlabError, match="an export of a lstm model has no view 'g'"):
        views.choose(declared, "lstm", ["g"], exported=True)


def test_explain_top_units_keep_the_units_that_vary_most_in_order():
    values = [[0.5, 0.5, 0.5], [0.0, 1.0, 0.0], [0.2, 0.3, 0.2], [1.0, -1.0, 1.0]]
    assert views.top_units(values, 2) == [1, 3]
    assert views.top_units(values, 10) == [0, 1, 2, 3]


def test_explain_refuses_a_model_without_views_and_an_empty_or_long_text():
    class Plain:
        family = None

    with pytest.raises(SeqlabError, match="has no views to explore"):
        views.explain(Plain(), "a text")

    class Family:
        explains, title, name = True, "a test family", "test"

    class Model:
        family = Family()

    with pytest.raises(SeqlabError, match="empty"):
        views.explain(Model(), "  \n")
    with pytest.raises(SeqlabError, match=f"at most {views.MAX_TEXT_CHARS}"):
        views.explain(Model(), "a" * (views.MAX_TEXT_CHARS + 1))


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_inside_recurrent_record_equals_the_textbook_cell_and_the_fused_stack(cell):
    torch.manual_seed(0)
    stack = RecurrentStack(cell, 5, 7, num_layers=2, bidirectional=True).eval()
    x = torch.randn(1, 6, 5)
    layers = recurrent_record(stack, x)
    out, _ = stack(x)                                                     # (1, 6, 14)
    top = torch.cat([layers[1][0]["h"], layers[1][1]["h"]], dim=-1)
    assert torch.allclose(top, out[0], atol=1e-5)
    layer = stack.layers[0]                                              # the backward direction's gates, by hand
    w = Weights(layer.weight_ih_l0_reverse, layer.weight_hh_l0_reverse, layer.bias_ih_l0_reverse,
                layer.bias_hh_l0_reverse)
    zeros = torch.zeros(1, 7)
    record: list = []
    options = {"record": record} if cell != "rnn" else {}
    h, _ = run_cell(cell, x, (zeros, zeros) if cell == "lstm" else zeros, w, reverse=True, **options)
    assert torch.equal(layers[0][1]["h"], h[0])
    expected = {"lstm": {"h", "i", "f", "o", "c"}, "gru": {"h", "z", "r"}, "rnn": {"h"}}[cell]
    assert set(layers[0][1]) == expected
    for name in expected - {"h"}:                                         # position t at row t: recorded backwards
        assert torch.equal(layers[0][1][name][0], record[-1][name][0])
        assert layers[0][1][name].shape == (6, 7)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_explain_gate_panels_norms_are_the_norms_of_the_models_own_hidden_states(cell, bidirectional):
    """Each group's strip is ||h_t|| over all H units (not only the units shown) of the hidden states the stack's
    own forward pass returns, layer by layer (each fused layer's output, caught by a hook), direction by direction."""
    torch.manual_seed(0)
    stack = RecurrentStack(cell, 5, 7, num_layers=2, bidirectional=bidirectional).eval()
    x = torch.randn(1, 6, 5)
    outputs: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda module, args, out: outputs.append(out[0])) for layer in stack.layers]
    try:
        with torch.no_grad():
            top, _ = stack(x)                                                 # (1, T, dirs*H)
    finally:
        for hook in hooks:
            hook.remove()
    assert torch.equal(outputs[-1], top)
    panels, _ = views.gate_panels(recurrent_record(stack, x), cell, list("abcdef"), units=3)
    for l, output in enumerate(outputs, start=1):
        for d, direction in enumerate(["forward", "backward"][: stack.directions]):
            h = output[0, :, d * 7:(d + 1) * 7]                               # (T, H)
            expected = torch.linalg.vector_norm(h, dim=-1).tolist()           # (T,)
            group = [p for p in panels if p.group == f"layer {l} {direction}"]
            assert len(group) == 1 + len(views.GATES[cell]) and len(group[0].rows) == 3      # 3 of 7 units shown
            for panel in group:
                assert panel.strip == pytest.approx(expected, abs=1e-5) and "all 7 units" in panel.strip_label
    shown = View.of(ViewSpec("gates", "matrix", "Gates", "", why_not_exported="-"), panels=panels).to_json(4)
    assert shown["panels"][0]["strip"] == [float(f"{v:.4g}") for v in panels[0].strip]


def test_inside_recurrent_record_refuses_a_textbook_cell_that_is_not_the_model():
    stack = RecurrentStack("lstm", 3, 4).eval()
    x = torch.randn(1, 5, 3)
    with torch.no_grad():
        fused_only = stack.layers[0]
        original = fused_only.forward
        fused_only.forward = lambda inp, *a: (original(inp)[0] + 1.0, None)      # a fused layer that differs
    with pytest.raises(SeqlabError, match="differs from the fused layer 1"):
        recurrent_record(stack, x)
    with pytest.raises(SeqlabError, match="one sequence"):
        recurrent_record(stack, torch.randn(2, 5, 3))


def test_inside_attention_kept_gives_each_heads_distributions_and_restores_the_model():
    torch.manual_seed(0)
    blocks = torch.nn.Sequential(TransformerBlock(16, 4, 32), TransformerBlock(16, 4, 32)).eval()
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        own = blocks(x)
        with attention_kept(blocks) as modules:
            recorded = blocks(x)
            weights = kept(modules)
    same_outputs(own, recorded, "attention")
    assert [name for name, _ in weights] == ["0.attention", "1.attention"]
    for _, w in weights:
        assert w.shape == (4, 5, 5)
        assert torch.allclose(w.sum(-1), torch.ones(4, 5), atol=1e-6)
        assert torch.all(w.triu(1) == 0)                                  # causal: no query sees a later key
    assert all(m.impl == "sdpa" and m.last_weights is None for _, m in modules)


def test_inside_cross_attention_keeps_each_heads_weights_that_average_to_the_returned_ones():
    torch.manual_seed(0)
    cross = CrossAttention(8, 2).eval()
    x, memory = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    k, v = cross.keys_values(memory)
    mask = torch.tensor([[True, True, True, False]])
    with torch.no_grad():
        y, mean = cross(x, k, v, mask, need_weights=True)
        with attention_kept(cross) as modules:
            y2, _ = cross(x, k, v, mask)
            ((_, heads),) = kept(modules)
    assert torch.allclose(y, y2, atol=1e-6) and torch.allclose(heads.mean(0), mean[0], atol=1e-6)
    assert torch.all(heads[..., 3] == 0) and torch.allclose(heads.sum(-1), torch.ones(2, 3), atol=1e-6)
    assert cross.last_weights is None and not cross.keep_weights
    with pytest.raises(SeqlabError, match="kept no weights"):
        kept(modules)


def test_inside_same_outputs_refuses_a_difference_above_the_tolerance():
    same_outputs(torch.ones(3), torch.ones(3) + 1e-6, "attention")
    with pytest.raises(SeqlabError, match="differs from the model's own"):
        same_outputs(torch.ones(3), torch.ones(3) + 1e-2, "attention")


def test_explain_json_is_rounded_and_bounded_with_a_note():
    panels = [Panel(f"head {h}", ["a", "b"], ["a", "b"], [[0.123456, 0.876544], [1.0, 0.0]], group="layer 1")
              for h in range(3)]
    found = views.Explanation("m", "test", "transformer", ["a", "b"], [
        View(name="attention", kind="matrix", title="Attention", panels=panels, note="rows sum to 1"),
        View(name="classes", kind="bars", title="Classes", labels=["x", "y"], values=[1 / 3, 2 / 3])])
    whole = found.to_json()
    assert len(whole["views"][0]["panels"]) == 3 and whole["views"][1]["values"] == [1 / 3, 2 / 3]
    sent = found.to_json(digits=3, max_cells=9)                          # two panels of 4 numbers fit, not three
    attention, classes = sent["views"]
    assert [p["title"] for p in attention["panels"]] == ["head 0", "head 1"]
    assert attention["panels"][0]["values"][0] == [0.123, 0.877]
    assert attention["note"].startswith("rows sum to 1; 1 of its 3 panels left out")
    assert classes["values"] == [0.333, 0.667] and classes["labels"] == ["x", "y"]
