"""The site's diagrams of the chapters' architectures and algorithms, drawn by code as inline SVG (a page asks for
one with the line `<!-- docs: diagram NAME -->`, which notebooks.py replaces by `markdown(NAME)`):

    python docs/hooks/diagrams.py                    # the names
    python docs/hooks/diagrams.py lstm-cell > x.svg  # one diagram, standalone

Each drawing is a function of a `Canvas` (boxes, circles, arrows with heads, curved arrows, labels with sub- and
superscripts as <tspan>s); its labels are the symbols and equation numbers of the page that shows it. Strokes and
text are `currentColor`, so an inline SVG takes the page's text colour (docs/assets/diagrams.css), in the light and
the dark palette alike; fills are translucent. Standalone (a notebook's image) the SVG's own <style> gives it a
background and a text colour, light or dark as the viewer prefers, so that dark text never lands on a dark page.

`BEAM_EXAMPLE` is the toy language model of transformer-lm.md's worked beam search (the page's cell holds the same
table, and tests/test_diagrams.py checks that the two agree and that seqlab's beam search finds what the tree shows).
"""

from __future__ import annotations

import html
import math
import re
import sys
from collections.abc import Callable

# ------------------------------------------------------------------------------------------ colours and style
FILL = {
    "blue": "rgba(59, 130, 246, 0.20)",
    "orange": "rgba(249, 115, 22, 0.22)",
    "green": "rgba(34, 197, 94, 0.20)",
    "purple": "rgba(168, 85, 247, 0.20)",
    "yellow": "rgba(234, 179, 8, 0.25)",
    "red": "rgba(239, 68, 68, 0.20)",
    "grey": "rgba(128, 128, 128, 0.16)",
    "none": "none",
}
ACCENT = "#e8710a"      # the gradient's arrows (BPTT), the finished hypotheses: an orange legible on white and black
KEPT = "#3b82f6"        # the beam's kept hypotheses

STYLE = """
svg.sqd { color: #24292f; --sqd-bg: #ffffff; font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica,
  Arial, sans-serif; font-size: 14px; }
@media (prefers-color-scheme: dark) { svg.sqd { color: #e6edf3; --sqd-bg: #1e2129; } }
svg.sqd .sqd-bg { fill: var(--sqd-bg); }
svg.sqd text { fill: currentColor; stroke: none; }
svg.sqd .m { font-family: "STIX Two Text", "Cambria Math", "Times New Roman", Times, serif; font-style: italic;
  font-size: 16px; }
svg.sqd .small { font-size: 11.5px; }
svg.sqd .eq { font-size: 11.5px; opacity: 0.8; }
svg.sqd .title { font-weight: 600; }
svg.sqd .halo { paint-order: stroke; stroke: var(--sqd-bg); stroke-width: 4px; stroke-linejoin: round; }
svg.sqd .faded { opacity: 0.38; }
""".strip()


def escape(text: str) -> str:
    return html.escape(text, quote=True)


SCRIPT = re.compile(r"([_^])(\{[^}]*\}|.)")


def rich(label: str, size: float) -> str:
    """A label as SVG text content: `_x` / `_{...}` a subscript, `^x` / `^{...}` a superscript (as <tspan>s
    shifted by dy, at 70% size), the rest escaped."""
    out, last, shift = [], 0, 0.0
    small = round(size * 0.7, 1)
    for found in SCRIPT.finditer(label):
        plain = label[last:found.start()]
        if plain:
            out.append(f'<tspan dy="{-shift:g}">{escape(plain)}</tspan>' if shift else escape(plain))
            shift = 0.0
        body = found[2][1:-1] if found[2].startswith("{") else found[2]
        want = round(size * (0.3 if found[1] == "_" else -0.4), 1)
        out.append(f'<tspan dy="{want - shift:g}" font-size="{small:g}">{escape(body)}</tspan>')
        shift = want
        last = found.end()
    rest = label[last:]
    if rest:
        out.append(f'<tspan dy="{-shift:g}">{escape(rest)}</tspan>' if shift else escape(rest))
    return "".join(out)


def plain(label: str) -> str:
    """A label without its markup (for screen readers and tests): `h_{t-1}` -> `ht-1`."""
    return SCRIPT.sub(lambda m: m[2].strip("{}"), label)


# ------------------------------------------------------------------------------------------ the canvas
class Canvas:
    """An SVG drawing in a viewBox of `width` x `height` (user units, about pixels at the content column's width)."""

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.parts: list[str] = []
        self.labels: list[str] = []          # every label drawn, without markup (tests read them)

    # -- text
    def text(self, x: float, y: float, label: str, size: float = 14, anchor: str = "middle", cls: str = "",
             math_: bool = False, halo: bool = False, literal: bool = False) -> None:
        """A label centred vertically on y; `math_` in the serif italic of the book's symbols; `literal` as it is
        (no sub- or superscripts: a file name)."""
        classes = " ".join(c for c in (cls, "m" if math_ else "", "halo" if halo else "") if c)
        if math_ and size == 14:
            size = 16
        attrs = f' class="{classes}"' if classes else ""
        font = "" if size in (14, 16) and not cls else f' font-size="{size:g}"' if "small" not in cls and \
            "eq" not in cls else ""
        self.parts.append(f'<text x="{x:g}" y="{y:g}" text-anchor="{anchor}" dominant-baseline="central"'
                          f'{attrs}{font}>{escape(label) if literal else rich(label, size)}</text>')
        self.labels.append(label if literal else plain(label))

    def math(self, x: float, y: float, label: str, size: float = 16, anchor: str = "middle", **kw) -> None:
        self.text(x, y, label, size, anchor, math_=True, **kw)

    # -- shapes
    def box(self, x: float, y: float, w: float, h: float, label: str = "", fill: str = "blue", rx: float = 6,
            math_: bool = False, size: float = 14, dashed: bool = False, cls: str = "", stroke: str = "",
            sub: str = "", literal: bool = False) -> None:
        """A rounded box centred on (x, y) with an optional label (and a second, small line `sub`)."""
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        klass = f' class="{cls}"' if cls else ""
        colour = stroke or "currentColor"
        self.parts.append(f'<g{klass}><rect x="{x - w / 2:g}" y="{y - h / 2:g}" width="{w:g}" height="{h:g}" '
                          f'rx="{rx:g}" fill="{FILL.get(fill, fill)}" stroke="{colour}" stroke-width="1.4"{dash}/>')
        if label and sub:
            self.text(x, y - 7, label, size, math_=math_, literal=literal)
            self.text(x, y + 10, sub, cls="eq")
        elif label:
            self.text(x, y, label, size, math_=math_, literal=literal)
        self.parts.append("</g>")

    def circle(self, x: float, y: float, r: float, label: str = "", fill: str = "none", math_: bool = False,
               size: float = 14, cls: str = "") -> None:
        klass = f' class="{cls}"' if cls else ""
        self.parts.append(f'<g{klass}><circle cx="{x:g}" cy="{y:g}" r="{r:g}" fill="{FILL.get(fill, fill)}" '
                          f'stroke="currentColor" stroke-width="1.4"/>')
        if label:
            self.text(x, y, label, size, math_=math_)
        self.parts.append("</g>")

    def op(self, x: float, y: float, symbol: str, r: float = 11) -> None:
        """A pointwise operation (⊙, +, ×) as a small circle."""
        self.circle(x, y, r, symbol, fill="yellow", size=15)

    def vector(self, x: float, y: float, n: int, cell: float = 14, fill: str = "blue", cls: str = "") -> None:
        """A vector of n cells in a row, centred on (x, y)."""
        left = x - n * cell / 2
        klass = f' class="{cls}"' if cls else ""
        cells = "".join(f'<rect x="{left + k * cell:g}" y="{y - cell / 2:g}" width="{cell:g}" height="{cell:g}" '
                        f'fill="{FILL[fill]}" stroke="currentColor" stroke-width="1"/>' for k in range(n))
        self.parts.append(f"<g{klass}>{cells}</g>")

    # -- lines and arrows
    def line(self, points: list[tuple[float, float]], arrow: bool = True, dashed: bool = False,
             colour: str = "currentColor", width: float = 1.4, halo: bool = False, cls: str = "") -> None:
        """A polyline through `points`, with an arrowhead at its end; `halo` draws a gap in what it crosses."""
        if arrow:
            points = self._shorten(points)
        d = " ".join(f"{x:g},{y:g}" for x, y in points)
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        klass = f' class="{cls}"' if cls else ""
        out = []
        if halo:
            out.append(f'<polyline points="{d}" fill="none" style="stroke: var(--sqd-bg)" '
                       f'stroke-width="{width + 6:g}"/>')
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="{width:g}"'
                   f' stroke-linejoin="round"{dash}/>')
        if arrow:
            (x0, y0), (x1, y1) = points[-2], points[-1]
            out.append(self._head(x1, y1, math.atan2(y1 - y0, x1 - x0), colour))
        self.parts.append(f"<g{klass}>{''.join(out)}</g>")

    def arrow(self, x0: float, y0: float, x1: float, y1: float, **kw) -> None:
        self.line([(x0, y0), (x1, y1)], **kw)

    def curve(self, p0: tuple, c1: tuple, c2: tuple, p3: tuple, arrow: bool = True, dashed: bool = False,
              colour: str = "currentColor", width: float = 1.4, cls: str = "") -> None:
        """A cubic Bézier from p0 to p3 (control points c1, c2), with an arrowhead at p3: recurrences, feedback."""
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        angle = math.atan2(p3[1] - c2[1], p3[0] - c2[0])
        end = (p3[0] - 6 * math.cos(angle), p3[1] - 6 * math.sin(angle)) if arrow else p3
        klass = f' class="{cls}"' if cls else ""
        d = f"M{p0[0]:g},{p0[1]:g} C{c1[0]:g},{c1[1]:g} {c2[0]:g},{c2[1]:g} {end[0]:g},{end[1]:g}"
        head = self._head(p3[0], p3[1], angle, colour) if arrow else ""
        self.parts.append(f'<g{klass}><path d="{d}" fill="none" stroke="{colour}" stroke-width="{width:g}"{dash}/>'
                          f"{head}</g>")

    def dot(self, x: float, y: float, r: float = 3) -> None:
        self.parts.append(f'<circle cx="{x:g}" cy="{y:g}" r="{r:g}" fill="currentColor"/>')

    def raw(self, svg: str) -> None:
        self.parts.append(svg)

    @staticmethod
    def _shorten(points: list[tuple[float, float]], by: float = 6) -> list[tuple[float, float]]:
        """The polyline with its last segment shortened by the head's length (the head ends at the point)."""
        (x0, y0), (x1, y1) = points[-2], points[-1]
        n = math.hypot(x1 - x0, y1 - y0) or 1
        return [*points[:-1], (x1 - by * (x1 - x0) / n, y1 - by * (y1 - y0) / n)]

    @staticmethod
    def _head(x: float, y: float, angle: float, colour: str, length: float = 9, spread: float = 0.42) -> str:
        a = (x - length * math.cos(angle - spread), y - length * math.sin(angle - spread))
        b = (x - length * math.cos(angle + spread), y - length * math.sin(angle + spread))
        return f'<polygon points="{x:g},{y:g} {a[0]:g},{a[1]:g} {b[0]:g},{b[1]:g}" fill="{colour}"/>'

    # -- the document
    def svg(self, name: str, title: str, desc: str) -> str:
        body = "\n".join(self.parts)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="sqd" id="diagram-{name}" role="img" '
                f'aria-labelledby="diagram-{name}-title diagram-{name}-desc" viewBox="0 0 {self.width} {self.height}" '
                f'width="100%" style="max-width: {self.width}px">\n'
                f'<title id="diagram-{name}-title">{escape(title)}</title>\n'
                f'<desc id="diagram-{name}-desc">{escape(desc)}</desc>\n'
                f"<style>{STYLE}</style>\n"
                f'<rect class="sqd-bg" x="0" y="0" width="{self.width}" height="{self.height}" rx="8"/>\n'
                f"{body}\n</svg>")


