"""The site's diagrams (docs/hooks/diagrams.py): every drawing the tutorials need exists, is well-formed SVG that a
screen reader can name, takes the page's colours, carries the symbols of its equations; every `docs: diagram` mark
of the site resolves; and the beam-search tree is the worked example of transformer-lm.md, as seqlab's own beam
search runs it."""

from __future__ import annotations

import ast
import math
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))

import diagrams  # noqa: E402
import notebooks  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
REQUIRED = ["unit", "xor", "window-lm", "rnn-unrolled", "bptt", "lstm-cell", "gru-cell", "stacked-rnn",
            "bidirectional-rnn", "rnn-tagging", "rnn-classification", "rnn-generation", "self-attention",
            "transformer-block", "encoder-decoder", "encoder-decoder-attention", "beam-search", "code-layers"]
# the page that introduces each drawing shows it
PAGES = {"feedforward.md": ["unit", "xor"], "window-lm.md": ["window-lm"],
         "rnn-lm.md": ["rnn-unrolled", "bptt", "rnn-generation"], "lstm-gru.md": ["lstm-cell", "gru-cell"],
         "stacked-bidirectional.md": ["stacked-rnn", "bidirectional-rnn", "rnn-tagging", "rnn-classification"],
         "transformer-lm.md": ["self-attention", "transformer-block", "beam-search"],
         "encoder-decoder.md": ["encoder-decoder", "encoder-decoder-attention"]}
# the symbols (labels without markup: h_{t-1} is "ht−1") each drawing must show, as its page writes them
SYMBOLS = {
    "unit": ["x1", "x2", "x3", "w1 = 0.2", "b = 0.5", "Σ", "σ", "z = w · x + b", "y = σ(z)"],
    "xor": ["x1", "x2", "h1", "h2", "y", "−2", "−1", "+1"],
    "window-lm": ["wt−2", "wt−1", "wt", "E", "h = g(W e + b)", "z = U h", "ŷ = softmax(z)"],
    "rnn-unrolled": ["U", "W", "V", "h0", "x1", "h1", "y1", "(13.1)", "(13.2)"],
    "bptt": ["h0", "L1", "x1", "h6", "∂L/∂h: the gradient", "segment 1 (--seq-len 3)"],
    "lstm-cell": ["ct−1", "ct", "ht−1", "ht", "xt", "ft", "it", "gt", "ot", "kt", "jt", "13.20", "13.21", "13.22",
                  "13.23", "13.24", "13.25", "13.26", "13.27"],
    "gru-cell": ["ht−1", "ht", "xt", "rt", "zt", "h̃t", "1 − zt", "9.10", "9.11", "9.12", "9.13"],
    "stacked-rnn": ["h(1)1", "h(2)4", "x1", "layer 1", "layer 2"],
    "bidirectional-rnn": ["hf1", "hb4", "h1", "forward", "backward", "[hft ; hbt]"],
    "rnn-tagging": ["softmax", "ŷt = softmax(V ht)", "h1", "Janet", "PROPN"],
    "rnn-classification": ["[hf4 ; hb1]", "linear, softmax", "or: pooling (mean, max)"],
    "rnn-generation": ["<s>", "yt = softmax(V ht)", "ht = g(U ht−1 + W xt)"],
    "self-attention": ["WQ", "WK", "WV", "q1", "k1", "v1", "qi · kj / √dk", "−∞", "αij", "ai = Σj≤i αij vj"],
    "transformer-block": ["multi-head attention", "FFN", "LayerNorm", "X", "T1", "H", "+"],
    "encoder-decoder": ["c", "he1", "hd1", "c = he3", "13.32", "hdt = g(ŷt−1, hdt−1, c)  (13.33)"],
    "encoder-decoder-attention": ["he1", "hd1", "hd2", "α21", "c2 = Σj α2j hej   (13.37)", "13.35",
                                  "softmax over j, 13.36"],
    "code-layers": ["base", "data", "training", "contract and run files", "runs", "families", "registry",
                    "capabilities", "commands", "registry.py", "family.part(…)"],
    "beam-search": ["<s>", "step 1", "step 3", "A   −0.69", "</s>   −1.82", "−1.82 / 3 = −0.61  ← best"],
}


