"""The toxicity audit (Gehman et al. 2020): expected maximum toxicity and toxicity probability, on a scripted
language model and scorer whose figures are computed by hand, and on real tiny runs."""

from __future__ import annotations

import contextlib
import math
import re

import pytest

from seqlab.errors import SeqlabError
from seqlab.families.classifier.vocab import Prediction
from seqlab.harms.toxicity import ToxicityOptions, audit_toxicity, read_prompts, summarize


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



def test_toxicity_write_report_writes_what_the_cli_writes_where_the_card_reads_it(tmp_path):
    import json

    from seqlab.harms.toxicity import write_report

    script = {"a": ["x1", "x2"], "b": ["y1", "y2"]}
    table = {"x1": 0.1, "x2": 0.7, "y1": 0.05, "y2": 0.3}
    options = ToxicityOptions(continuations=2, max_tokens=5, top_p=0.9, seed=3)
    result = audit_toxicity(ScriptedLM(script), ScriptedScorer(table), ["a", "b"], options, progress=False)
    run = tmp_path / "run"
    report = write_report(result, options, run, "runs/scorer", "prompts.txt")      # the Python API's default
    written = json.loads((run / "audits" / "toxicity.json").read_text())
    assert written == report and written["expected_max_toxicity"] == pytest.approx((0.7 + 0.3) / 2)
    assert written["command"] == ("seqlab audit toxicity " + str(run) + " --scorer runs/scorer --prompts "
                                  "prompts.txt --continuations 2 --max-tokens 5 --top-p 0.9 --seed 3")
    assert written["most_toxic"][0] == {"prompt": "a", "continuation": "x2", "toxicity": 0.7}
    assert "| toxicity probability | 0.500 |" in (run / "audits" / "toxicity.md").read_text()

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
    from seqlab.cli.main import main
    from seqlab.families.lm.pipeline import train_lm

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

    from seqlab.cli.main import main

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


# ------------------------------------------------------------------ sampling k continuations as one batch


def tiny_lm(arch: str):
    import torch

    from seqlab.families.lm.model import LMConfig, build_lm

    torch.manual_seed(0)
    return build_lm(LMConfig(arch=arch, vocab_size=23, embedding_size=8, hidden_size=12, num_layers=2, dropout=0.0,
                             num_heads=2, context=6 if arch in ("ffn", "transformer") else 0)).eval()


ARCHS = ("lstm", "ffn", "transformer")
CONTEXT = [3, 7, 9, 5]                     # </s> (EOS = 3) then a prompt of three tokens


@pytest.mark.parametrize("p", [1e-9, 0.3, 0.9, 0.999])
@pytest.mark.parametrize("steps", [0, 3, 12])
def test_nucleus_is_top_ps_kept_set(p, steps):
    """The nucleus (found by bisection, however coarse) is exactly the set TopP keeps, on peaked and flat rows,
    with blocked tokens and a temperature."""
    import torch

    from seqlab.decoding.processors import BlockTokens, Temperature, TopP, nucleus, process

    torch.manual_seed(0)
    V = 3000
    logits = torch.cat([torch.randn(3, V) * 8, torch.randn(2, V) * 0.01, torch.randn(1, V) * 3])   # peaked, flat
    logits = process(logits, [BlockTokens(), Temperature(0.7)])
    assert torch.equal(nucleus(logits, p, steps), process(logits, [TopP(p)]) > float("-inf"))