class Diagram:
    """A named drawing: its title (screen readers' name), what it shows (the caption and the <desc>) and the
    function that draws it on a canvas."""

    def __init__(self, name: str, title: str, caption: str, draw: Callable[[], Canvas], page: str):
        self.name, self.title, self.caption, self.draw, self.page = name, title, caption, draw, page


DIAGRAMS: dict[str, Callable[[], Canvas]] = {}
ABOUT: dict[str, Diagram] = {}


def diagram(name: str, title: str, caption: str, page: str):
    """Register a drawing function under `name`, with its title, caption and the tutorial that introduces it."""
    def register(draw: Callable[[], Canvas]) -> Callable[[], Canvas]:
        DIAGRAMS[name] = draw
        ABOUT[name] = Diagram(name, title, caption, draw, page)
        return draw
    return register


def svg(name: str) -> str:
    """The diagram `name` as SVG text (KeyError for an unknown name)."""
    about = ABOUT[name]
    return DIAGRAMS[name]().svg(name, about.title, caption_text(about.caption))


def markdown(name: str) -> str:
    """What a page gets in place of `<!-- docs: diagram NAME -->`: a figure holding the inline SVG and its caption
    (raw HTML, one block without blank lines, so that Markdown leaves it alone; KeyError for an unknown name)."""
    about = ABOUT[name]
    drawing = svg(name)
    return (f'<figure class="sqd-figure" id="figure-{name}">\n{drawing}\n'
            f"<figcaption>{caption_html(about.caption)}</figcaption>\n</figure>")


CODE = re.compile(r"`([^`]*)`")


def caption_html(caption: str) -> str:
    """A caption's markup as HTML: `code`, `_x` / `_{...}` subscripts, `^x` / `^{...}` superscripts."""
    parts = CODE.split(caption)
    out = []
    for k, part in enumerate(parts):
        if k % 2:
            out.append(f"<code>{escape(part)}</code>")
            continue
        pieces, last = [], 0
        for found in SCRIPT.finditer(part):
            pieces.append(escape(part[last:found.start()]))
            tag = "sub" if found[1] == "_" else "sup"
            pieces.append(f"<{tag}>{escape(found[2].strip('{}'))}</{tag}>")
            last = found.end()
        pieces.append(escape(part[last:]))
        out.append("".join(pieces))
    return "".join(out)


def caption_text(caption: str) -> str:
    """A caption without markup (the SVG's <desc>, read by screen readers)."""
    return plain(CODE.sub(lambda m: m[1], caption))


def labels(name: str) -> list[str]:
    """Every label drawn in the diagram, without markup (`h_{t-1}` -> `ht-1`)."""
    return DIAGRAMS[name]().labels


# ============================================================================ chapter 6: units, XOR, window LM
@diagram("unit", "A neural unit",
         "A neural unit (SLP 6.1): the weighted sum z = w · x + b of its inputs and its bias, then the activation "
         "y = σ(z). The numbers are the book's example: w = [0.2, 0.3, 0.9], b = 0.5, x = [0.5, 0.6, 0.1] give "
         "z = 0.87 and y = 0.70.", "tutorials/feedforward.md#the-unit")
def draw_unit() -> Canvas:
    c = Canvas(680, 270)
    xs = [(0.5, 0.2), (0.6, 0.3), (0.1, 0.9)]
    ys = [45, 110, 175]
    for k, ((value, weight), y) in enumerate(zip(xs, ys, strict=True), 1):
        c.circle(70, y, 22, f"x_{k}", fill="green", math_=True)
        c.text(22, y, f"{value:g}", cls="small")
        c.arrow(92, y, 300, 135 + (y - 110) * 0.25)
        c.math(185, y + (135 + (y - 110) * 0.25 - y) * 0.5 - 13, f"w_{k} = {weight:g}", size=14, halo=True)
    c.circle(70, 240, 22, "+1", fill="grey")
    c.arrow(92, 236, 302, 155)
    c.math(195, 214, "b = 0.5", size=14, halo=True)
    c.circle(330, 140, 30, "Σ", fill="blue", size=20)
    c.math(330, 196, "z = w · x + b", size=14)
    c.text(330, 216, "= 0.87", cls="small")
    c.arrow(360, 140, 440, 140)
    c.math(400, 126, "z", size=14)
    c.circle(475, 140, 30, "σ", fill="orange", size=20, math_=True)
    c.math(475, 196, "y = σ(z)", size=14)
    c.text(475, 216, "= 0.70", cls="small")
    c.arrow(505, 140, 600, 140)
    c.math(625, 140, "y", size=18)
    c.text(70, 14, "inputs", cls="small")
    c.text(185, 14, "weights", cls="small")
    c.text(330, 92, "weighted sum", cls="small")
    c.text(475, 92, "activation", cls="small")
    c.text(625, 114, "output", cls="small")
    return c


@diagram("xor", "The two-layer network that computes XOR",
         "The network of SLP Fig. 6.6 that computes XOR: two ReLU hidden units h = ReLU(W x + b) with W = [[1, 1], "
         "[1, 1]] and b = [0, −1], and an output unit y = ReLU(U h) with U = [1, −2] and bias 0. The numbers on "
         "the arrows are the weights; those from the +1 units are the biases.", "tutorials/feedforward.md#xor")