@pytest.fixture(scope="module", params=REQUIRED)
def drawing(request) -> tuple[str, ET.Element]:
    return request.param, ET.fromstring(diagrams.svg(request.param))


def test_diagrams_every_required_name_exists():
    assert sorted(diagrams.DIAGRAMS) == sorted(REQUIRED)
    assert set(SYMBOLS) == set(REQUIRED)


def test_diagrams_svg_parses_and_a_screen_reader_can_name_it(drawing):
    name, root = drawing
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img"
    assert re.fullmatch(r"0 0 \d+ \d+", root.get("viewBox"))
    width = int(root.get("viewBox").split()[2])
    assert width <= 720 and root.get("width") == "100%"            # the content column, scaled to fit
    assert root.find(f"{SVG}title").text.strip()
    desc = root.find(f"{SVG}desc").text
    assert len(desc) > 60 and "_{" not in desc and "`" not in desc  # words, without the caption's markup


def test_diagrams_take_the_page_colour_never_a_fixed_black_or_white_text(drawing):
    name, root = drawing
    fixed = re.compile(r"^(#000(000)?|#fff(fff)?|black|white|rgb\(0, ?0, ?0\)|rgb\(255, ?255, ?255\))$", re.I)
    texts = list(root.iter(f"{SVG}text"))
    assert texts
    for element in root.iter():
        for attribute in ("fill", "stroke", "color"):
            assert not fixed.match(element.get(attribute, "")), (name, element.tag, attribute, element.get(attribute))
        assert "color:" not in (element.get("style") or "").replace("--sqd-bg", ""), (name, element.tag)
    style = root.find(f"{SVG}style").text
    assert "svg.sqd text { fill: currentColor" in style
    assert "prefers-color-scheme: dark" in style                    # standalone: a default for either scheme
    # the site's stylesheet makes the inline SVG take the page's colour and background
    css = (DOCS / "assets" / "diagrams.css").read_text()
    assert "color: inherit" in css and "--md-default-bg-color" in css
    assert "assets/diagrams.css" in (ROOT / "mkdocs.yml").read_text()


def test_diagrams_carry_the_symbols_of_their_equations(drawing):
    name, _ = drawing
    drawn = diagrams.labels(name)
    missing = [symbol for symbol in SYMBOLS[name] if not any(symbol == label or symbol in label.split("  ")
                                                             or f"({symbol})" in label for label in drawn)]
    assert not missing, f"{name} lacks {missing}; it has {drawn}"


def test_diagrams_lstm_cell_subscripts_are_tspans():
    root = ET.fromstring(diagrams.svg("lstm-cell"))
    subscripts = {t.text for t in root.iter(f"{SVG}tspan") if float(t.get("dy", 0)) > 0}
    assert {"t", "t−1"} <= subscripts                             # c_t, c_{t−1}: real subscripts, as text


def test_diagrams_markdown_is_one_figure_block_and_unknown_names_raise_keyerror():
    made = diagrams.markdown("lstm-cell")
    assert made.startswith('<figure class="sqd-figure"') and made.endswith("</figure>")
    assert "\n\n" not in made                                       # one raw HTML block: Markdown leaves it alone
    assert "<figcaption>" in made and "c<sub>t−1</sub>" in made and "13.27" in made
    with pytest.raises(KeyError):
        diagrams.markdown("no-such-diagram")
    with pytest.raises(KeyError):
        diagrams.svg("no-such-diagram")
    with pytest.raises(ValueError, match="no such diagram"):
        notebooks.expand("text\n\n<!-- docs: diagram no-such-diagram -->\n")


