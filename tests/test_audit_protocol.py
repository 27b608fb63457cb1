"""The audits' capability (`seqlab.contract.Auditable`) and the decoding core's one sampling loop: `seqlab.harms`
reads no model internals and imports no family or architecture; an object that offers only the protocol's members
drives every audit to the figures the trained model gives; each sampling strategy of `core.sampling_steps` makes
the draws the searches made before they shared the loop (written out here as they were), on fixed generators."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import torch

from seqlab.contract import Auditable
from seqlab.data.canaries import parse_template
from seqlab.data.tokenizers import WordTokenizer
from seqlab.data.vocab import NEVER_GENERATED, SPECIALS, Vocab
from seqlab.decoding import core
from seqlab.decoding.options import SamplingOptions
from seqlab.decoding.processors import BlockTokens, nucleus, process, processors_for
from seqlab.decoding.sampling import Draw, Greedy, NucleusDraw, RowDraws, TopKDraw
from seqlab.decoding.search import TorchOps
from seqlab.families.lm.config import LMTrainConfig
from seqlab.families.lm.model import LMConfig, build_lm
from seqlab.families.lm.trained import TrainedLM
from seqlab.harms.bias import score_pair
from seqlab.harms.exposure import measure_exposure
from seqlab.harms.memorization import TrainingIndex, extractable, extraction, training_ids
from seqlab.harms.toxicity import ToxicityOptions, continue_k

WORDS = "the cat sat on a mat and dog ran to big red house my pin is".split()


def untrained_lm(arch: str, seed: int = 0) -> TrainedLM:
    """A random-init word model over a few words and the ten digits (as tests/test_canaries.py builds one)."""
    torch.manual_seed(seed)
    vocab = Vocab(list(SPECIALS) + WORDS + list("0123456789"))
    config = LMConfig(arch=arch, vocab_size=len(vocab), embedding_size=16, hidden_size=24, num_layers=2,
                      dropout=0.0, num_heads=2, context=16 if arch == "transformer" else 0)
    return TrainedLM(build_lm(config).eval(), WordTokenizer(), vocab, LMTrainConfig(model=config),
                     torch.device("cpu"))


HARMS = Path(__file__).resolve().parent.parent / "src" / "seqlab" / "harms"
INTERNALS = {"model", "vocab", "tokenizer", "config"}


def test_harms_reads_no_model_internals_and_imports_no_family():
    for path in sorted(HARMS.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in INTERNALS, f"{path.name}:{node.lineno} reads .{node.attr}"
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith(("seqlab.families", "seqlab.models")), f"{path.name} imports {name}"


class OnlyTheProtocol:
    """Offers the members of `Auditable` and nothing else, each handed to a trained model."""

    def __init__(self, lm):
        object.__setattr__(self, "_lm", lm)


for _name, _member in vars(Auditable).items():
    if _name.startswith("_"):
        continue
    if isinstance(_member, property):
        setattr(OnlyTheProtocol, _name, property(lambda self, n=_name: getattr(self._lm, n)))
    else:
        setattr(OnlyTheProtocol, _name, lambda self, *a, n=_name, **k: getattr(self._lm, n)(*a, **k))


def test_audit_protocol_alone_drives_every_audit():
    lm = untrained_lm("lstm", seed=1)
    only = OnlyTheProtocol(lm)
    assert not hasattr(only, "model") and not hasattr(only, "tokenizer")
    lines = ["the cat sat on a mat and dog ran", "my pin is big red house to the mat"] * 3
    index = TrainingIndex.from_lines(lines, only, 4)
    alone = extraction(lm, TrainingIndex.from_lines(lines, lm.tokenizer, 4), samples=6, top_k=5, length=8,
                       reference=lm, batch_size=4, seed=2, progress=False)
    assert extraction(only, index, samples=6, top_k=5, length=8, reference=only, batch_size=4, seed=2,
                      progress=False) == alone
    assert (extractable(only, training_ids(only, lines), sequences=5, prefix_lengths=[2, 4], suffix_length=3,
                        seed=1, progress=False)
            == extractable(lm, training_ids(lm, lines), sequences=5, prefix_lengths=[2, 4], suffix_length=3,
                           seed=1, progress=False))
    assert score_pair(only, "the cat sat", "the dog sat") == score_pair(lm, "the cat sat", "the dog sat")
    options = ToxicityOptions(continuations=3, max_tokens=4)
    assert continue_k(only, "the cat", options, 5) == continue_k(lm, "the cat", options, 5)
    record = {"template": "my pin is {digits:2}", "separator": " ",
              "secrets": [{"text": "my pin is 4 2", "filling": "42", "repeats": 1}]}
    for model in (lm, untrained_lm("transformer")):
        assert measure_exposure(OnlyTheProtocol(model), record, "exact") == measure_exposure(model, record, "exact")
    assert parse_template(record["template"]).space == 100


# ---------------------------------------------------------------------------- the one sampling loop

class Scripted:
    """A decoder whose logits are a fixed random table indexed by step and fed token: (B, V) per step."""

    def __init__(self, vocabulary: int = 12, seed: int = 0):
        self.table = torch.randn(8, vocabulary, vocabulary, generator=torch.Generator().manual_seed(seed)) * 3

    def step(self, tokens, state):
        return self.table[state, tokens], state + 1, None

    def reorder(self, state, index):
        return state


def run(strategy, rows: int = 5, steps: int = 6) -> list[list[int]]:
    loop = core.sampling_steps(Scripted(), TorchOps("cpu"), 0, torch.zeros(rows, dtype=torch.long), BlockTokens(),
                               strategy)
    return torch.stack([next(loop)[0] for _ in range(steps)], dim=1).tolist()


def before(choose, rows: int = 5, steps: int = 6) -> list[list[int]]:
    """The loops the searches ran before they shared one: step, block, choose."""
    decoder, tokens, state, out = Scripted(), torch.zeros(rows, dtype=torch.long), 0, []
    for _ in range(steps):
        logits, state, _ = decoder.step(tokens, state)
        tokens = choose(BlockTokens()(logits))
        out.append(tokens)
    return torch.stack(out, dim=1).tolist()


def test_sampling_strategy_draws_what_each_search_drew_before():
    options = SamplingOptions(temperature=0.8, top_k=6, top_p=0.9, seed=3)
    rest = processors_for(options, True)[1:]

    def multinomial(blocked, generator):                                           # generate_ids, seq2seq
        return torch.multinomial(process(blocked, rest).softmax(-1), 1, generator=generator).squeeze(1)

    def inverse_cdf(blocked, generator):                                           # sample_ids
        scores = process(blocked, processors_for(SamplingOptions(temperature=0.8, top_k=6), True)[1:])
        probs = scores.softmax(-1) * nucleus(scores, 0.9)
        cumulative = probs.cumsum(-1)
        total = cumulative[:, -1:]
        u = torch.minimum(torch.rand(probs.size(0), 1, generator=generator) * total,
                          torch.nextafter(total, torch.zeros_like(total)))
        return torch.searchsorted(cumulative, u, right=True).squeeze(1)

    def top_k(blocked, generator):                                                 # the memorisation audit
        values, ids = blocked.topk(4, dim=-1)
        return ids.gather(1, torch.multinomial(values.softmax(-1), 1, generator=generator))[:, 0]

    def seeded():
        return torch.Generator().manual_seed(11)

    assert run(Greedy()) == before(lambda b: b.argmax(-1))
    g = seeded()
    assert run(Draw(rest, True, seeded())) == before(lambda b: multinomial(b, g))
    g = seeded()
    assert run(NucleusDraw(options, seeded())) == before(lambda b: inverse_cdf(b, g))
    g = seeded()
    assert run(TopKDraw(4, seeded())) == before(lambda b: top_k(b, g))
    drawn = np.array(run(Draw(rest, True, seeded()), rows=40))
    assert not np.isin(drawn, NEVER_GENERATED).any() and len(np.unique(drawn)) > 1


def test_sampling_strategy_rows_leave_with_their_own_generators():
    """A batch of rows with their own options and seeds (`RowDraws`): each row draws what it draws alone, also
    after the rows before it have left the batch (`keep` sent to the loop)."""
    options = [SamplingOptions(seed=1), SamplingOptions(greedy=True), SamplingOptions(seed=2, top_k=3)]

    def alone(k: int, steps: int) -> list[int]:
        o = options[k]
        strategy = RowDraws([o], [None if o.greedy else torch.Generator().manual_seed(o.seed)])
        return run(strategy, rows=1, steps=steps)[0]

    strategy = RowDraws(options, [None if o.greedy else torch.Generator().manual_seed(o.seed) for o in options])
    loop = core.sampling_steps(Scripted(), TorchOps("cpu"), 0, torch.zeros(3, dtype=torch.long), BlockTokens(),
                               strategy)
    first = next(loop)[0].tolist()
    rest = [loop.send([2])[0].tolist() for _ in range(1)] + [loop.send(None)[0].tolist() for _ in range(3)]
    assert first == [alone(0, 1)[0], alone(1, 1)[0], alone(2, 1)[0]]
    assert [first[2]] + [r[0] for r in rest] == alone(2, 5)