def draw_xor() -> Canvas:
    c = Canvas(660, 330)
    x = {1: (90, 90), 2: (90, 230)}
    h = {1: (330, 90), 2: (330, 230)}
    y = (570, 160)
    for k, (px, py) in x.items():
        c.circle(px, py, 24, f"x_{k}", fill="green", math_=True)
    for k, (px, py) in h.items():
        c.circle(px, py, 24, f"h_{k}", fill="blue", math_=True)
        c.text(px, py + 36, "ReLU", cls="small")
    c.circle(*y, 24, "y", fill="orange", math_=True)
    c.text(y[0], y[1] + 36, "ReLU", cls="small")
    for i in (1, 2):               # W[i][j] = 1: x_j -> h_i
        for j in (1, 2):
            (x0, y0), (x1, y1) = x[j], h[i]
            n = math.hypot(x1 - x0, y1 - y0)
            ux, uy = (x1 - x0) / n, (y1 - y0) / n
            c.arrow(x0 + 24 * ux, y0 + 24 * uy, x1 - 24 * ux, y1 - 24 * uy)
            t = 0.22 if i == j else 0.3
            c.text(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t - 11 * (1 if i == j else 0), "1", halo=True)
    for k, weight in ((1, "1"), (2, "−2")):
        (x0, y0), (x1, y1) = h[k], y
        n = math.hypot(x1 - x0, y1 - y0)
        ux, uy = (x1 - x0) / n, (y1 - y0) / n
        c.arrow(x0 + 24 * ux, y0 + 24 * uy, x1 - 24 * ux, y1 - 24 * uy)
        c.text((x0 + x1) / 2, (y0 + y1) / 2 - 14 * (1 if k == 1 else -1), weight, halo=True)
    c.circle(210, 300, 16, "+1", fill="grey", size=12)
    c.arrow(222, 289, 311, 106)
    c.text(262, 208, "0", halo=True)
    c.arrow(226, 296, 306, 238)
    c.text(268, 280, "−1", halo=True)
    c.circle(450, 300, 16, "+1", fill="grey", size=12)
    c.arrow(464, 292, 549, 174)
    c.text(514, 250, "0", halo=True)
    c.text(90, 20, "input x", cls="title")
    c.text(330, 20, "hidden h = ReLU(W x + b)", cls="title")
    c.text(570, 70, "output", cls="title")
    c.text(570, 90, "y = ReLU(U h)", cls="small")
    return c


@diagram("window-lm", "The feedforward window language model",
         "The feedforward window language model (SLP eq. 6.24), here with a window of N = 3 tokens: each token's "
         "embedding E x is looked up, the N embeddings are concatenated into e, a hidden layer h = g(W e + b) and the "
         "output layer z = U h follow, and ŷ = softmax(z) is the distribution of the next token w_{t+1}.",
         "tutorials/window-lm.md#the-model")
def draw_window_lm() -> Canvas:
    c = Canvas(680, 440)
    cx = 250
    words = [(110, "w_{t−2}", "x_{t−2}"), (250, "w_{t−1}", "x_{t−1}"), (390, "w_t", "x_t")]
    for x, word, onehot in words:
        c.box(x, 410, 70, 30, word, fill="green", math_=True)
        c.arrow(x, 395, x, 352)
        c.box(x, 335, 50, 30, "E", fill="grey", math_=True)
        c.arrow(x, 320, x, 290)
        c.vector(x, 278, 4, fill="blue")
        c.math(x + 44, 278, f"E {onehot}", size=13, anchor="start")
    for k, (x, _, _) in enumerate(words):
        c.line([(x, 270), (x, 250), (cx - 84 + k * 56, 236)], arrow=True)
    c.vector(cx, 222, 12, fill="blue")
    c.math(cx + 100, 222, "e = [E x_{t−2}; E x_{t−1}; E x_t]", size=14, anchor="start")
    c.arrow(cx, 212, cx, 186)
    c.box(cx, 168, 150, 32, "h = g(W e + b)", fill="orange", math_=True)
    c.text(cx + 100, 168, "hidden layer: g = tanh, sigmoid or ReLU", anchor="start", cls="small")
    c.arrow(cx, 152, cx, 126)
    c.box(cx, 108, 150, 32, "z = U h", fill="purple", math_=True)
    c.text(cx + 100, 108, "one score per token of the vocabulary", anchor="start", cls="small")
    c.arrow(cx, 92, cx, 66)
    c.box(cx, 48, 150, 32, "ŷ = softmax(z)", fill="yellow", math_=True)
    c.math(cx + 100, 48, "P(w_{t+1} | w_{t−2}, w_{t−1}, w_t)", size=14, anchor="start")
    c.text(470, 335, "one matrix E, shared", anchor="start", cls="small")
    c.text(470, 410, "the window of N = 3 tokens", anchor="start", cls="small")
    return c


# ============================================================================ RNNs: unrolled, BPTT, generation
def rnn_step(c: Canvas, x: float, t: str, y_top: float = 60, y_h: float = 150, y_x: float = 240,
             out: str = "y", cls: str = "") -> None:
    """One column of an unrolled RNN: x_t -> h_t -> y_t with W and V on the arrows."""
    c.box(x, y_x, 48, 30, f"x_{t}", fill="green", math_=True, cls=cls)
    c.arrow(x, y_x - 15, x, y_h + 18, cls=cls)
    c.math(x + 10, (y_x + y_h) / 2, "W", size=13, anchor="start")
    c.box(x, y_h, 52, 36, f"h_{t}", fill="blue", math_=True, cls=cls)
    c.arrow(x, y_h - 18, x, y_top + 15, cls=cls)
    c.math(x + 10, (y_h + y_top) / 2, "V", size=13, anchor="start")
    c.box(x, y_top, 48, 30, f"{out}_{t}", fill="yellow", math_=True, cls=cls)


@diagram("rnn-unrolled", "The Elman RNN, folded and unrolled over time",
         "The simple recurrent network (Elman) folded, left, and unrolled over four time steps, right: "
         "h_t = g(U h_{t−1} + W x_t) (SLP eq. 13.1) and y_t = softmax(V h_t) (eq. 13.2). The same U, W and V are "
         "used at every step.", "tutorials/rnn-lm.md#the-equations")
def draw_rnn_unrolled() -> Canvas:
    c = Canvas(700, 300)
    rnn_step(c, 70, "t")
    c.curve((96, 160), (150, 185), (150, 115), (96, 140))
    c.math(150, 150, "U", size=14, anchor="start")
    c.text(195, 150, "=", size=24)
    c.box(235, 150, 44, 32, "h_0", fill="grey", math_=True)
    xs = [320, 440, 560, 680 - 40]
    for k, x in enumerate(xs, 1):
        rnn_step(c, x, str(k))
        prev = xs[k - 2] + 26 if k > 1 else 257
        c.arrow(prev, 150, x - 26, 150)
        c.math((prev + x - 26) / 2, 138, "U", size=13)
    c.text(70, 285, "folded", cls="small")
    c.text(470, 285, "unrolled: the same U, W, V at every step", cls="small")
    c.math(330, 18, "h_t = g(U h_{t−1} + W x_t)  (13.1)", size=14)
    c.math(560, 18, "y_t = softmax(V h_t)  (13.2)", size=14)
    return c


@diagram("bptt", "Backpropagation through time, truncated",
         "Backpropagation through time (SLP 9.2.2), truncated: the network reads the true tokens (teacher forcing) "
         "and the loss L_t is taken at every step; the gradient (orange) flows back from each L_t through V and "
         "through h_t, h_{t−1}, … via U, but only within its segment of `--seq-len` steps (here 3). At the cut the "
         "hidden state's value goes on to the next segment (`detach_state`); its gradient stops.",
         "tutorials/rnn-lm.md#teacher-forcing-and-truncated-backpropagation-through-time")