def test_diagrams_every_mark_of_the_site_resolves_and_each_page_shows_its_own():
    mark = re.compile(r"^ *<!--\s*docs:\s*diagram\s+(\S+)\s*-->\s*$", re.M)
    found: dict[str, list[str]] = {}
    for page in DOCS.rglob("*.md"):
        names = mark.findall(page.read_text(encoding="utf-8"))
        for name in names:
            assert name in diagrams.DIAGRAMS, f"{page}: no diagram {name}"
        if names:
            found[str(page.relative_to(DOCS))] = names
            text, _ = notebooks.expand(page.read_text(encoding="utf-8"), str(page))
            assert text.count('<figure class="sqd-figure"') == len(names)
    for page, names in PAGES.items():
        assert sorted(found.get(f"tutorials/{page}", [])) == sorted(names), page
    assert sorted(found["reference/diagrams.md"]) == sorted(REQUIRED)   # the gallery shows them all


def page_table() -> dict:
    """The TABLE of transformer-lm.md's worked beam search, read from the page's code block."""
    page = (DOCS / "tutorials" / "transformer-lm.md").read_text(encoding="utf-8")
    for block in re.findall(r"^```python\n(.*?)^```", page, re.M | re.S):
        for node in ast.parse(block).body:
            if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["TABLE"]:
                return ast.literal_eval(node.value)
    raise AssertionError("transformer-lm.md has no TABLE = {...} block")


def test_diagrams_beam_example_is_the_table_of_the_page():
    assert page_table() == diagrams.BEAM_EXAMPLE
    for prefix, probabilities in diagrams.BEAM_EXAMPLE.items():
        assert math.isclose(sum(probabilities.values()), 1.0), prefix


def test_diagrams_beam_tree_is_what_seqlab_beam_search_finds():
    """The tree's finished hypotheses, scores and order are those of seqlab.decoding.search.beam_steps on the table;
    greedy misses the best output and the beam finds it; the length penalty changes the winner."""
    import torch

    from seqlab.data.vocab import EOS, SPECIALS
    from seqlab.decoding.core import best_first
    from seqlab.decoding.search import beam_steps

    table = diagrams.BEAM_EXAMPLE
    words = list(SPECIALS) + ["A", "B"]

    class TableLM:
        never_generated = (words.index("<unk>"),)

        def step(self, tokens, state, need_weights=False):
            state = torch.cat([state, tokens[:, None]], dim=1)
            logits = torch.full((len(tokens), len(words)), float("-inf"))
            for row, ids in enumerate(state[:, 1:].tolist()):
                for word, p in table[tuple(words[i] for i in ids)].items():
                    logits[row, words.index(word)] = math.log(p)
            return logits, state, None

        def reorder_state(self, state, index):
            return state[index]

    tree = diagrams.beam_tree()
    for alpha in (1.0, 0.0):
        [found] = beam_steps(TableLM(), torch.zeros(1, 0, dtype=torch.long), torch.tensor([EOS]),
                             torch.tensor([diagrams.BEAM_LENGTH]), beam=diagrams.BEAM_WIDTH, length_penalty=alpha)
        seqlab_says = [(tuple(words[i] for i in h.tokens) + ("</s>",) * h.finished, round(h.score, 4))
                       for h in best_first(found, 5)]
        drawn = sorted(tree["finished"], key=lambda f: -diagrams.normalized(*f, alpha))
        assert seqlab_says == [(seq, round(score, 4)) for seq, score in drawn], alpha
    best = max(tree["finished"], key=lambda f: diagrams.normalized(*f))[0]
    assert best == ("B", "A", "</s>")
    assert tree["greedy"][-1] == ("A", "A", "A") and best not in tree["greedy"]
    assert max(tree["finished"], key=lambda f: diagrams.normalized(*f, 0.0))[0] == ("A", "</s>")
