"""Translation from raw text: the Moses tokenizer (split by the language's rules, joined back, saved with the run);
the warnings when much of the training data is <unk> or the text looks untokenised (and none on tokenised text);
the task's figures at every evaluation (--eval-decode): summable BLEU / chrF / ROUGE statistics that give the
corpus figures however the pairs are split, recorded at each evaluation, equal to what the trained model's greedy
translations score, and absent with --eval-decode 0."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import pytest
import sacrebleu
import torch

import seqlab
from seqlab.data.tokenizers import MosesTokenizer, WordTokenizer, make_tokenizer, tokenizer_from_dict
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq import task_metric
from seqlab.families.seq2seq.config import Seq2SeqDataConfig, resolve_seq2seq_config
from seqlab.families.seq2seq.model import Seq2SeqConfig, build_model
from seqlab.families.seq2seq.parallel import Pair
from seqlab.families.seq2seq.pipeline import train_seq2seq
from seqlab.families.seq2seq.prepare import check_options
from seqlab.families.seq2seq.task import PairVocabulary, Seq2SeqTask
from seqlab.families.seq2seq.text_checks import attached_words
from seqlab.families.seq2seq.trained import TrainedSeq2Seq
from seqlab.metrics import rouge
from seqlab.training import plots, trainer

FIXTURES = Path(__file__).parent / "fixtures" / "seq2seq"
ALIGNED = {f"{split}_{side}": str(FIXTURES / f"{split}.{side}") for split in ("train", "dev", "test")
           for side in ("src", "tgt")}
HYPOTHESES = ["A man is riding a bike down the street.", "Two dogs play in the snow.", "A woman sings.",
              "", "Children are playing soccer on a field, laughing.", "The cat sleeps on the red sofa."]
REFERENCES = ["A man rides a bicycle down a street.", "Two dogs are playing in the snow.", "A woman is singing.",
              "A boy jumps.", "Kids play football on a grassy field.", "A cat is sleeping on a red couch."]


@pytest.fixture(autouse=True)
def _no_curves(monkeypatch):
    """No curves.png after each evaluation (most of a tiny run's time); `plots` is tested on its own below."""
    monkeypatch.setattr(trainer, "plot_curves", lambda run_dir: None)


def lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def raw_files(tmp_path: Path) -> dict:
    """The fixture pairs as raw text (capitalised, the full stop on the last word), and 40 training targets
    with two names seen once: what --min-freq 2 reads as <unk>."""
    def raw(line: str) -> str:
        return line[:1].upper() + line[1:].replace(" .", ".")
    files = {}
    for split in ("train", "dev"):
        for side in ("src", "tgt"):
            texts = [raw(line) for line in lines(ALIGNED[f"{split}_{side}"])]
            if (split, side) == ("train", "tgt"):
                texts = [f"{text[:-1]} Name{i} Nom{i}." if i < 40 else text for i, text in enumerate(texts)]
            files[f"{split}_{side}"] = tmp_path / f"{split}.{side}"
            files[f"{split}_{side}"].write_text("\n".join(texts) + "\n", encoding="utf-8")
    return {name: str(path) for name, path in files.items()}


def train(**options) -> Path:
    """A tiny GRU with attention, through the family's pipeline (no model card: fast)."""
    overrides = {"arch": "gru", "attention": "dot", "embedding_size": 16, "hidden_size": 16, "dropout": 0.0,
                 "batch_size": 16, "eval_batch_size": 16, "max_steps": 8, "eval_every": 4, "log_every": 4,
                 "progress": False, "threads": 1, "lr": 5e-3, **options}
    train_seq2seq(resolve_seq2seq_config(overrides=overrides))
    return Path(overrides["output"])


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------- the Moses tokenizer

def test_tokenizers_moses_splits_raw_text_by_the_languages_rules_and_joins_it_back():
    english, french = MosesTokenizer("en"), make_tokenizer("moses", lang="fr")
    line = 'A well-known dog doesn\'t cost $5,300.50 in the U.S., "really" (yes)!'
    tokens = english.tokenize(line)
    assert tokens == ["A", "well", "@-@", "known", "dog", "doesn", "'t", "cost", "$", "5,300.50", "in", "the",
                      "U.S.", ",", '"', "really", '"', "(", "yes", ")", "!"]
    assert english.detokenize(tokens) == line
    assert french.tokenize("l'homme mange.") == ["l'", "homme", "mange", "."]
    assert WordTokenizer().tokenize(line)[-1] == "(yes)!"                  # what --tokenizer word reads
    for tokenizer in (english, french):
        again = tokenizer_from_dict(json.loads(json.dumps(tokenizer.to_dict())))
        assert isinstance(again, MosesTokenizer) and again.lang == tokenizer.lang
        assert again.tokenize(line) == tokenizer.tokenize(line)


def test_seq2seq_a_moses_run_saves_its_languages_and_decodes_to_joined_text(tmp_path):
    files = raw_files(tmp_path)
    run = train(**files, tokenizer="moses", target_lang="de", output=str(tmp_path / "run"), eval_decode=0)
    saved = json.loads((run / "tokenizer.json").read_text())
    assert saved["source"] == {"kind": "moses", "lang": "en"} and saved["target"] == {"kind": "moses", "lang": "de"}
    model = seqlab.load(run)
    assert "dog" in model.vocabulary.target_vocab and "." in model.vocabulary.target_vocab
    assert not [t for t in model.vocabulary.target_vocab.tokens if t.endswith(".") and t != "."]
    outputs = model.generate(["Der hund sieht die katze.", "Der mann mag das auto."], beam=2)
    for output in outputs:
        assert output.text == MosesTokenizer("de").detokenize(output.tokens)


@pytest.mark.parametrize("options, message", [
    ({"tokenizer": "bpe", "source_lang": "de"}, "--source-lang de: only the moses tokenizer reads a language"),
    ({"source_tokenizer": "moses", "target_lang": "fr"}, "--target-lang fr: only the moses tokenizer"),
    ({"tokenizer": "moses", "shared_vocab": True, "target_lang": "de"}, "give them the same language"),
    ({"tokenizer": "moses", "target_lang": "German"}, "--target-lang 'German': give the language's ISO 639 code"),
])
def test_seq2seq_language_options_that_would_do_nothing_are_refused(options, message):
    with pytest.raises(SeqlabError, match=message):
        check_options(Seq2SeqDataConfig(**options))


# ---------------------------------------------------------------------------- the warnings

def prepare_warnings(tmp_path: Path, **options) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seqlab.prepare("seq2seq", tmp_path / "prepared", progress=False, overwrite=True, **options)
    return [str(w.message) for w in caught]


def test_text_checks_warn_of_raw_text_and_of_the_unknown_share_the_min_freq_causes(tmp_path):
    files = raw_files(tmp_path)
    messages = prepare_warnings(tmp_path, **{k: v for k, v in files.items()}, min_freq=2)
    targets = [line.split() for line in lines(files["train_tgt"])]
    counts = Counter(word for words in targets for word in words)
    once = [word for word, count in counts.items() if count == 1]
    share = sum(counts[word] for word in once) / sum(counts.values())
    assert share > 0.02
    assert f"{share:.1%} of the training targets' tokens are <unk> (--min-freq 2 drops {len(once):,} types seen " \
           "once); raw text? try --tokenizer moses or --tokenizer bpe --shared-vocab" in messages
    attached = [m for m in messages if "words have punctuation attached" in m]
    assert len(attached) == 2 and "of the training sources' words" in attached[0]
    assert "try --tokenizer moses" in attached[0] and "the text looks untokenised" in attached[0]
    moses = prepare_warnings(tmp_path, **files, min_freq=2, tokenizer="moses", target_lang="de")
    assert not any("punctuation attached" in m for m in moses)            # Moses splits it off: no longer raw
    assert any("(--min-freq 2 drops 80 types seen once); lower --min-freq" in m for m in moses)
    assert prepare_warnings(tmp_path, **files, tokenizer="bpe", shared_vocab=True, bpe_vocab_size=300) == []


def test_text_checks_say_nothing_of_tokenised_text(tmp_path):
    for min_freq in (1, 2):
        assert prepare_warnings(tmp_path, **ALIGNED, min_freq=min_freq) == []
    tokenised = ["a man in a blue shirt , standing on a ladder .", "mr. smith 's dog ( the big one ) barks !",
                 "two young , white males are outside near many bushes ."]
    assert attached_words([line.split() for line in tokenised]) == []
    assert attached_words([["Two", "young,", "males", "outside."], ["(the", "end"]]) == ["young,", "outside.", "(the"]


# ---------------------------------------------------------------------------- the task's figures at evaluation

def test_task_metric_statistics_summed_over_parts_give_the_corpus_figures():
    whole = task_metric.figures(task_metric.statistics(HYPOTHESES, REFERENCES))
    parts = [task_metric.statistics(HYPOTHESES[:2], REFERENCES[:2]), task_metric.statistics([], []),
             task_metric.statistics(HYPOTHESES[2:], REFERENCES[2:])]
    assert all(part.keys() == parts[0].keys() for part in parts)              # every process sends the same keys
    summed = task_metric.figures({key: sum(part[key] for part in parts) for key in parts[0]})
    assert summed == whole
    assert summed["greedy_bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score, abs=1e-9)
    assert summed["greedy_chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score, abs=1e-9)
    for kind, value in rouge(HYPOTHESES, REFERENCES).items():
        assert summed[f"greedy_{kind}"] == pytest.approx(value, abs=1e-9)
    assert summed["greedy_pairs"] == len(HYPOTHESES) and 0 < summed["greedy_bleu"] < 100
    assert task_metric.figures(parts[1]) == {}


def test_seq2seq_task_decodes_the_same_pairs_whichever_process_reads_them():
    """Two processes' rows of each evaluation batch, their statistics added, give one process's figures."""
    torch.manual_seed(0)
    tokens = WordTokenizer()
    texts = [(" ".join("abcdefg"[k % 7] for k in range(i, i + 3 + i % 4)), " ".join("xyzw"[k % 4] for k in range(i)))
             for i in range(1, 12)]
    vocab = Vocab.build(Counter(t for s, g in texts for t in f"{s} {g}".split()))
    vocabulary = PairVocabulary(tokens, tokens, vocab, vocab)
    items = vocabulary.encode([Pair(s, t, i) for i, (s, t) in enumerate(texts, 1)])
    references = [t for _, t in texts][:9]
    task = Seq2SeqTask(vocabulary, items, items, None, batch_size=4, eval_batch_size=4, seed=1,
                       valid_references=references)
    model = build_model(Seq2SeqConfig(arch="gru", attention="dot", source_vocab_size=len(vocab),
                                      target_vocab_size=len(vocab), embedding_size=8, hidden_size=8))
    whole = task.evaluate(model, task.valid_data, "cpu")
    halves = [task.evaluate(model, task.valid_data, "cpu", slice(0, 2)),
              task.evaluate(model, task.valid_data, "cpu", slice(2, 4))]
    summed = {key: sum(half[key] for half in halves) for key in whole}
    figures = task.summarize(whole)
    assert task.summarize(summed) == pytest.approx(figures) and figures["greedy_pairs"] == 9
    outputs = TrainedSeq2Seq(model, vocabulary, None, "cpu").generate([s for s, _ in texts][:9], beam=1)
    assert figures["greedy_bleu"] == pytest.approx(
        sacrebleu.corpus_bleu([o.text for o in outputs], [references]).score)
    assert "greedy on 9 pairs: BLEU" in task.describe({"step": 1, "split": "valid", **figures})


def test_seq2seq_training_records_greedy_bleu_at_every_evaluation_as_the_model_translates(tmp_path):
    run = train(**ALIGNED, output=str(tmp_path / "run"), eval_decode=12)
    evaluations = records(run)
    assert [r["split"] for r in evaluations] == ["valid", "valid", "valid", "test"]
    assert all(r["greedy_pairs"] == 12 and 0 <= r["greedy_bleu"] <= 100 for r in evaluations)
    final = evaluations[-2]
    assert final["final"] and final["step"] == max(r["step"] for r in evaluations[:2] if r["best"])
    model = seqlab.load(run)                                              # the best weights: the final records'
    sources, references = lines(ALIGNED["dev_src"])[:12], lines(ALIGNED["dev_tgt"])[:12]
    hypotheses = model.translate(sources, beam=1)
    assert final["greedy_bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert final["greedy_chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    test = evaluations[-1]
    hypotheses = model.translate(lines(ALIGNED["test_src"])[:12], beam=1)
    assert test["greedy_bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, [lines(ALIGNED["test_tgt"])[:12]]).score)
    off = train(**ALIGNED, output=str(tmp_path / "off"), eval_decode=0)
    assert not any(key.startswith("greedy_") for r in records(off) for key in r)


def test_seq2seq_a_summarization_run_records_the_rouge_of_its_greedy_summaries(tmp_path):
    """E-mails to subject lines (the fixture's sentences to their translation's first three words)."""
    for split in ("train", "dev"):
        rows = [{"email": source, "subject": " ".join(target.split()[:3])}
                for source, target in zip(lines(ALIGNED[f"{split}_src"]), lines(ALIGNED[f"{split}_tgt"]), strict=True)]
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = train(train=str(tmp_path / "train.jsonl"), dev=str(tmp_path / "dev.jsonl"), format="jsonl",
                source_field="email", target_field="subject", output=str(tmp_path / "run"), eval_decode=20,
                max_steps=4, eval_every=4)
    final = records(run)[-1]
    dev = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()][:20]
    summaries = seqlab.load(run).summarize([p["email"] for p in dev], beam=1)
    for kind, value in rouge(summaries, [p["subject"] for p in dev]).items():
        assert final[f"greedy_{kind}"] == pytest.approx(value)
    assert final["greedy_pairs"] == 20


def test_plots_draw_the_greedy_scores_beside_the_loss(tmp_path, monkeypatch):
    evaluations = [{"step": 10 * k, "split": "valid", "loss": 5.0 - k, "greedy_bleu": 4.0 * k, "greedy_rougeL": 9.0 * k}
                   for k in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evaluations))
    drawn = []
    monkeypatch.setattr(plots, "save_png", lambda figure, path: drawn.append(figure) or path)
    plots.plot_curves(tmp_path)
    loss, scores = drawn[0].axes
    assert [list(line.get_ydata()) for line in loss.get_lines()] == [[4.0, 3.0, 2.0]]
    assert {line.get_label(): list(line.get_ydata()) for line in scores.get_lines()} == {
        "BLEU (greedy, dev sample)": [4.0, 8.0, 12.0], "ROUGE-L (greedy, dev sample)": [9.0, 18.0, 27.0]}
    (tmp_path / "metrics.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if not k.startswith("greedy")}) + "\n" for r in evaluations))
    plots.plot_curves(tmp_path)
    assert len(drawn[1].axes) == 1                                         # --eval-decode 0: the loss alone


@pytest.mark.slow
def test_export_a_moses_run_whose_readme_example_tokenizes_with_sacremoses(tmp_path):
    """The export keeps the languages: its README's program (numpy, onnxruntime and sacremoses, no seqlab)
    prints the runtime's greedy output, Moses-joined."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from test_export_readme import check_example

    from seqlab.export.onnx import export_onnx

    run = train(**raw_files(tmp_path), tokenizer="moses", target_lang="de", output=str(tmp_path / "run"),
                eval_decode=0, max_steps=4)
    export_onnx(run, tmp_path / "export")
    readme = (tmp_path / "export" / "README.md").read_text()
    assert 'MosesTokenizer("en").tokenize(text' in readme and 'MosesDetokenizer("de").detokenize(' in readme
    check_example(tmp_path / "export")


def test_configs_the_raw_text_recipe_is_the_measured_winner():
    """configs/multi30k-raw-gru-dot.yaml is the GRU-dot recipe with the options of benchmarks/seq2seq_raw_text.py's
    bpe row (--min-freq, which a BPE vocabulary ignores, and --raw-text refuse, which acts on the word tokenizer
    alone, left at their defaults)."""
    import dataclasses
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from seq2seq_raw_text import RECIPE, VARIANTS

    assert VARIANTS["bpe"] == ["--tokenizer", "bpe", "--shared-vocab"]      # and --bpe-vocab-size 8000, its default
    measured = resolve_seq2seq_config(RECIPE, {"tokenizer": "bpe", "shared_vocab": True, "bpe_vocab_size": 8000})
    assert measured.data.raw_text == "refuse"
    measured = dataclasses.replace(measured, data=dataclasses.replace(measured.data, min_freq=1, raw_text="warn"))
    folder = Path(__file__).parent.parent / "configs"
    assert resolve_seq2seq_config(folder / "multi30k-raw-gru-dot.yaml") == measured


def test_text_checks_a_recipe_for_tokenised_text_refuses_raw_text_naming_the_raw_recipe(tmp_path, capsys):
    """configs/multi30k-gru-dot.yaml (--raw-text refuse) on raw text stops before training, in one line that names
    the raw recipe; with a tokenizer for raw text (moses) it trains (--raw-text warn, the default, warns: the
    warning tests above)."""
    from seqlab.cli.main import main

    files = raw_files(tmp_path)
    with pytest.raises(SeqlabError, match=r"the training sources look untokenised \(\d+\.\d% of their words have "
                                          r"punctuation attached: `.*configs/multi30k-raw-gru-dot.yaml"):
        train(output=str(tmp_path / "word"), **files, raw_text="refuse")
    assert not (tmp_path / "word" / "model.safetensors").exists()
    recipe = Path(__file__).parent.parent / "configs" / "multi30k-gru-dot.yaml"
    data = [f"--{name.replace('_', '-')}={path}" for name, path in files.items()]
    tiny = ["--embedding-size", "16", "--hidden-size", "16", "--max-steps", "2", "--no-progress"]
    code = main(["train", "seq2seq", "--config", str(recipe), *data, *tiny, "--output", str(tmp_path / "recipe")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("seqlab: error: the training sources look untokenised")
    assert "seqlab train seq2seq --config configs/multi30k-raw-gru-dot.yaml" in err[-1]
    assert main(["train", "seq2seq", "--config", str(recipe), *data, *tiny, "--output", str(tmp_path / "recipe"),
                 "--tokenizer", "moses", "--target-lang", "de"]) == 0          # the same folder: nothing to replace
