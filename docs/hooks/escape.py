"""Special tokens shown as text, not swallowed as HTML: `<unk>`, `<s>`, `</s>`, `<pad>`, `<sep>`, `<bos>`, `<eos>`
and every other `<...>` that is not an HTML element the pages use (a placeholder such as `<file>` too), escaped in
a page's Markdown outside code spans, fences, math, HTML comments and inline SVG (a MkDocs hook's pass: generate.py's
`on_page_markdown`). Without it Markdown passes `<unk>` through as a tag the browser hides: "the rest become
(BPE keeps…" instead of "the rest become <unk> (BPE keeps…".
"""

from __future__ import annotations

import re

# The HTML the pages write as HTML (kept as it is). `<s>` is an HTML element too, but on these pages it is always
# the sentence-start token: escaped.
HTML = frozenset("""a abbr b blockquote br button caption center cite code col colgroup dd del details dfn div dl dt
em figcaption figure footer h1 h2 h3 h4 h5 h6 header hr i iframe img input ins kbd li main mark nav ol p picture pre
q section small source span strong style sub summary sup table tbody td tfoot th thead tr u ul video wbr
script svg math""".split())
# Where nothing is escaped: the text up to the end of the element (a diagram's SVG, a script).
OPAQUE = ("svg", "script", "style", "pre", "math")

TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)((?:\s[^<>]*)?)(/?)>")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})")
# what a line's text is not escaped in: a code span (any number of backticks), inline math $...$ or \(...\),
# a comment, an autolink, an SVG (or script...) opened and closed on the line
SKIP = re.compile(r"(?P<ticks>`+).*?(?P=ticks)|\$\$.*?\$\$|(?<![\\$])\$(?!\s)[^$\n]+?(?<![\s\\])\$|\\\(.*?\\\)"
                  r"|<!--.*?-->"
                  r"|<https?://[^>\s]*>|<(?P<opaque>svg|script|style|pre|math)\b.*?</(?P=opaque)\s*>", re.S | re.I)


def _escape_text(text: str) -> tuple[str, int]:
    """`text` (no code span, no math) with every `<...>` that is not one of HTML's tags escaped."""
    count = 0

    def one(match: re.Match) -> str:
        nonlocal count
        if match[2].lower() in HTML:
            return match[0]
        count += 1
        return match[0].replace("<", "&lt;").replace(">", "&gt;")
    return TAG.sub(one, text), count


def escape_line(line: str) -> tuple[str, int]:
    """One line of prose with its tokens escaped, its code spans, math, comments and autolinks left alone."""
    out, count, at = [], 0, 0
    for found in SKIP.finditer(line):
        text, n = _escape_text(line[at:found.start()])
        out += [text, found[0]]
        count, at = count + n, found.end()
    text, n = _escape_text(line[at:])
    return "".join(out) + text, count + n


def escape_tokens(markdown: str) -> tuple[str, int]:
    """The page with its tokens escaped (`&lt;unk&gt;`) and how many: outside fences (indented ones in tabs and
    notes too), display math ($$...$$, \\[...\\]), HTML comments and the elements of OPAQUE (an inline SVG)."""
    lines = markdown.split("\n")
    out, count, i = [], 0, 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        closing = None
        if fence:
            mark = fence["fence"]
            closing = re.compile(rf"^ *{re.escape(mark[0])}{{{len(mark)},}}\s*$")
        elif line.strip().startswith("$$") and line.strip().count("$$") == 1:
            closing = re.compile(r".*\$\$")
        elif line.strip().startswith("\\[") and "\\]" not in line:
            closing = re.compile(r".*\\\]")
        elif "<!--" in line and "-->" not in line.split("<!--", 1)[1]:
            closing = re.compile(r".*-->")
        else:
            opened = next((name for name in OPAQUE if re.search(rf"<{name}[\s>]", line, re.I)
                           and not re.search(rf"</{name}\s*>", line, re.I)), None)
            if opened:
                closing = re.compile(rf".*</{opened}\s*>", re.I)
        if closing is None:
            line, n = escape_line(line)
            out.append(line)
            count += n
            i += 1
            continue
        j = i + 1                                   # kept as it is up to its closing line (or the page's end)
        while j < len(lines) and not closing.match(lines[j]):
            j += 1
        out += lines[i:j + 1]
        i = j + 1
    return "\n".join(out), count


# The tokens seqlab writes (seqlab.data.vocab's specials and their kin): never an element of a page's HTML.
TOKENS = re.compile(r"<(/?)(unk|s|sep|pad|bos|eos)>")


def escape_html_tokens(html: str) -> str:
    """A rendered page's HTML with any special token still a tag escaped: what Markdown rendered from text the
    Markdown pass never saw (the docstrings mkdocstrings renders into the Python API page)."""
    return TOKENS.sub(lambda m: f"&lt;{m[1]}{m[2]}&gt;", html)
