"""The sequence-to-sequence family's views of `seqlab explore` (seqlab.families.seq2seq.explain), on tiny runs trained
once for the module: each view's numbers are the model's own. The beam tree's finished hypotheses are what
`translate --beam K` writes, in the order `decode` ranks its n-best; the alignment is the attention the translate API
gives; attention rows sum to 1 and the transformer's last cross-attention layer averaged over heads is that
alignment; the gates are the textbook cell's on the layers' weights (written out here), the decoder's those of
the states incremental decoding reaches; coverage is the sum of the attention before each step; an export's
beam tree is PyTorch's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import seqlab
from seqlab.contract.views import MAX_TOKENS, ExplainOptions
from seqlab.decoding.search import SearchOptions, decode
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.explain import spell
from seqlab.families.seq2seq.parallel import Pair

PAIRS = Path(__file__).parent / "fixtures" / "seq2seq"
SOURCES = (PAIRS / "dev.src").read_text(encoding="utf-8").splitlines()
RUNS = {
    "de-en": ["--arch", "gru", "--attention", "dot", "--hidden-size", "16", "--lr", "0.05", "--max-steps", "30"],
    "transformer": ["--arch", "transformer", "--num-layers", "2", "--num-heads", "2", "--ff-size", "16",
                    "--max-positions", "24", "--max-steps", "10"],
    "copy": ["--arch", "lstm", "--attention", "additive", "--bidirectional", "--num-layers", "2", "--copy",
             "--coverage", "--hidden-size", "8", "--max-steps", "10"],
    "lm": ["--arch", "lm", "--shared-vocab", "--num-layers", "1", "--num-heads", "2", "--ff-size", "16",
           "--max-positions", "48", "--max-steps", "5"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    from seqlab.cli.main import main

    folder = tmp_path_factory.mktemp("explain-seq2seq")
    for name, options in RUNS.items():
        assert main(["train", "seq2seq", "--train-src", str(PAIRS / "train.src"), "--train-tgt",
                     str(PAIRS / "train.tgt"), "--dev-src", str(PAIRS / "dev.src"), "--dev-tgt", str(PAIRS / "dev.tgt"),
                     "--embedding-size", "16", "--dropout", "0", "--eval-decode", "0", "--no-progress", *options,
                     "--output", str(folder / name)]) == 0
    return {name: folder / name for name in RUNS}


@pytest.fixture(scope="module")
def models(runs) -> dict:
    return {name: seqlab.load(run) for name, run in runs.items()}


def panel_values(view, group_prefix: str = "") -> list[torch.Tensor]:
    return [torch.tensor(p.values) for p in view.panels if p.group.startswith(group_prefix)]


# ------------------------------------------------------------------------------------ the beam's tree


@pytest.mark.parametrize("name", list(RUNS))
def test_explain_seq2seq_beam_tree_finished_are_the_searchs_nbest(models, name):
    """The finished hypotheses, ranked, are `decode`'s n-best (K of them, best first), the first one what the
    translate API writes; each one's node chain spells its tokens."""
    model = models[name]
    K, alpha = 3, 0.6
    for text in SOURCES[:3]:
        tree = model.explain(text, ["beam-tree"], beam=K, length_penalty=alpha).view("beam-tree")
        assert tree.kind == "tree" and [f["rank"] for f in tree.finished] == list(range(1, K + 1))
        assert tree.finished[0]["text"] == model.translate(text, beam=K, length_penalty=alpha)
        pair = model.vocabulary.encode([Pair(text, None, 1)])
        batch = model.vocabulary.collate(pair)
        nbest = decode(model.model, batch.source, batch.source_lengths,
                       SearchOptions(beam=K, nbest=K, length_penalty=alpha), source_copy=batch.source_copy)[0]
        assert [f["tokens"] for f in tree.finished] == [spell(model.vocabulary, h.tokens, pair[0].oovs) for h in nbest]
        assert [f["ended"] for f in tree.finished] == [h.finished for h in nbest]
        assert [f["normalized"] for f in tree.finished] == pytest.approx([h.normalized for h in nbest], abs=1e-3)
        nodes = {n["id"]: n for n in tree.nodes}
        for f in tree.finished:
            chain, node = [], nodes[f["node"]]
            while node is not None:
                chain.append(node["token"])
                node = nodes.get(node["parent"])
            assert chain[::-1] == f["tokens"] + ["</s>"] * f["ended"]
        json.dumps(tree.to_json())