def draw_bptt() -> Canvas:
    c = Canvas(700, 330)
    y_l, y_h, y_x = 62, 170, 270
    xs = [120, 210, 300, 420, 510, 600]
    c.box(40, y_h, 40, 32, "h_0", fill="grey", math_=True)
    for k, x in enumerate(xs, 1):
        c.box(x, y_x, 44, 28, f"x_{k}", fill="green", math_=True)
        c.arrow(x, y_x - 14, x, y_h + 17)
        c.box(x, y_h, 46, 34, f"h_{k}", fill="blue", math_=True)
        c.arrow(x - 8, y_h - 17, x - 8, y_l + 15)
        c.box(x, y_l, 44, 30, f"L_{k}", fill="red", math_=True)
        c.arrow(x + 8, y_l + 15, x + 8, y_h - 17, colour=ACCENT, dashed=True, width=1.6)
    for k, x in enumerate(xs):
        prev = xs[k - 1] + 23 if k else 60
        if k == 3:
            c.arrow(prev, y_h - 6, x - 23, y_h - 6, dashed=True)
            c.text((prev + x - 23) / 2, y_h - 22, "value", cls="small")
            c.text((prev + x - 23) / 2, y_h + 12, "✕ gradient", cls="small")
            continue
        c.arrow(prev, y_h - 6, x - 23, y_h - 6)
        if k:
            c.arrow(x - 23, y_h + 8, prev, y_h + 8, colour=ACCENT, dashed=True, width=1.6)
    mid = (xs[2] + xs[3]) / 2
    c.line([(mid, 35), (mid, 300)], arrow=False, dashed=True, width=1)
    c.text(210, 20, "segment 1 (--seq-len 3)", cls="title")
    c.text(510, 20, "segment 2", cls="title")
    c.text(210, 312, "inputs: the true tokens (teacher forcing)", cls="small")
    c.arrow(440, 312, 470, 312, colour=ACCENT, dashed=True, width=1.6)
    c.math(478, 312, "∂L/∂h: the gradient", size=13, anchor="start")
    return c


@diagram("rnn-generation", "Autoregressive generation with an RNN language model",
         "Autoregressive generation (SLP 9.2.3): at each step the model's distribution y_t gives the next token "
         "(sampled, or the most likely one), and that token is fed back as the next input. The words are the "
         "book's; the tutorial's model does the same character by character.",
         "tutorials/rnn-lm.md#evaluate-and-generate")
def draw_rnn_generation() -> Canvas:
    c = Canvas(700, 330)
    words = ["<s>", "So", "long", "and", "thanks"]
    xs = [70, 190, 310, 430]
    y_w, y_h, y_y, y_out = 280, 185, 115, 45
    for k, x in enumerate(xs):
        c.box(x, y_w, 64, 28, words[k], fill="green")
        c.arrow(x, y_w - 14, x, y_h + 17)
        c.box(x, y_h, 50, 34, f"h_{k + 1}", fill="blue", math_=True)
        c.arrow(x, y_h - 17, x, y_y + 14)
        c.box(x, y_y, 50, 28, f"y_{k + 1}", fill="yellow", math_=True)
        c.arrow(x, y_y - 14, x, y_out + 14)
        c.box(x, y_out, 64, 28, words[k + 1], fill="orange")
        if k:
            c.arrow(xs[k - 1] + 25, y_h, x - 25, y_h)
        if k + 1 < len(xs):
            c.curve((x + 32, y_out + 4), (x + 90, y_out + 40), (xs[k + 1] - 80, y_w - 60),
                    (xs[k + 1] - 20, y_w - 14), colour=ACCENT, dashed=True, width=1.6)
    c.text(510, y_out, "the token drawn from y_t", anchor="start", cls="small")
    c.math(510, y_y, "y_t = softmax(V h_t)", size=14, anchor="start")
    c.math(510, y_h, "h_t = g(U h_{t−1} + W x_t)", size=14, anchor="start")
    c.text(510, y_w, "fed back as the next input", anchor="start", cls="small")
    return c


# ============================================================================ LSTM and GRU cells
def gate(c: Canvas, x: float, y: float, fn: str, number: str, fill: str) -> None:
    c.box(x, y, 58, 40, fn, fill=fill, math_=fn == "σ", sub=number, size=15)


@diagram("lstm-cell", "The LSTM cell",
         "The LSTM cell (SLP eqs. 13.20–13.27): from h_{t−1} and x_t, the forget gate f_t (13.20), the candidate g_t "
         "(13.22), the add gate i_t (13.23) and the output gate o_t (13.26); the context keeps k_t = c_{t−1} ⊙ f_t "
         "(13.21), takes in j_t = g_t ⊙ i_t (13.24), and becomes c_t = j_t + k_t (13.25); the new hidden state is "
         "h_t = o_t ⊙ tanh(c_t) (13.27).", "tutorials/lstm-gru.md#the-lstm")
def draw_lstm_cell() -> Canvas:
    c = Canvas(700, 390)
    c.box(360, 190, 500, 290, fill="grey", rx=14, dashed=True)
    top, bus, gy = 80, 310, 245
    fx, ix, gx, ox = 190, 290, 380, 470
    # the context line
    c.math(30, top - 16, "c_{t−1}", size=15)
    c.arrow(15, top, fx - 12, top)
    c.op(fx, top, "⊙")
    c.arrow(fx + 11, top, 319, top)
    c.math(255, top - 15, "k_t", size=15)
    c.text(255, top + 16, "13.21", cls="eq")
    c.op(330, top, "+")
    c.arrow(341, top, 690, top)
    c.math(650, top - 16, "c_t", size=15)
    c.text(650, top + 14, "13.25", cls="eq")
    # the gates, from the bus [h_{t-1}, x_t]
    c.math(30, bus - 14, "h_{t−1}", size=15)
    c.line([(15, bus), (ox, bus)], arrow=False)
    c.dot(120, bus)
    c.arrow(120, 370, 120, bus)
    c.math(132, 366, "x_t", size=15, anchor="start")
    for x, fn, number, fill in ((fx, "σ", "13.20", "orange"), (ix, "σ", "13.23", "orange"),
                                (gx, "tanh", "13.22", "blue"), (ox, "σ", "13.26", "orange")):
        c.dot(x, bus)
        c.arrow(x, bus, x, gy + 20)
        gate(c, x, gy, fn, number, fill)
    c.arrow(fx, gy - 20, fx, top + 11)
    c.math(fx + 8, 160, "f_t", size=15, anchor="start")
    c.op(330, 160, "⊙")
    c.arrow(ix, gy - 20, 322, 168)
    c.math(ix - 2, 188, "i_t", size=15, anchor="end")
    c.arrow(gx, gy - 20, 338, 168)
    c.math(gx + 2, 188, "g_t", size=15, anchor="start")
    c.arrow(330, 149, 330, top + 11)
    c.math(338, 122, "j_t", size=15, anchor="start")
    c.text(356, 123, "13.24", cls="eq", anchor="start")
    # the output: h_t = o_t ⊙ tanh(c_t)
    c.dot(545, top)
    c.arrow(545, top, 545, 117)
    c.box(545, 134, 52, 30, "tanh", fill="blue")
    c.arrow(545, 149, 545, 189)
    c.op(545, 200, "⊙")
    c.line([(ox, gy - 20), (ox, 200), (534, 200)])
    c.math(ox + 8, 212, "o_t", size=15, anchor="start")
    c.arrow(556, 200, 690, 200)
    c.math(650, 186, "h_t", size=15)
    c.text(650, 214, "13.27", cls="eq")
    c.text(360, 372, "each gate reads h_{t−1} and x_t: σ(U h_{t−1} + W x_t), or tanh for g", cls="small")
    return c


@diagram("gru-cell", "The GRU cell",
         "The GRU cell (SLP eqs. 9.10–9.13), the book's variant: the reset gate r_t (9.10) and the update gate z_t "
         "(9.11) are read from h_{t−1} and x_t; the candidate h̃_t = tanh(U (r_t ⊙ h_{t−1}) + W x_t) (9.12); the new "
         "state mixes them, h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t (9.13).", "tutorials/lstm-gru.md#the-gru")
def draw_gru_cell() -> Canvas:
    c = Canvas(700, 390)
    c.box(355, 195, 510, 290, fill="grey", rx=14, dashed=True)
    top, bus, gy = 70, 320, 260
    rx_, hx, zx = 170, 320, 450
    c.math(28, top - 16, "h_{t−1}", size=15)
    c.arrow(10, top, zx - 12, top)
    c.dot(60, top)
    c.op(zx, top, "⊙")
    c.arrow(zx + 11, top, 569, top)
    c.op(580, top, "+")
    c.arrow(591, top, 690, top)
    c.math(650, top - 16, "h_t", size=15)
    c.text(650, top + 14, "9.13", cls="eq")
    # the bus [h_{t-1}, x_t]
    c.line([(60, top), (60, bus), (zx, bus)], arrow=False)
    c.dot(110, bus)
    c.arrow(110, 375, 110, bus)
    c.math(122, 370, "x_t", size=15, anchor="start")
    for x, fn, number, fill in ((rx_, "σ", "9.10", "orange"), (hx, "tanh", "9.12", "blue"),
                                (zx, "σ", "9.11", "orange")):
        c.dot(x, bus)
        c.arrow(x, bus, x, gy + 20)
        gate(c, x, gy, fn, number, fill)
    # reset: r_t ⊙ h_{t-1} into the candidate
    c.dot(60, 170)
    c.arrow(60, 170, rx_ - 11, 170)
    c.op(rx_, 170, "⊙")
    c.arrow(rx_, gy - 20, rx_, 181)
    c.math(rx_ + 8, 212, "r_t", size=15, anchor="start")
    c.line([(rx_ + 11, 170), (240, 170), (240, gy), (hx - 29, gy)])
    c.math(250, 150, "r_t ⊙ h_{t−1}", size=14, anchor="start")
    # update: z_t into both mixes
    c.line([(zx, gy - 20), (zx, 167)], arrow=False)
    c.circle(zx, 130, 16, "1−", fill="yellow", size=12)
    c.arrow(zx, 153, zx, 146)
    c.arrow(zx, 114, zx, top + 11)
    c.math(zx + 8, 100, "1 − z_t", size=14, anchor="start")
    c.dot(zx, 205)
    c.line([(zx, 205), (580, 205), (580, 171)])
    c.math(zx + 8, 225, "z_t", size=15, anchor="start")
    # candidate into z_t ⊙ h̃_t
    c.line([(hx, gy - 20), (hx, 160), (569, 160)])
    c.math(370, 148, "h̃_t", size=15)
    c.op(580, 160, "⊙")
    c.arrow(580, 149, 580, top + 11)
    c.text(355, 372, "r_t and z_t read h_{t−1} and x_t: σ(U h_{t−1} + W x_t)", cls="small", anchor="start")
    return c