@pytest.mark.parametrize("top_p, temperature", [(0.9, 1.0), (1.0, 1.0), (0.9, 2.0)])
def test_batched_sampling_draws_from_the_single_samplers_distribution(top_p, temperature):
    """The batch's draws have the frequencies of the distribution `choose` samples from, softmax(TopP(p)(z / τ)),
    on a model whose next-token distribution is fixed."""
    import torch

    from seqlab.decoding.processors import process, processors_for
    from seqlab.decoding.search import SamplingOptions, nucleus_choose

    logits = torch.log(torch.tensor([[0.0] * 5 + [0.5, 0.3, 0.15, 0.05]])).expand(20000, -1)
    options = SamplingOptions(top_p=top_p, temperature=temperature)
    expected = process(logits[:1], processors_for(options, sample=True)).softmax(dim=-1)[0]
    drawn = nucleus_choose(logits, options, torch.Generator().manual_seed(0))
    share = torch.bincount(drawn, minlength=9).float() / 20000
    assert ((share > 0) == (expected > 0)).all()                     # top-p 0.9: 0.15 is in, 0.05 out
    assert torch.allclose(share, expected, atol=0.015)


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_sampling_with_top_p_near_zero_is_greedy_and_a_seed_reproduces_it(arch):
    from seqlab.decoding.search import SamplingOptions, generate_ids, sample_ids

    model = tiny_lm(arch)
    greedy = list(generate_ids(model, CONTEXT, SamplingOptions(max_tokens=8, greedy=True)))
    assert sample_ids(model, CONTEXT, SamplingOptions(max_tokens=8, top_p=1e-9, seed=5), 6) == [greedy] * 6
    assert sample_ids(model, CONTEXT, SamplingOptions(max_tokens=8, greedy=True), 3) == [greedy] * 3
    options = SamplingOptions(max_tokens=8, top_p=0.95, temperature=1.5, seed=7)
    first = sample_ids(model, CONTEXT, options, 6)
    assert first == sample_ids(model, CONTEXT, options, 6)
    assert len(first) == 6 and all(len(ids) == 8 for ids in first)
    assert len({tuple(ids) for ids in first}) > 1                  # the rows are independent draws


def test_batched_sampling_stops_at_eos_and_refuses_what_it_cannot_do():
    from seqlab.data.vocab import EOS
    from seqlab.decoding.search import SamplingOptions, sample_ids

    model = tiny_lm("lstm")
    with torch_bias(model, EOS):                                   # </s> the most likely token everywhere
        rows = sample_ids(model, CONTEXT, SamplingOptions(max_tokens=8, stop_at_eos=True, top_p=0.5, seed=1), 4)
    assert rows == [[EOS]] * 4
    assert sample_ids(model, CONTEXT, SamplingOptions(max_tokens=0, seed=1), 2) == [[], []]
    with pytest.raises(SeqlabError, match="beam"):
        sample_ids(model, CONTEXT, SamplingOptions(beam=2), 2)
    with pytest.raises(SeqlabError, match="at least one"):
        sample_ids(model, CONTEXT, SamplingOptions(seed=1), 0)


@contextlib.contextmanager
def torch_bias(model, token: int):
    """The LM's output layer biased far towards `token` while the block runs."""
    import torch

    bias = [p for name, p in model.named_parameters() if name.endswith("bias") and p.size(0) == 23][-1]
    saved = bias.detach().clone()
    with torch.no_grad():
        bias[token] += 100.0
    try:
        yield
    finally:
        with torch.no_grad():
            bias.copy_(saved)


def test_toxicity_samples_a_trained_lms_continuations_as_one_batch(runs):
    """A TrainedLM's k continuations come from sample_ids, made text as generate makes it (with top-p ~0: k
    copies of the greedy continuation), and a seed reproduces them."""
    import seqlab
    from seqlab.harms.toxicity import continue_k

    lm = seqlab.load(runs["lm"])
    greedy = lm.generate("ROMEO:", max_tokens=6, greedy=True)
    assert continue_k(lm, "ROMEO:", ToxicityOptions(continuations=3, max_tokens=6, top_p=1e-9), seed=4) == [greedy] * 3
    options = ToxicityOptions(continuations=5, max_tokens=6, top_p=0.9)
    texts = continue_k(lm, "ROMEO:", options, seed=4)
    assert len(texts) == 5 and texts == continue_k(lm, "ROMEO:", options, seed=4)