@pytest.mark.slow
def test_explain_seq2seq_beam_tree_equals_the_translate_command(runs, models, tmp_path):
    """`seqlab translate RUN FILE --beam K` writes each line's best finished hypothesis of the tree."""
    texts = SOURCES[:4]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "seqlab", "translate", str(runs["de-en"]), str(tmp_path / "in.txt"),
                           "--beam", "4", "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = [models["de-en"].explain(t, ["beam-tree"], beam=4).view("beam-tree").finished[0]["text"]
                for t in texts]
    assert done.stdout.splitlines() == expected


# ------------------------------------------------------------------------------------ attention


@pytest.mark.parametrize("name", ["de-en", "transformer", "copy"])
def test_explain_seq2seq_alignment_rows_sum_to_one_and_equal_the_translate_attention(models, name):
    model, text = models[name], SOURCES[5]
    found = model.explain(text, ["alignment"], beam=3)
    (panel,) = found.view("alignment").panels
    (output,) = model.generate([text], beam=3, attention=True)
    assert panel.cols == output.source_tokens == found.tokens
    assert panel.rows == output.tokens + ["</s>"] * output.finished
    values = torch.tensor(panel.values)
    torch.testing.assert_close(values, torch.tensor(output.attention), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(values.sum(-1), torch.ones(len(panel.rows)), atol=1e-3, rtol=0)


def test_explain_seq2seq_cross_attention_per_head_rows_sum_to_one_and_average_to_the_alignment(models):
    model = models["transformer"]
    found = model.explain(SOURCES[2], ["alignment", "cross-attention"], beam=2)
    heads = found.view("cross-attention")
    config = model.config.model
    assert len(heads.panels) == config.num_layers * config.num_heads
    assert {p.group for p in heads.panels} == {f"layer {k + 1}" for k in range(config.num_layers)}
    for values in panel_values(heads):
        torch.testing.assert_close(values.sum(-1), torch.ones(values.size(0)), atol=1e-3, rtol=0)
    last = torch.stack(panel_values(heads, f"layer {config.num_layers}")).mean(0)    # teacher-forced, heads averaged
    (alignment,) = found.view("alignment").panels                                   # the search's, step by step
    torch.testing.assert_close(last, torch.tensor(alignment.values), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["transformer", "lm"])
def test_explain_seq2seq_self_attention_rows_sum_to_one_and_the_decoder_is_causal(models, name):
    model = models[name]
    view = model.explain(SOURCES[1], ["attention"], beam=2).view("attention")
    assert view.lines and view.panels
    for panel in view.panels:
        values = torch.tensor(panel.values)
        assert panel.rows == panel.cols
        torch.testing.assert_close(values.sum(-1), torch.ones(values.size(0)), atol=1e-3, rtol=0)
        if not panel.group.startswith("encoder"):             # causal: no query sees a later key
            assert torch.triu(values, diagonal=1).abs().max() == 0
    if name == "lm":                                           # source <sep> the output it read
        assert "<sep>" in view.panels[0].rows
        long = model.explain(" ".join(SOURCES[:6]), ["attention", "beam-tree"], beam=2)   # a source near its room
        best = long.view("beam-tree").finished[0]
        (first, *_) = long.view("attention").panels
        assert first.rows == [*long.tokens, "<sep>", *best["tokens"][:len(best["tokens"]) - (not best["ended"])]]
        assert len(first.rows) <= model.config.model.max_positions


# ------------------------------------------------------------------------------------ gates, copy, coverage


def textbook(cell: str, layer, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None = None, suffix="_l0"):
    """The book's cell written out on a fused layer's weights (PyTorch's gate order: LSTM i f g o, GRU r z n;
    PyTorch's z keeps h_{t-1}, the book's takes the candidate), over x (T, I) from h (H,) (and c): per step its h
    and gates."""
    W, U = getattr(layer, "weight_ih" + suffix), getattr(layer, "weight_hh" + suffix)
    b, d = getattr(layer, "bias_ih" + suffix), getattr(layer, "bias_hh" + suffix)
    out = []
    for x_t in x:
        a, r = W @ x_t + b, U @ h + d
        if cell == "lstm":
            i, f, g, o = (a + r).chunk(4)
            i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
            c = f * c + i * g                                    # SLP 13.25
            h = o * torch.tanh(c)                                # 13.27
            out.append({"h": h, "i": i, "f": f, "o": o, "c": c})
        else:
            (ar, az, an), (rr, rz, rn) = a.chunk(3), r.chunk(3)
            reset, z = torch.sigmoid(ar + rr), 1 - torch.sigmoid(az + rz)    # the book's z: the candidate's share
            h = (1 - z) * h + z * torch.tanh(an + reset * rn)                # SLP 9.13
            out.append({"h": h, "r": reset, "z": z})
    return out


def gate_panels(view, group: str) -> dict[str, tuple[list[int], torch.Tensor]]:
    """{key: (units, values units x tokens)} of one group's panels (h, then the gates by their book names)."""
    out = {}
    for panel in view.panels:
        if panel.group == group:
            key = panel.title.rsplit(" (", 1)[0].split()[-1]          # "...: forget gate f (13.20)" -> "f"
            out[key] = ([int(r.split()[1]) for r in panel.rows], torch.tensor(panel.values))
    return out


def test_explain_seq2seq_encoder_gates_equal_the_textbook_cell(models):
    """GRU (de-en) and a bidirectional 2-layer LSTM (copy): each panel of layer 1's is the cell written out."""
    for name in ("de-en", "copy"):
        model = models[name]
        found = model.explain(SOURCES[3], ["gates"], units=256)
        view = found.view("gates")
        ids = torch.tensor(model.vocabulary.source_vocab.encode(found.tokens))
        x = model.model.source_embedding(ids).detach()                             # (T, E)
        stack = model.model.encoder.rnn
        H = stack.hidden_size
        zeros = torch.zeros(H)
        for direction, suffix in enumerate(["_l0", "_l0_reverse"][:stack.directions]):
            group = "encoder layer 1" + (" forward", " backward")[direction]
            steps = textbook(stack.cell, stack.layers[0], x.flip(0) if direction else x, zeros, zeros, suffix)
            steps = steps[::-1] if direction else steps
            panels = gate_panels(view, group)
            assert set(panels) == {"h", *{"lstm": "ifoc", "gru": "zr"}[stack.cell]}
            for key, (units, values) in panels.items():
                expected = torch.stack([s[key] for s in steps]).T[units].detach()    # (units, T)
                torch.testing.assert_close(values, expected, atol=1e-4, rtol=1e-4)


def test_explain_seq2seq_decoder_states_are_those_of_incremental_decoding(models):
    """The decoder's recorded h (teacher-forced from h_0^d on the best output) is the state `step` reaches
    after each token it is fed, decoding that output."""
    for name in ("de-en", "copy"):
        model = models[name]
        found = model.explain(SOURCES[4], ["gates", "beam-tree"], units=256, beam=2)
        tokens = found.view("beam-tree").finished[0]
        pair = model.vocabulary.encode([Pair(SOURCES[4], None, 1)])
        batch = model.vocabulary.collate(pair)
        net = model.model
        state = net.start(batch.source, batch.source_lengths, batch.source_copy) if net.copy else \
            net.start(batch.source, batch.source_lengths)
        ids = model.vocabulary.target_vocab.encode([t for t in tokens["tokens"]])
        fed = ([net.start_token] + ids)[:len(ids) + tokens["ended"]]
        layers = net.config.num_layers
        tops = {layer: [] for layer in range(layers)}
        with torch.no_grad():
            for token in fed:
                _, state, _ = net.step(torch.tensor([token]), state)
                h = state.decoder[0] if net.coverage else state.decoder
                h = h[0] if net.lstm else h                                   # (L, 1, D)
                for layer in range(layers):
                    tops[layer].append(h[layer, 0])
        view = found.view("gates")
        for layer in range(layers):
            units, values = gate_panels(view, f"decoder layer {layer + 1} forward")["h"]
            torch.testing.assert_close(values, torch.stack(tops[layer]).T[units], atol=1e-4, rtol=1e-4)


def test_explain_seq2seq_gates_keep_the_units_that_vary_most(models):
    view = models["de-en"].explain(SOURCES[0], ["gates"], units=5).view("gates")
    assert all(len(p.rows) == 5 for p in view.panels)
    assert "the 5 of 16 units" in view.note


def test_explain_seq2seq_copy_and_coverage_are_the_models_own(models):
    model = models["copy"]
    found = model.explain(SOURCES[6], ["alignment", "copy", "coverage"], beam=2)
    copy = found.view("copy")
    (alignment,) = found.view("alignment").panels
    assert copy.tokens == alignment.rows and all(0 < p < 1 for p in copy.values)
    assert [d["p_gen"] for d in copy.details] == copy.values
    (coverage,) = found.view("coverage").panels
    a, c = torch.tensor(alignment.values), torch.tensor(coverage.values)
    expected = torch.cat([torch.zeros(1, a.size(1)), a.cumsum(0)[:-1]])             # c^t = Σ_{t' < t} a^{t'}
    torch.testing.assert_close(c, expected, atol=1e-3, rtol=1e-3)


# ------------------------------------------------------------------------------------ the API, bounds, errors


def test_explain_seq2seq_views_follow_the_architecture(models):
    assert [v.name for v in models["de-en"].explain(SOURCES[0]).views] == ["beam-tree", "alignment", "gates"]
    assert models["copy"].explain(SOURCES[0]).arch == "lstm+attention+copy+coverage"
    assert [v.name for v in models["transformer"].explain(SOURCES[0]).views] == \
        ["beam-tree", "alignment", "cross-attention", "attention"]
    assert [v.name for v in models["lm"].explain(SOURCES[0]).views] == ["beam-tree", "attention"]


def test_explain_seq2seq_bad_input_is_one_line(models):
    model = models["transformer"]
    for text, views, options, message in (("", None, {}, "empty"), ("ein hund", ["gates"], {}, "no view 'gates'"),
                                          ("ein hund", None, {"beam": 0}, "beam must be between"),
                                          ("x" * 6000, None, {}, "characters"),
                                          ("ein hund", None, {"width": 3}, "unknown explain option")):
        with pytest.raises(SeqlabError, match=message) as error:
            model.explain(text, views, **options)
        assert "\n" not in str(error.value)


def test_explain_seq2seq_long_text_is_cut_to_the_models_limit(models):
    model = models["transformer"]                      # --max-positions 24: 24 source tokens
    found = model.explain(" ".join(SOURCES[:10]), ["alignment"], beam=2)
    assert found.truncated and len(found.tokens) == 24 == len(found.view("alignment").panels[0].cols)
    short = model.explain(SOURCES[0], ["alignment"], beam=2)
    assert not short.truncated and MAX_TOKENS > 24


def test_explain_seq2seq_examples_are_the_dev_sources(models):
    part = models["de-en"].family.part("explain")
    assert part.examples(models["de-en"], 3) == SOURCES[:3]
    gone = seqlab.load(models["de-en"].run_dir)
    gone.config.data.dev_src = "no/such/file.src"
    assert part.examples(gone, 3) == []
    assert ExplainOptions().beam == 4


# ------------------------------------------------------------------------------------ an export


def test_explain_seq2seq_export_beam_tree_and_alignment_equal_pytorch(runs, models, tmp_path):
    pytest.importorskip("onnxruntime", reason="an export's views need onnxruntime (pip install 'seqlab[export]')")
    pytest.importorskip("onnx", reason="seqlab export needs onnx (pip install 'seqlab[export]')")
    from seqlab.export.onnx import export_onnx
    from seqlab.export.runtime import load_export

    export_onnx(runs["de-en"], tmp_path / "onnx")
    exported = load_export(tmp_path / "onnx")
    for text in SOURCES[7:9]:
        ours = exported.explain(text, beam=3)
        theirs = models["de-en"].explain(text, ["beam-tree", "alignment"], beam=3)
        assert [v.name for v in ours.views] == ["beam-tree", "alignment"] and ours.tokens == theirs.tokens
        a, b = ours.view("beam-tree"), theirs.view("beam-tree")
        assert [(n["token"], n["parent"], n["status"]) for n in a.nodes] == \
            [(n["token"], n["parent"], n["status"]) for n in b.nodes]
        assert [n["score"] for n in a.nodes] == pytest.approx([n["score"] for n in b.nodes], abs=1e-3)
        assert [(f["text"], f["rank"]) for f in a.finished] == [(f["text"], f["rank"]) for f in b.finished]
        torch.testing.assert_close(torch.tensor(ours.view("alignment").panels[0].values),
                                   torch.tensor(theirs.view("alignment").panels[0].values), atol=1e-4, rtol=1e-3)
    with pytest.raises(SeqlabError, match="an export of a gru\\+attention model has no view 'gates'"):
        exported.explain(SOURCES[0], ["gates"])
    part = exported.family.part("explain")
    assert part.examples(exported, 2) == []                   # its config names dev.src without its folder
    for side in ("src", "tgt"):
        (tmp_path / "onnx" / f"dev.{side}").write_bytes((PAIRS / f"dev.{side}").read_bytes())
    assert part.examples(exported, 2) == SOURCES[:2]          # found beside the export
    assert math.isfinite(ours.seconds)