# ============================================================================ stacked, bidirectional, heads
@diagram("stacked-rnn", "A stacked RNN",
         "A stacked RNN of two layers: layer l reads the states of the layer below, h^{(l−1)}_1 … h^{(l−1)}_n, with "
         "h^{(0)}_t = x_t, and each layer has its own recurrent weights (SLP 9.2.5).",
         "tutorials/stacked-bidirectional.md#stacked-and-bidirectional-layers")
def draw_stacked_rnn() -> Canvas:
    c = Canvas(660, 330)
    xs = [150, 290, 430, 570]
    rows = {0: 290, 1: 205, 2: 115}
    for k, x in enumerate(xs, 1):
        c.box(x, rows[0], 48, 28, f"x_{k}", fill="green", math_=True)
        c.arrow(x, rows[0] - 14, x, rows[1] + 18)
        c.box(x, rows[1], 62, 36, f"h^{{(1)}}_{k}", fill="blue", math_=True)
        c.arrow(x, rows[1] - 18, x, rows[2] + 18)
        c.box(x, rows[2], 62, 36, f"h^{{(2)}}_{k}", fill="purple", math_=True)
        c.arrow(x, rows[2] - 18, x, 48)
        c.box(x, 34, 48, 26, f"y_{k}", fill="yellow", math_=True)
        if k > 1:
            for r in (1, 2):
                c.arrow(xs[k - 2] + 31, rows[r], x - 31, rows[r])
    c.text(20, rows[2], "layer 2", anchor="start", cls="title")
    c.text(20, rows[1], "layer 1", anchor="start", cls="title")
    c.text(20, rows[0], "input", anchor="start", cls="title")
    c.text(20, rows[0] + 20, "h^{(0)} = x", anchor="start", cls="small")
    return c


@diagram("bidirectional-rnn", "A bidirectional RNN",
         "A bidirectional RNN (SLP 9.2.6, Fig. 9.12): a forward RNN reads x_1 … x_t (h^f_t), a backward RNN reads "
         "x_t … x_n (h^b_t), and each position's state is their concatenation h_t = [h^f_t ; h^b_t].",
         "tutorials/stacked-bidirectional.md#stacked-and-bidirectional-layers")
def draw_bidirectional_rnn() -> Canvas:
    c = Canvas(680, 350)
    xs = [170, 300, 430, 560]
    y_x, y_f, y_b, y_h = 318, 245, 170, 72
    for k, x in enumerate(xs, 1):
        c.box(x, y_x, 48, 28, f"x_{k}", fill="green", math_=True)
        c.line([(x - 10, y_x - 14), (x - 10, y_x - 26), (x - 24, y_x - 26), (x - 24, y_f + 17)])
        c.line([(x + 10, y_x - 14), (x + 10, y_x - 26), (x + 24, y_x - 26), (x + 24, y_b + 17)])
        c.box(x - 24, y_f, 50, 34, f"h^f_{k}", fill="blue", math_=True)
        c.box(x + 24, y_b, 50, 34, f"h^b_{k}", fill="orange", math_=True)
        c.arrow(x - 24, y_f - 17, x - 15, y_h + 14)
        c.arrow(x + 24, y_b - 17, x + 15, y_h + 14)
        c.box(x - 15, y_h, 30, 28, fill="blue", rx=2)
        c.box(x + 15, y_h, 30, 28, fill="orange", rx=2)
        c.math(x, y_h - 28, f"h_{k}", size=15)
        if k > 1:
            c.arrow(xs[k - 2] + 1, y_f, x - 49, y_f)
            c.arrow(x - 1, y_b, xs[k - 2] + 49, y_b)
    c.text(16, y_f, "forward", anchor="start", cls="title")
    c.text(16, y_b, "backward", anchor="start", cls="title")
    c.text(16, y_h, "[h^f_t ; h^b_t]", anchor="start", cls="title")
    c.text(16, y_x, "input", anchor="start", cls="title")
    return c


@diagram("rnn-tagging", "An RNN tagger: a softmax per token",
         "Sequence labelling with an RNN (SLP 9.2.4, 13.3.1): a bidirectional encoder reads the sentence and each "
         "position gets its own softmax over the tags, ŷ_t = softmax(V h_t), trained with the cross-entropy of "
         "every token's gold tag.", "tutorials/stacked-bidirectional.md#the-tagger")
def draw_rnn_tagging() -> Canvas:
    c = Canvas(680, 340)
    words = ["Janet", "will", "back", "the", "bill"]
    tags = ["PROPN", "AUX", "VERB", "DET", "NOUN"]
    xs = [55, 160, 265, 370, 475]
    for k, (x, word, tag) in enumerate(zip(xs, words, tags, strict=True), 1):
        c.box(x, 305, 70, 28, word, fill="green")
        c.arrow(x, 291, x, 262)
        c.box(x, 245, 56, 32, "E", fill="grey", math_=True)
        c.arrow(x, 229, x, 192)
        c.box(x, 175, 56, 34, f"h_{k}", fill="blue", math_=True)
        c.arrow(x, 158, x, 123)
        c.box(x, 105, 90, 34, "softmax", fill="yellow", size=13)
        c.arrow(x, 88, x, 60)
        c.box(x, 44, 74, 28, tag, fill="orange", size=13)
        if k > 1:
            c.arrow(xs[k - 2] + 28, 169, x - 28, 169)
            c.arrow(x - 28, 181, xs[k - 2] + 28, 181)
    c.text(535, 175, "a BiLSTM", anchor="start", cls="small")
    c.math(535, 105, "ŷ_t = softmax(V h_t)", size=14, anchor="start")
    c.text(535, 44, "one tag per token", anchor="start", cls="small")
    c.text(535, 245, "embeddings", anchor="start", cls="small")
    return c


@diagram("rnn-classification", "An RNN classifier: one softmax for the sequence",
         "Sequence classification with an RNN (SLP 13.3.2, Fig. 9.12): the forward direction's state after the last "
         "token joined to the backward direction's state after the first, [h^f_n ; h^b_1], or a pooling of every "
         "state (`--pooling mean` or `max`), goes through one linear layer and a softmax over the classes.",
         "tutorials/stacked-bidirectional.md#sentence-classification-a-bilstm-against-a-bag-of-embeddings")
def draw_rnn_classification() -> Canvas:
    c = Canvas(690, 380)
    words = ["not", "bad", "at", "all"]
    xs = [110, 230, 350, 470]
    y_w, y_f, y_b = 350, 280, 205
    for k, (x, word) in enumerate(zip(xs, words, strict=True), 1):
        c.box(x, y_w, 62, 26, word, fill="green")
        c.arrow(x - 22, y_w - 13, x - 22, y_f + 16)
        c.arrow(x + 22, y_w - 13, x + 22, y_b + 16)
        c.box(x - 22, y_f, 50, 32, f"h^f_{k}", fill="blue", math_=True)
        c.box(x + 22, y_b, 50, 32, f"h^b_{k}", fill="orange", math_=True)
        if k > 1:
            c.arrow(xs[k - 2] + 3, y_f, x - 47, y_f)
            c.arrow(x - 3, y_b, xs[k - 2] + 47, y_b)
        c.arrow(x + 22, y_b - 16, 290 + (x - 290) * 0.35, 84, dashed=True, width=1)
    vx, vy = 560, 122
    c.box(vx - 15, vy, 30, 28, fill="blue", rx=2)
    c.box(vx + 15, vy, 30, 28, fill="orange", rx=2)
    c.math(vx + 38, vy, "[h^f_4 ; h^b_1]", size=14, anchor="start")
    c.line([(xs[-1] + 3, y_f), (vx - 15, y_f), (vx - 15, vy + 14)])
    c.line([(xs[0] + 22, y_b - 16), (xs[0] + 22, 160), (vx + 15, 160), (vx + 15, vy + 14)], halo=True)
    c.arrow(vx, vy - 14, vx, 83)
    c.box(vx, 68, 130, 30, "linear, softmax", fill="yellow", size=13)
    c.arrow(vx, 53, vx, 34)
    c.box(vx, 20, 56, 26, "pos", fill="orange", size=13)
    c.box(290, 68, 210, 30, "or: pooling (mean, max)", fill="grey", dashed=True, size=13)
    c.arrow(395, 68, vx - 65, 68, dashed=True, width=1)
    c.text(560, 205, "the final states", anchor="start", cls="small")
    return c


