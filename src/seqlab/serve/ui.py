"""The web page's forms: what the page at / shows for each endpoint, declared by the endpoint's family.

Each family's `serve` part lists in `FORMS` a `Form` for each endpoint the page offers: the text's label, the
fields beside it (numbers, in groups), the JSON body they make, and the view that draws the answer. The app
serves them at GET /v1/ui (`forms`), and `static/page.js` builds its forms from them and draws each answer with
the view named, so that the page names no endpoint and a family's new field or endpoint needs no change to it.

The views the page draws (`VIEWS`), and what each reads of the answer:

    stream         server-sent events of text (`data: {"text": ...}`, then `data: [DONE]`) after the text sent
    token-scores   results[0]: tokens [{token, logprob}], perplexity, bits_per_char: a table of log probabilities
    spans          results[0]: tokens, tags, probabilities, entities: each token's tag, entity spans coloured
    bars           results[0]: label, probabilities: a bar per class, the predicted one first
    decoded        results[0]: text, score, source_tokens, attention: the output and its attention heat map
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

VIEWS = ("stream", "token-scores", "spans", "bars", "decoded")
FIELD_TYPES = ("integer", "number")


@dataclass(frozen=True)
class Field:
    """One number the form sends beside the text, under its `name` in the body (the input's id: the name with
    "-" for "_")."""

    name: str                          # the body's key: "max_tokens"
    label: str                         # what the page calls it: "Max tokens"
    type: str = "integer"              # "integer" or "number"
    value: float | None = None         # what the field holds when the page opens (None: empty)
    blank: float | None = None         # what an emptied field sends (None: the key is left out of the body)
    min: float | None = None           # the input's bounds and step (None: none; the step of an integer is 1)
    max: float | None = None
    step: float | None = None
    placeholder: str = ""              # shown in an empty field

    def __post_init__(self):
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name!r}: type {self.type!r}; choose {' or '.join(FIELD_TYPES)}")


@dataclass(frozen=True)
class Group:
    """Fields shown together under a legend (the fieldset's id: `id`)."""

    id: str                            # "sampling"
    legend: str                        # "Sampling"
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Form:
    """What the page shows and sends for one endpoint (POST /v1/`endpoint`), and how it draws the answer."""

    endpoint: str                      # "generate": the endpoint under /v1 (the models that answer it list it)
    view: str                          # how the answer is drawn: one of `VIEWS`
    title: str                         # the answer's heading: "Generated text"
    label: str                         # the text's label: "Prompt"
    placeholder: str = ""              # an example text, shown in the empty text box
    text: str = "text"                 # the body's key of the text: "text", "prompt"
    groups: tuple[Group, ...] = ()     # the fields beside the text
    body: dict = field(default_factory=dict)    # what the body always holds beside them: {"stream": True}
    style: dict = field(default_factory=dict)   # what the view draws with: the spans view's {"hues": {type: hue}}

    def __post_init__(self):
        if self.view not in VIEWS:
            raise ValueError(f"form of /v1/{self.endpoint}: view {self.view!r}; choose one of {', '.join(VIEWS)}")


def forms(declared: Iterable[Form]) -> dict[str, dict]:
    """GET /v1/ui's {"forms": {endpoint: form as JSON}} of the `declared` forms (the families' `FORMS`); two forms
    of one endpoint are refused."""
    found: dict[str, dict] = {}
    for form in declared:
        if form.endpoint in found:
            raise ValueError(f"two forms of /v1/{form.endpoint}: the page shows one per endpoint")
        found[form.endpoint] = dataclasses.asdict(form)
    return {"forms": found}
