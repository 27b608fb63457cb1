"""The toxicity audit (Gehman et al. 2020): expected maximum toxicity and toxicity probability, on a scripted
language model and scorer whose figures are computed by hand, and on real tiny runs."""

from __future__ import annotations

import contextlib
import math
import re

import pytest

from seqlab.errors import SeqlabError
from seqlab.harms.toxicity import ToxicityOptions, audit_toxicity, read_prompts, summarize
from seqlab.pipelines.outputs import Prediction


class ScriptedLM:
    """Continues prompt i with the text its script gives for each seed; records what it was asked."""

    def __init__(self, script: dict[str, list[str]]):
        self.script, self.asked = script, []

    def generate(self, prompt: str, **options) -> str:
        self.asked.append((prompt, options))
        k = sum(1 for p, _ in self.asked if p == prompt) - 1
        return self.script[prompt][k]


class ScriptedScorer:
    """Scores a text by a table: its toxic probability."""

    def __init__(self, table: dict[str, float], toxic: str = "toxic"):
        self.table, self.toxic = table, toxic

    def classify(self, texts: list[str]) -> list[Prediction]:
        out = []
        for text in texts:
            p = self.table[text]
            label = self.toxic if p >= 0.5 else "fine"
            out.append(Prediction(label, max(p, 1 - p), {"fine": 1 - p, self.toxic: p}))
        return out


def test_toxicity_figures_equal_a_hand_computation():
    script = {"a": ["x1", "x2", "x3"], "b": ["y1", "y2", "y3"], "c": ["z1", "", "z3"]}
    table = {"x1": 0.1, "x2": 0.7, "x3": 0.2, "y1": 0.05, "y2": 0.3, "y3": 0.49, "z1": 0.9, "z3": 0.95}
    lm = ScriptedLM(script)
    result = audit_toxicity(lm, ScriptedScorer(table), ["a", "b", "c"],
                            ToxicityOptions(continuations=3, max_tokens=7, top_p=0.8, seed=10), progress=False)
    maxima = [0.7, 0.49, 0.95]                                 # the empty continuation of "c" scores 0
    mean = sum(maxima) / 3
    assert result.summary["expected_max_toxicity"] == pytest.approx(mean)
    assert result.summary["expected_max_toxicity_std"] == pytest.approx(math.sqrt(sum((m - mean) ** 2
                                                                                      for m in maxima) / 3))
    assert result.summary["toxicity_probability"] == pytest.approx(2 / 3)         # 0.49 is below the threshold
    assert result.scores[2] == [0.9, 0.0, 0.95]
    assert result.most_toxic(2) == [{"prompt": "c", "continuation": "z3", "toxicity": 0.95},
                                    {"prompt": "c", "continuation": "z1", "toxicity": 0.9}]
    # every continuation sampled with its own seed, top-p and length as asked
    assert [o["seed"] for _, o in lm.asked] == list(range(10, 19))
    assert all(o["top_p"] == 0.8 and o["max_tokens"] == 7 for _, o in lm.asked)


def test_toxicity_refuses_bad_input(tmp_path):
    with pytest.raises(SeqlabError, match="has no label 'toxic'.*--toxic-label"):
        audit_toxicity(ScriptedLM({"a": ["x"]}), ScriptedScorer({"x": 0.2}, toxic="offensive"), ["a"],
                       ToxicityOptions(continuations=1), progress=False)
    empty = tmp_path / "prompts.txt"
    empty.write_text("\n  \n")
    with pytest.raises(SeqlabError, match="is empty|has no prompts"):
        read_prompts(empty)
    with pytest.raises(SeqlabError, match="does not exist"):
        read_prompts(tmp_path / "missing.txt")
    (tmp_path / "ok.txt").write_text("The man said\n\n  She was \n")
    assert read_prompts(tmp_path / "ok.txt") == ["The man said", "She was"]
    for bad in ({"continuations": 0}, {"top_p": 0.0}, {"top_p": float("nan")}, {"max_tokens": 0}, {"seed": -1}):
        with pytest.raises(SeqlabError):
            ToxicityOptions(**bad)
    with pytest.raises(SeqlabError, match="at least one"):
        summarize([])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A tiny character LM and a tiny classifier whose labels are toxic / fine."""
    from conftest import tiny_config
    from seqlab.cli import main
    from seqlab.pipelines.lm import train_lm

    folder = tmp_path_factory.mktemp("toxicity")
    train_lm(tiny_config(folder / "lm", arch="lstm", tokenizer="char"))
    data = folder / "toxic.tsv"
    rows = [("you are awful", "toxic"), ("what a nice day", "fine"), ("awful awful people", "toxic"), ("nice", "fine")]
    data.write_text("text\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows * 4))
    assert main(["train", "classifier", "--train", str(data), "--dev", str(data), "--format", "tsv",
                 "--embedding-size", "8", "--hidden-size", "8", "--max-steps", "10", "--no-progress",
                 "--output", str(folder / "scorer")]) == 0
    return {"lm": folder / "lm", "scorer": folder / "scorer"}


def test_toxicity_on_real_runs_is_reproducible(runs):
    """The figures are probabilities, and the same seed gives the same continuations."""
    import seqlab

    lm, scorer = seqlab.load(runs["lm"]), seqlab.load(runs["scorer"])
    options = ToxicityOptions(continuations=3, max_tokens=5, seed=1)
    first = audit_toxicity(lm, scorer, ["ROMEO:", "The"], options, progress=False)
    again = audit_toxicity(lm, scorer, ["ROMEO:", "The"], options, progress=False)
    assert first.continuations == again.continuations and first.scores == again.scores
    assert 0 <= first.summary["expected_max_toxicity"] <= 1 and first.summary["prompts"] == 2
    assert first.summary["continuations_per_prompt"] == 3


def test_toxicity_cli_end_to_end_and_its_refusals(runs, tmp_path, capsys):
    import json

    from seqlab.cli import main

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("ROMEO:\nThe king\n")
    out = tmp_path / "audit"
    args = ["audit", "toxicity", str(runs["lm"]), "--scorer", str(runs["scorer"]), "--prompts", str(prompts),
            "--continuations", "2", "--max-tokens", "4", "--no-progress", "--output", str(out)]
    assert main([*args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((out / "toxicity.json").read_text())
    assert printed == written and written["prompts"] == 2 and written["options"]["continuations"] == 2
    assert "expected maximum toxicity" in (out / "toxicity.md").read_text()
    assert main(args[:-2]) == 0                                          # the default output: RUN/audits
    assert (runs["lm"] / "audits" / "toxicity.json").exists()
    capsys.readouterr()
    (tmp_path / "empty.txt").write_text("\n\n")
    for bad, message in [(["--prompts", str(tmp_path / "empty.txt")], "empty|no prompts"),
                         (["--scorer", str(runs["lm"])], "needs a classifier as --scorer"),
                         (["--toxic-label", "rude"], "no label 'rude'"),
                         (["--top-p", "1.5"], "top-p")]:
        with contextlib.suppress(SystemExit):
            assert main([*args, *bad]) == 2
        assert re.search(message, capsys.readouterr().err)
    assert main(["audit", "toxicity", str(runs["scorer"]), "--scorer", str(runs["scorer"]), "--prompts",
                 str(prompts)]) == 2
    assert "needs a language model as RUN" in capsys.readouterr().err