# ============================================================================ attention and the transformer
def attention_numbers() -> tuple[list[list[float]], list[list[float]]]:
    """The scores q_i · k_j / √d_k and weights α_{ij} (j ≤ i) of transformer-lm.md's worked example."""
    Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    K = [[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]
    scores = [[sum(q * k for q, k in zip(Q[i], K[j], strict=True)) / math.sqrt(2) for j in range(i + 1)]
              for i in range(3)]
    weights = [[math.exp(s) / sum(math.exp(t) for t in row) for s in row] for row in scores]
    return scores, weights


def grid(c: Canvas, x0: float, y0: float, cell: float, values: list[list[float]], masked: str, fill: str) -> None:
    """A 3 x 3 matrix whose rows are queries i and columns keys j; above the diagonal the masked value."""
    for i in range(3):
        for j in range(3):
            x, y = x0 + j * cell + cell / 2, y0 + i * cell + cell / 2
            if j <= i:
                c.box(x, y, cell, cell, f"{values[i][j]:.2f}", fill=fill, rx=0, size=12)
            else:
                c.box(x, y, cell, cell, masked, fill="grey", rx=0, size=12, cls="faded")


@diagram("self-attention", "Causal self-attention",
         "Causal self-attention (SLP eqs. 9.20–9.21): queries, keys and values come from the inputs, q_i = x_i W^Q, "
         "k_i = x_i W^K, v_i = x_i W^V; query i scores every key j ≤ i by q_i · k_j / √d_k (the causal mask sets the "
         "rest to −∞), a softmax over j gives the weights α_{ij}, and the output is a_i = Σ_j α_{ij} v_j. The numbers "
         "are those of the tutorial's worked example (three positions, d_k = 2).",
         "tutorials/transformer-lm.md#attention-by-hand")
def draw_self_attention() -> Canvas:
    c = Canvas(700, 350)
    scores, weights = attention_numbers()
    # X and its projections
    for k in range(3):
        c.box(45, 135 + k * 34, 50, 34, f"x_{k + 1}", fill="green", math_=True, rx=0)
    c.math(45, 100, "X", size=16)
    for name, y, fill in (("q", 70, "orange"), ("k", 175, "blue"), ("v", 280, "purple")):
        for k in range(3):
            c.box(175, y - 30 + k * 30, 50, 30, f"{name}_{k + 1}", fill=fill, math_=True, rx=0, size=14)
        c.arrow(70, 169, 148, y, width=1.2)
    c.math(106, 92, "W^Q", size=13, halo=True)
    c.math(106, 161, "W^K", size=13, halo=True)
    c.math(106, 246, "W^V", size=13, halo=True)
    # scores with the mask, then the weights
    cell = 42
    sx, sy = 262, 112
    c.arrow(202, 70, sx + 2, sy + 10, width=1.2)
    c.arrow(202, 175, sx + 2, sy + 100, width=1.2)
    c.math(226, 160, "K^⊤", size=13, halo=True)
    grid(c, sx, sy, cell, scores, "−∞", "yellow")
    c.math(sx + 1.5 * cell, 72, "q_i · k_j / √d_k", size=14)
    c.text(sx + 1.5 * cell, 92, "masked: j > i → −∞", cls="small")
    for k in range(3):
        c.text(sx - 9, sy + k * cell + cell / 2, str(k + 1), cls="small")
        c.text(sx + k * cell + cell / 2, sy + 3 * cell + 12, str(k + 1), cls="small")
    c.text(sx - 9, sy + 3 * cell + 12, "i\\j", cls="small")
    c.arrow(sx + 3 * cell + 4, sy + 1.5 * cell, 434, sy + 1.5 * cell)
    c.text(411, sy + 1.5 * cell - 14, "softmax", cls="small")
    c.text(411, sy + 1.5 * cell + 14, "over j", cls="small")
    ax = 440
    grid(c, ax, sy, cell, weights, "0", "orange")
    c.math(ax + 1.5 * cell, 72, "α_{ij}", size=15)
    c.text(ax + 1.5 * cell, 92, "each row sums to 1", cls="small")
    # A = α V
    c.arrow(ax + 3 * cell + 2, sy + 1.5 * cell, 597, sy + 1.5 * cell)
    c.op(608, sy + 1.5 * cell, "×")
    c.line([(200, 280), (608, 280), (608, sy + 1.5 * cell + 11)])
    c.math(520, 268, "V", size=14)
    c.arrow(619, sy + 1.5 * cell, 640, sy + 1.5 * cell)
    for k in range(3):
        c.box(665, sy + 21 + k * 34, 44, 34, f"a_{k + 1}", fill="green", math_=True, rx=0)
    c.math(690, 72, "a_i = Σ_{j≤i} α_{ij} v_j", size=14, anchor="end")
    c.text(350, 330, "A = softmax(mask(Q K^⊤ / √d_k)) V", cls="small")
    return c


def block_column(c: Canvas, x: float, pre: bool) -> None:
    """One transformer block, bottom to top, post-LN (the book) or pre-LN; the residual stream on its right."""
    attention, ffn = ("box", "multi-head attention", "orange"), ("box", "FFN", "blue")
    norm = ("box", "LayerNorm", "yellow")
    if pre:
        steps = [("X",), ("branch",), norm, attention, ("plus",), ("T1",), norm, ffn, ("plus",), ("H",)]
    else:
        steps = [("X",), ("branch",), attention, ("plus",), norm, ("T1",), ffn, ("plus",), norm, ("H",)]
    size = {"X": 20, "branch": 0, "box": 30, "plus": 24, "T1": 0, "H": 20}
    rail, y, below, branch = x + 120, 400, None, None
    for step in steps:
        h = size[step[0]]
        centre = y - h / 2
        if below is not None:
            c.arrow(x, below, x, y) if h else c.line([(x, below), (x, y)], arrow=False)
        if step[0] == "X":
            c.math(x, centre, "X", size=16)
        elif step[0] == "H":
            c.math(x, centre, "H", size=16)
        elif step[0] in ("branch", "T1"):
            c.dot(x, centre)
            branch = centre
            if step[0] == "T1":
                c.math(x - 12, centre, "T_1", size=15, anchor="end")
        elif step[0] == "plus":
            c.op(x, centre, "+", r=12)
            c.line([(x, branch), (rail, branch), (rail, centre), (x + 12, centre)])
        else:
            c.box(x, centre, 170, h, step[1], fill=step[2], size=13)
        below = y - h
        y = below - (18 if h else 14)


@diagram("transformer-block", "A transformer block, post-LN and pre-LN",
         "A transformer block: multi-head attention and a feedforward network (FFN), each inside a residual "
         "connection and a layer norm. Left, post-LN, the book's and seqlab's default: T_1 = LayerNorm(X + "
         "MultiHeadAttention(X)), H = LayerNorm(T_1 + FFN(T_1)). Right, pre-LN (GPT-2, `--norm-position pre`): "
         "T_1 = X + MultiHeadAttention(LayerNorm(X)), H = T_1 + FFN(LayerNorm(T_1)), with a final LayerNorm after "
         "the last block. The residual stream runs up the right of each column.",
         "tutorials/transformer-lm.md#the-block-residual-stream-and-layer-norm")
def draw_transformer_block() -> Canvas:
    c = Canvas(680, 410)
    c.text(170, 16, "post-LN (the book, the default)", cls="title")
    c.text(510, 16, "pre-LN (--norm-position pre)", cls="title")
    block_column(c, 150, pre=False)
    block_column(c, 490, pre=True)
    return c


# ============================================================================ encoder-decoders
@diagram("encoder-decoder", "An RNN encoder-decoder without attention",
         "An RNN encoder-decoder without attention (SLP 13.7): the encoder reads the source x_1 … x_n; its final "
         "state is the context c = h^e_n, which initialises the decoder, h^d_0 = c (eq. 13.32), and is read at every "
         "decoder step, h^d_t = g(ŷ_{t−1}, h^d_{t−1}, c) (eq. 13.33). In training the decoder reads the reference's "
         "previous token (teacher forcing); when translating, its own previous output.",
         "tutorials/encoder-decoder.md#without-attention")
def draw_encoder_decoder() -> Canvas:
    c = Canvas(700, 350)
    src = ["der", "baum", "unter"]
    tgt_in = ["<s>", "under", "the", "tree"]
    tgt_out = ["under", "the", "tree", "</s>"]
    ex = [45, 130, 215]
    dx = [390, 480, 570, 660]
    yh, yw, yo = 180, 300, 62
    for k, (x, word) in enumerate(zip(ex, src, strict=True), 1):
        c.box(x, yw, 62, 26, word, fill="green")
        c.arrow(x, yw - 13, x, yh + 17)
        c.box(x, yh, 56, 34, f"h^e_{k}", fill="blue", math_=True)
        if k > 1:
            c.arrow(ex[k - 2] + 28, yh, x - 28, yh)
    c.arrow(ex[-1] + 28, yh, 277, yh)
    c.circle(300, yh, 23, "c", fill="purple", math_=True)
    c.math(300, yh - 40, "c = h^e_3", size=14)
    c.arrow(323, yh, dx[0] - 28, yh)
    c.text(346, yh + 13, "13.32", cls="eq")
    c.line([(300, yh + 23), (300, 240), (dx[-1] - 14, 240)], arrow=False, dashed=True, width=1.2)
    for k, x in enumerate(dx, 1):
        c.box(x, yw, 62, 26, tgt_in[k - 1], fill="orange", size=13)
        c.arrow(x + 8, yw - 13, x + 8, yh + 17, halo=True)
        c.arrow(x - 14, 240, x - 14, yh + 17, dashed=True, width=1.2)
        c.box(x, yh, 56, 34, f"h^d_{k}", fill="blue", math_=True)
        c.arrow(x, yh - 17, x, yo + 13)
        c.box(x, yo, 62, 26, tgt_out[k - 1], fill="yellow", size=13)
        if k > 1:
            c.arrow(dx[k - 2] + 28, yh, x - 28, yh)
    c.text(130, 335, "encoder: the source", cls="title")
    c.text(530, 335, "decoder: previous token in, next out", cls="title")
    c.math(690, 22, "h^d_t = g(ŷ_{t−1}, h^d_{t−1}, c)  (13.33)", size=14, anchor="end")
    c.text(308, 256, "c at every step", cls="small", anchor="start")
    return c


@diagram("encoder-decoder-attention", "An encoder-decoder with attention",
         "Attention in an encoder-decoder (SLP 13.8): at decoder step i the previous decoder state h^d_{i−1} scores "
         "every encoder state, score(h^d_{i−1}, h^e_j) = h^d_{i−1} · h^e_j (eq. 13.35); a softmax over j gives the "
         "weights α_{ij} (13.36), and the context is c_i = Σ_j α_{ij} h^e_j (13.37), a new one at every step. Here the "
         "decoder has written “under” and attends mostly to “der” to write “the”.",
         "tutorials/encoder-decoder.md#attention-a-new-context-at-every-step")
def draw_encoder_decoder_attention() -> Canvas:
    c = Canvas(700, 440)
    src = ["der", "baum", "unter"]
    alpha = [0.82, 0.12, 0.06]          # illustrative: writing "the" after "under" looks at "der"
    ex = [150, 260, 370]
    yw, ye, yq, ys, ya, yc = 395, 330, 285, 240, 145, 48
    d1, d2 = 490, 600
    c.text(10, ys, "score", anchor="start", cls="title")
    c.text(10, ys + 18, "13.35", anchor="start", cls="eq")
    c.text(10, ya, "weights α", anchor="start", cls="title")
    c.text(10, ya + 18, "softmax over j, 13.36", anchor="start", cls="eq")
    c.text(10, yc, "context", anchor="start", cls="title")
    for k, (x, word) in enumerate(zip(ex, src, strict=True), 1):
        c.box(x, yw, 62, 24, word, fill="green")
        c.arrow(x, yw - 12, x, ye + 17)
        c.box(x, ye, 56, 34, f"h^e_{k}", fill="blue", math_=True)
        if k > 1:
            c.arrow(ex[k - 2] + 28, ye, x - 28, ye)
        c.arrow(x - 10, ye - 17, x - 10, ys + 14, halo=True)
        c.circle(x, ys, 15, "·", fill="yellow", size=22)
        c.arrow(x, ys - 15, x, ya + 27)
        c.box(x, ya, 22, 50, fill="none", rx=2, dashed=True, cls="faded")
        bar = 50 * alpha[k - 1]
        c.box(x, ya + 25 - bar / 2, 22, bar, fill="orange", rx=1)
        c.math(x + 16, ya - 10, f"α_{{2{k}}}", size=14, anchor="start")
        c.arrow(x, ya - 25, x, yc + 17)
        c.line([(x + 28, ye - 17), (x + 48, ye - 40), (x + 48, yc + 17)], dashed=True, width=1, halo=True)
    c.box(260, yc, 330, 34, "c_2 = Σ_j α_{2j} h^e_j   (13.37)", fill="purple", math_=True, size=15)
    # the query h^d_1
    c.line([(d1 - 28, yq), (ex[0] + 10, yq)], arrow=False)
    for x in ex:
        c.arrow(x + 10, yq, x + 10, ys + 14)
    c.math(d1 - 40, ys, "h^d_1 · h^e_j", size=14, anchor="start")
    c.box(d1, yq, 56, 34, "h^d_1", fill="blue", math_=True)
    c.box(d2, yq, 56, 34, "h^d_2", fill="blue", math_=True)
    c.arrow(d1 + 28, yq, d2 - 28, yq)
    c.line([(425, yc), (d2, yc), (d2, yq - 17)])
    c.math(d2 + 8, 150, "c_2", size=15, anchor="start")
    c.box(d1, yw, 56, 24, "<s>", fill="orange", size=13)
    c.arrow(d1, yw - 12, d1, yq + 17)
    c.box(d2, yw, 64, 24, "under", fill="orange", size=13)
    c.arrow(d2, yw - 12, d2, yq + 17)
    c.arrow(d2 + 28, yq, 640, yq)
    c.box(666, yq, 48, 26, "the", fill="yellow", size=13)
    c.math(666, yq - 28, "ŷ_2", size=14)
    c.text(260, 428, "encoder", cls="title")
    c.text(560, 428, "decoder, step 2", cls="title")
    return c


# ============================================================================ beam search
# The toy language model of transformer-lm.md's worked beam search: P(next token | the tokens so far), for every
# prefix of at most two tokens over the vocabulary A, B and </s>; the outputs are at most 3 tokens long.
BEAM_EXAMPLE = {
    (): {"A": 0.5, "B": 0.4, "</s>": 0.1},
    ("A",): {"A": 0.42, "B": 0.2, "</s>": 0.38},
    ("B",): {"A": 0.45, "B": 0.3, "</s>": 0.25},
    ("A", "A"): {"A": 0.4, "B": 0.35, "</s>": 0.25},
    ("A", "B"): {"A": 0.35, "B": 0.25, "</s>": 0.4},
    ("B", "A"): {"A": 0.06, "B": 0.04, "</s>": 0.9},
    ("B", "B"): {"A": 0.2, "B": 0.3, "</s>": 0.5},
}
BEAM_WIDTH, BEAM_LENGTH = 2, 3


def beam_tree(table: dict = BEAM_EXAMPLE, K: int = BEAM_WIDTH, limit: int = BEAM_LENGTH) -> dict:
    """What seqlab's beam search (`seqlab.decoding.core.beam_steps`) does on the table, step by step: for every
    prefix it extends, each child's log probability and what became of it ("kept" in the next beam, "finished"
    by </s> among the K best, "pruned"); the finished hypotheses; the greedy path. Torch-free, for the drawing;
    tests/test_diagrams.py checks it against seqlab's own search."""
    live = [((), 0.0)]
    children: dict[tuple, list] = {}
    status: dict[tuple, str] = {}
    finished: list[tuple[tuple, float]] = []
    for t in range(limit):
        candidates = sorted(((prefix + (w,), score + math.log(p)) for prefix, score in live
                             for w, p in table[prefix].items()), key=lambda c: -c[1])
        for prefix, _ in live:
            children[prefix] = [(prefix + (w,), dict(live)[prefix] + math.log(p)) for w, p in table[prefix].items()]
        top = candidates[:2 * K]
        for seq, _ in candidates:
            status[seq] = "pruned"
        for seq, score in top[:K]:
            if seq[-1] == "</s>" and len(finished) < K:
                status[seq] = "finished"
                finished.append((seq, score))
        live = [(seq, score) for seq, score in top if seq[-1] != "</s>"][:K]
        if len(finished) >= K:
            break
        if t + 1 >= limit:
            for seq, score in live:
                if len(finished) < K:
                    status[seq] = "finished"
                    finished.append((seq, score))
            break
        for seq, _ in live:
            status[seq] = "kept"
    greedy, prefix = [()], ()
    for _ in range(limit):
        word = max(table[prefix], key=table[prefix].get)
        prefix += (word,)
        greedy.append(prefix)
        if word == "</s>":
            break
    return {"children": children, "status": status, "finished": finished, "greedy": greedy}


def normalized(seq: tuple, score: float, alpha: float = 1.0) -> float:
    """seqlab's ranking of a finished hypothesis (`seqlab.decoding.core.normalized`): log p / length^α, the length
    counting its </s>."""
    return score / max(len(seq), 1) ** alpha


@diagram("beam-search", "Beam search of width 2 on a toy language model",
         "Beam search with K = 2 on the toy model of the worked example: every prefix in the beam is extended by "
         "every token; the 2 best extensions stay in the beam (blue), an extension by </s> among the 2 best is a "
         "finished hypothesis (orange), the others are pruned (faded). The numbers are log probabilities, summed "
         "along the path. The search stops when 2 hypotheses have finished; ranked by log p / length (α = 1), "
         "B A </s> wins, although greedy search (dashed outline) goes A, A, A.",
         "tutorials/transformer-lm.md#beam-search-worked")
def draw_beam_search() -> Canvas:
    tree = beam_tree()
    children, status = tree["children"], tree["status"]
    greedy = set(tree["greedy"])
    best = max(tree["finished"], key=lambda f: normalized(*f))[0]
    rows: dict[tuple, float] = {}
    order: list[tuple] = []

    def place(prefix: tuple) -> float:           # leaves one row each, in order; a parent at its children's mean
        kids = children.get(prefix, [])
        if not kids:
            rows[prefix] = len(order)
            order.append(prefix)
            return rows[prefix]
        ys = [place(kid) for kid, _ in kids]
        rows[prefix] = sum(ys) / len(ys)
        return rows[prefix]

    place(())
    scores = {kid: s for kids in children.values() for kid, s in kids}
    row_h, top = 27, 52
    cols = [40, 165, 315, 465]
    c = Canvas(700, top + row_h * len(order) + 46)
    for k, title in enumerate(("", "step 1", "step 2", "step 3")):
        if title:
            c.text(cols[k], 18, title, cls="title")
    c.text(cols[2], 36, "log p, summed along the path", cls="small")
    y = {p: top + rows[p] * row_h for p in rows}
    w = 104
    for parent, kids in children.items():
        x0 = cols[len(parent)] + (w / 2 if parent else 22)
        for kid, _ in kids:
            x1 = cols[len(kid)] - w / 2
            faded = status.get(kid) == "pruned"
            c.line([(x0, y[parent]), (x0 + 16, y[parent]), (x1 - 16, y[kid]), (x1, y[kid])],
                   cls="faded" if faded else "", width=1.2)
    c.box(cols[0], y[()], 44, 24, "<s>", fill="green", size=13)
    for kid, score in scores.items():
        state = status.get(kid, "pruned")
        fill = {"kept": "blue", "finished": "orange"}.get(state, "grey")
        x = cols[len(kid)]
        cls = "faded" if state == "pruned" else ""
        stroke = ACCENT if state == "finished" else ""
        c.box(x, y[kid], w, 23, f"{kid[-1]}   {score:.2f}".replace("-", "−"), fill=fill, size=13, cls=cls,
              stroke=stroke, dashed=kid in greedy)
        if state == "finished":
            n = len(kid)
            text = f"{score:.2f} / {n} = {normalized(kid, score):.2f}".replace("-", "−")
            c.text(x + w / 2 + 8, y[kid], text + ("  ← best" if kid == best else ""), anchor="start", size=12.5,
                   cls="title" if kid == best else "")
    foot = top + row_h * len(order) + 8
    for k, (fill, label, dashed) in enumerate((("blue", "kept in the beam", False),
                                               ("orange", "finished (</s> among the 2 best)", False),
                                               ("grey", "pruned", False), ("none", "greedy's path", True))):
        x = 30 + [0, 150, 405, 500][k]
        c.box(x, foot + 16, 22, 14, fill=fill, rx=3, dashed=dashed, cls="faded" if fill == "grey" else "")
        c.text(x + 16, foot + 16, label, anchor="start", cls="small")
    return c


# ============================================================================ the code itself
@diagram("code-layers", "seqlab's layers, read from its imports",
         "seqlab's modules in their layers, bottom up, as `docs/hooks/structure.py` reads them from the code when "
         "the site is built: each box is a package or a top-level module, its width growing with its lines. Every "
         "import points down or stays in its layer (tests/test_layers.py holds the code to it); the shared "
         "capabilities reach a family only through the registry, at run time (the dashed arrow: "
         "`family.part(...)`). An import that ran up would be drawn in red.", "reference/code.md#imports")
def draw_code_layers() -> Canvas:
    import structure

    rooms, layers = structure.rooms(), structure.LAYERS
    left, right, width = 150, 712, 720
    span = right - left
    scale = span * 0.92 / max(sum(r.lines for r in rooms if r.layer == k) or 1 for k in range(len(layers)))
    rows = []                                   # per layer, bottom up: lines of (room, x, w)
    for k in range(len(layers)):
        lines, x, line = [], 0.0, []
        for room in (r for r in rooms if r.layer == k):
            w = max(len(room.name) * 6.6 + 14, room.lines * scale)
            if line and x + w > span:
                lines.append(line)
                line, x = [], 0.0
            line.append((room, x, w))
            x += w + 6
        lines.append(line)
        rows.append(lines)
    box, gap = 34, 8
    heights = [len(lines) * (box + 4) + gap for lines in rows]
    height = int(sum(heights) + 86)
    c = Canvas(width, height)
    y = height - 56                              # the bottom of the lowest layer
    where: dict[tuple[str, int], tuple[float, float]] = {}   # (room, layer) -> its box's centre
    middles = []
    for k, (layer, lines) in enumerate(zip(layers, rows, strict=True)):
        top = y - heights[k]
        fill = "orange" if layer.name == "families" else "green" if layer.name == "registry" else \
            "blue" if k >= len(layers) - 2 else "grey"
        c.raw(f'<rect x="6" y="{top + 2:g}" width="{width - 12:g}" height="{heights[k] - 4:g}" rx="6" '
              f'fill="{FILL[fill]}" stroke="none"/>')
        c.text(14, top + heights[k] / 2, layer.name, anchor="start", cls="title small")
        for n, line in enumerate(lines):
            cy = top + gap / 2 + 2 + n * (box + 4) + box / 2
            for room, x, w in line:
                c.box(left + x + w / 2, cy, w, box, room.name, fill="none", rx=4, size=11.5,
                      sub=f"{room.lines:,}", literal=True)
                where[room.name, k] = (left + x + w / 2, cy)
        middles.append(top + heights[k] / 2)
        y = top
    # the one door: the capabilities reach the families' parts through the registry, at run time
    names = [layer.name for layer in layers]
    if "capabilities" in names and "families" in names:
        a, b = middles[names.index("capabilities")], middles[names.index("families")]
        c.curve((right - 4, a + 8), (right + 6, (a + b) / 2), (right + 6, (a + b) / 2), (right - 4, b - 8),
                dashed=True, colour=ACCENT)
        c.text(right - 10, (a + b) / 2, "family.part(…)", anchor="end", cls="small", halo=True)
    breaches = structure.breaches()
    for breach in breaches:
        start = where.get((structure.room_of(breach.importer), structure.layer_of(breach.importer)))
        end = where.get((structure.room_of(breach.target), structure.layer_of(breach.target)))
        if start and end and start != end:
            c.arrow(start[0], start[1] - 12, end[0], end[1] + 12, colour="#d93025", width=1.6)
    c.text(width / 2, height - 34, "every import points down or stays in its layer" if not breaches else
           f"{len(breaches)} imports run up (red)", cls="small")
    c.text(width / 2, height - 16, "box width: lines of code; the numbers are lines", cls="small faded")
    return c


# ============================================================================ the command line
def main(argv: list[str]) -> int:
    if not argv:
        print("\n".join(DIAGRAMS))
        return 0
    print(svg(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
