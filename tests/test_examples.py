"""The example datasets (`seqlab.examples`, `seqlab examples`): each task's files are read by its family's own
readers through the options `command()` gives, the same seed writes the same bytes, each dataset has the
property it is built for (ambiguous POS forms, unseen names, sentiment that word order decides, reordered
translations, subjects read off one sentence of an email), the command line writes and lists them, errors are
one line, and one tiny run per family trains. The slow tests train the "small" data with `command()` and
check that the model beats what a model blind to the dataset's point reaches."""

from __future__ import annotations

import math
import re
import shlex
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from seqlab import examples
from seqlab.cli.main import build_parser, main
from seqlab.errors import SeqlabError
from seqlab.families.seq2seq import examples as seq2seq_examples
from seqlab.registry import family

UPOS = {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X"}


def resolved(task: str, folder: Path, output: Path | None = None):
    """The config `seqlab train` resolves from `command(task, folder)`, as its handler does."""
    args = build_parser().parse_args(shlex.split(examples.command(task, folder, output=output))[1:])
    pipeline = family(args.task).pipeline
    return pipeline.resolve(None, {k: v for k, v in vars(args).items() if k in pipeline.option_groups})


def read_splits(task: str, folder: Path) -> dict[str, list]:
    """Each split as the family's own reader reads it, through the options of `command()`."""
    data, name = resolved(task, folder).data, config_family(task)
    if name == "lm":
        from seqlab.data.readers import read_lines
        return {split: read_lines(getattr(data, split)) for split in ("train", "valid", "test")}
    if name == "tagger":
        from seqlab.families.tagger.config import read_sentences
        return {split: read_sentences(getattr(data, split), data, split) for split in examples.SPLITS}
    if name == "classifier":
        from seqlab.families.classifier.config import read_split
        return {split: read_split(getattr(data, split), data, split) for split in examples.SPLITS}
    from seqlab.families.seq2seq.config import read_pairs
    return {split: read_pairs(data, split)[0] for split in examples.SPLITS}


def folder_of(files: dict[str, Path]) -> Path:
    return next(iter(files.values())).parent


def config_family(task: str) -> str:
    return examples.dataset(task).family


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("examples")
    return {task: examples.write(task, folder / task, size="tiny") for task in examples.TASKS}


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """The small files of the tasks whose statistics the tests count (fast to write: well under a second)."""
    folder = tmp_path_factory.mktemp("examples-small")
    for task in ("pos", "ner", "sentiment"):
        examples.write(task, folder / task)
    return folder


def test_examples_imports_without_torch():
    code = "import sys; from seqlab import examples; import seqlab.examples; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("task", list(examples.TASKS))
def test_examples_every_task_is_read_by_its_family_through_the_command(task, tiny):
    files = tiny[task]
    assert files == examples.files(task, folder_of(files)) and all(path.is_file() for path in files.values())
    splits = read_splits(task, folder_of(files))
    counts = [len(items) for items in splits.values()]
    if task == "lm":
        assert counts == [540, 30, 30]                     # the first 600 lines, 90/5/5
        corpus = (Path(examples.__file__).parent / "corpora" / "tinyshakespeare.txt").read_text().split("\n")
        assert [line for items in splits.values() for line in items] == corpus[:600]
    else:
        assert counts == list(examples.dataset(task).counts["tiny"])
    if task == "pos":
        assert {tag for sentence in splits["train"] for tag in sentence.labels} <= UPOS
        text = files["train"].read_text().split("\n\n")[0]
        assert text.startswith("# sent_id = train-1\n# text = ") and "\tPUNCT\t" in text
    if task == "ner":
        first = files["train"].read_text().splitlines()
        assert first[0] == "-DOCSTART- -X- -X- O" and first[1] == "" and len(first[2].split()) == 4
        tags = {tag for sentence in splits["train"] for tag in sentence.labels}
        assert tags == {"O"} | {f"{p}-{kind}" for p in "BI" for kind in ("PER", "LOC", "ORG", "MISC")}
        for sentence in splits["train"]:                  # IOB2: I-X only after B-X or I-X
            for before, tag in zip(["O", *sentence.labels], sentence.labels, strict=False):
                assert not tag.startswith("I-") or before[2:] == tag[2:], sentence
    if task == "sentiment":
        assert files["train"].read_text().startswith("text\tlabel\n")
    if task in ("translation", "summarization"):
        assert all(pair.source and pair.target for items in splits.values() for pair in items)


@pytest.mark.parametrize("task", list(examples.TASKS))
def test_examples_the_same_seed_writes_the_same_bytes(task, tiny, tmp_path):
    again = examples.write(task, tmp_path / "again", size="tiny")
    other = examples.write(task, tmp_path / "other", size="tiny", seed=1)
    assert all(again[name].read_bytes() == path.read_bytes() for name, path in tiny[task].items())
    assert (task == "lm") == all(other[name].read_bytes() == path.read_bytes() for name, path in tiny[task].items())


def test_examples_no_example_is_in_two_splits(tiny):
    for task in ("pos", "ner", "translation", "summarization"):
        splits = read_splits(task, folder_of(tiny[task]))
        texts = [{str(getattr(item, "source", None) or getattr(item, "tokens", None)) for item in items}
                 for items in splits.values()]
        assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2]), task


def test_examples_pos_word_forms_carry_several_tags_that_context_decides(small):
    splits = read_splits("pos", small / "pos")
    tags = defaultdict(Counter)
    for sentence in splits["train"]:
        for word, tag in zip(sentence.tokens, sentence.labels, strict=True):
            tags[word.lower()][tag] += 1
    ambiguous = {word for word, counts in tags.items() if len(counts) > 1}
    assert len(ambiguous) >= 25
    for word, expected in {"can": {"AUX", "NOUN", "VERB"}, "saw": {"VERB", "NOUN"}, "flies": {"NOUN", "VERB"},
                           "that": {"DET", "SCONJ", "PRON"}, "like": {"VERB", "ADP"}, "to": {"PART", "ADP"},
                           "book": {"NOUN", "VERB"}, "watch": {"NOUN", "VERB"}, "has": {"AUX", "VERB"}}.items():
        assert expected <= set(tags[word]), (word, tags[word])
    # a tagger that reads each word alone (its most frequent tag) is wrong on about one token in ten
    alone = [tags[word.lower()].most_common(1)[0][0] == tag if word.lower() in tags else False
             for sentence in splits["test"] for word, tag in zip(sentence.tokens, sentence.labels, strict=True)]
    assert 0.85 < sum(alone) / len(alone) < 0.93


def test_examples_ner_has_multi_token_names_and_names_never_seen_in_training(small):
    splits = read_splits("ner", small / "ner")
    names = {split: [entity for sentence in items for entity in entities(sentence)]
             for split, items in splits.items()}
    assert {kind for kind, _ in names["train"]} == {"PER", "LOC", "ORG", "MISC"}
    assert max(len(text.split()) for _, text in names["train"]) >= 3
    seen = {word for _, text in names["train"] for word in text.split()}
    unseen = [text for _, text in names["test"] if not set(text.split()) <= seen]
    assert 0.1 < len(unseen) / len(names["test"]) < 0.6
    both = defaultdict(set)                                # "Jordan", "Washington": people and places
    for kind, text in names["train"]:
        both[text].add(kind)
    assert {"PER", "LOC"} <= both["Jordan"] and {"PER", "LOC"} <= both["Washington"]


def entities(sentence) -> list[tuple[str, str]]:
    found = []
    for word, tag in zip(sentence.tokens, sentence.labels, strict=True):
        if tag.startswith("B-"):
            found.append((tag[2:], word))
        elif tag.startswith("I-"):
            found[-1] = (found[-1][0], f"{found[-1][1]} {word}")
    return found


def test_examples_sentiment_is_balanced_and_decided_by_word_order(small):
    splits = read_splits("sentiment", small / "sentiment")
    for documents in splits.values():
        assert Counter(d.label for d in documents) == {"pos": len(documents) // 2, "neg": len(documents) // 2}
    train = [(d.text, d.label) for d in splits["train"]]
    negated = {label for text, label in train for word in ("bad", "awful", "dull") if f" not {word} ." in text}
    assert negated == {"pos"}                              # "not bad" is positive
    assert {label for text, label in train if re.search(r" not (good|great|wonderful) \.", text)} == {"neg"}
    assert any(" at first but " in text for text, _ in train) and any("although" in text for text, _ in train)
    # the same words in another order with the other label: a bag of words gets at most one of each twin
    bags = defaultdict(Counter)
    for text, label in train:
        bags[tuple(sorted(text.split()))][label] += 1
    best_bag = sum(max(counts.values()) for counts in bags.values()) / len(train)
    assert 0.6 < best_bag < 0.8


TOY = {**seq2seq_examples._TOY_NOUNS, **seq2seq_examples._TOY_ADJECTIVES, **seq2seq_examples._TOY_TRANSITIVE,
       **seq2seq_examples._TOY_INTRANSITIVE, **seq2seq_examples._TOY_POSTPOSITIONS, **seq2seq_examples._TOY_ADVERBS,
       **seq2seq_examples._TOY_DETERMINERS, "das": "that", ".": "."}


def word_for_word(source: str) -> list[str]:
    return " ".join(TOY[word] for word in source.split()).split()


def test_examples_translation_has_the_same_words_in_another_order(tiny):
    pairs = read_splits("translation", folder_of(tiny["translation"]))["train"]
    lengths = [len(pair.source.split()) for pair in pairs]
    assert min(lengths) == 4 and max(lengths) >= 17 and max(lengths) <= 20
    reordered = 0
    for pair in pairs:
        words, target = word_for_word(pair.source), ["a" if w == "an" else w for w in pair.target.split()]
        assert sorted(words) == sorted(target), pair
        reordered += words != target
    assert reordered / len(pairs) > 0.9


def test_examples_summarization_subjects_come_from_one_sentence_among_distractors(tiny):
    pairs = read_splits("summarization", folder_of(tiny["summarization"]))["train"]
    days = set(seq2seq_examples._WEEKDAYS)
    for pair in pairs:
        assert set(pair.target.split()) & days <= set(pair.source.split())
    distracted = [p for p in pairs if len(set(p.source.split()) & days) > len(set(p.target.split()) & days)]
    assert len(distracted) / len(pairs) > 0.3                 # another day in the email than the subject's
    assert len({pair.target.split()[0] for pair in pairs}) >= 8


@pytest.mark.parametrize("task", list(examples.TASKS))
def test_examples_command_parses_with_seqlabs_parser(task, tmp_path):
    folder = tmp_path / "my data"                              # a space: the command quotes it
    line = examples.command(task, folder)
    assert line.startswith(f"seqlab train {config_family(task)} ") and "'" in line
    args = build_parser().parse_args(shlex.split(line)[1:])
    assert args.command == "train" and args.task == config_family(task) and args.output == f"runs/{task}"
    for option, path in examples.files(task, folder).items():
        assert getattr(args, option) == str(path)


def test_examples_cli_writes_prints_and_lists(tmp_path, capsys):
    assert main(["examples", "pos", str(tmp_path / "pos"), "--size", "tiny", "--seed", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    written = examples.write("pos", tmp_path / "again", size="tiny", seed=3)
    assert out[:3] == [f"wrote {tmp_path / 'pos' / name}.conllu" for name in examples.SPLITS]
    assert out[-1].strip() == examples.command("pos", tmp_path / "pos")
    assert (tmp_path / "pos" / "train.conllu").read_bytes() == written["train"].read_bytes()
    for argv in (["examples", "--list"], ["examples"]):
        assert main(argv) == 0
        listed = capsys.readouterr().out.splitlines()
        assert [line.split()[0] for line in listed] == list(examples.TASKS)


def test_examples_tasks_are_collected_from_the_families_examples_parts(tmp_path, monkeypatch):
    """The driver lists every family's datasets in the registry's order (the six of before), each knowing its
    family, and a family registered later (its `examples` part outside seqlab) is listed and written too."""
    import dataclasses

    from seqlab import registry

    assert list(examples.TASKS) == ["lm", "pos", "ner", "sentiment", "translation", "summarization"]
    assert [examples.dataset(task).family for task in examples.TASKS] == [
        "lm", "tagger", "tagger", "classifier", "seq2seq", "seq2seq"]
    package = tmp_path / "toyexamples"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "examples.py").write_text(
        "from seqlab.data.examples import ExampleTask\n"
        "EXAMPLES = {'echo': ExampleTask(summary='lines and their copies', files={'train': 'train.txt'},\n"
        "    counts={'tiny': (2,), 'small': (3,)}, make=lambda rng, counts: {'train': 'a\\n' * counts[0]},\n"
        "    recipe='--epochs 1')}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = dataclasses.replace(registry.FAMILIES["lm"], name="toy", package="toyexamples", examples=True)
    monkeypatch.setitem(registry.FAMILIES, "toy", toy)
    assert list(examples.TASKS)[-1] == "echo" and examples.dataset("echo").family == "toy"
    assert examples.write("echo", tmp_path / "echo", size="tiny")["train"].read_text() == "a\na\n"
    assert examples.command("echo", tmp_path / "echo").startswith("seqlab train toy --train ")


def test_examples_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SeqlabError, match="unknown example task 'poetry': choose one of lm, pos, ner, sentiment"):
        examples.write("poetry", tmp_path)
    with pytest.raises(SeqlabError, match="unknown example size 'huge': choose one of tiny, small"):
        examples.write("pos", tmp_path, size="huge")
    with pytest.raises(SeqlabError, match="unknown example task"):
        examples.command("poetry", tmp_path)
    blocker = tmp_path / "a file"
    blocker.write_text("x")
    with pytest.raises(SeqlabError, match="cannot write example folder .*a file/data"):
        examples.write("pos", blocker / "data", size="tiny")
    examples.write("sentiment", tmp_path / "s", size="tiny")
    (tmp_path / "s" / "dev.tsv").write_text("mine\n")
    with pytest.raises(SeqlabError, match=r"s/train.tsv already exists: add --overwrite \(overwrite=True\)"):
        examples.write("sentiment", tmp_path / "s", size="tiny", seed=1)
    assert (tmp_path / "s" / "dev.tsv").read_text() == "mine\n"      # nothing written
    with pytest.raises(SeqlabError, match=r"s/dev.tsv has changed since seqlab examples wrote it"):
        examples.write("sentiment", tmp_path / "s", size="tiny", overwrite=True)     # the user's: never replaced
    assert (tmp_path / "s" / "dev.tsv").read_text() == "mine\n"
    (tmp_path / "s" / "dev.tsv").unlink()
    examples.write("sentiment", tmp_path / "s", size="tiny", seed=1, overwrite=True)
    assert (tmp_path / "s" / "dev.tsv").read_text().startswith("text\tlabel\n")
    for argv, expect in ((["examples", "poetry", tmp_path / "p"], "unknown example task 'poetry'"),
                         (["examples", "sentiment", tmp_path / "s"], "already exists"),
                         (["examples", "pos"], "seqlab examples pos DIR: the folder to write the files in is missing"),
                         (["examples", "pos", tmp_path, "--size", "huge"], "argument --size: invalid choice"),
                         (["examples", "pos", tmp_path, "--seed", "-1"], "argument --seed")):
        try:
            code = main([str(word) for word in argv])
        except SystemExit as stop:
            code = stop.code
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(err) == 1 and err[0].startswith("seqlab") and expect in err[0], (argv, err)


# one tiny run per family: the command as given, then options that make it a few steps of a tiny model
TINY_RUNS = {
    "lm": ["--embedding-size", "8", "--hidden-size", "8", "--seq-len", "16", "--batch-size", "8", "--max-steps", "4"],
    "pos": ["--embedding-size", "8", "--hidden-size", "8", "--max-steps", "4"],
    "sentiment": ["--embedding-size", "8", "--hidden-size", "8", "--max-steps", "4"],
    "translation": ["--embedding-size", "8", "--hidden-size", "8", "--max-steps", "4", "--eval-decode", "10"],
}


@pytest.mark.parametrize("task", list(TINY_RUNS))
def test_examples_a_tiny_run_of_each_family_trains_on_the_tiny_files(task, tiny, tmp_path):
    from seqlab.runs.records import final_figures

    folder = folder_of(tiny[task])
    line = examples.command(task, folder, output=str(tmp_path / "run"))
    assert main([*shlex.split(line)[1:], "--epochs", "1", "--no-progress", *TINY_RUNS[task]]) == 0
    figures = final_figures(tmp_path / "run")
    assert set(figures) == {"valid", "test"} and figures["test"]["loss"] > 0


# ------------------------------------------------------------------------------------------- slow: learnable

def baseline(task: str, folder: Path) -> tuple[str, float]:
    """The figure `command()`'s model must beat, and what a model blind to the dataset's point reaches."""
    from seqlab.metrics import bleu, span_scores

    splits = read_splits(task, folder)
    if task == "lm":                                       # characters by their training frequency alone
        counts = Counter("\n".join(splits["train"]) + "\n")
        test = "\n".join(splits["test"]) + "\n"
        return "perplexity", math.exp(-sum(math.log(counts[c] / counts.total()) for c in test) / len(test))
    if task in ("pos", "ner"):                             # each word's most frequent training tag
        tags = defaultdict(Counter)
        for sentence in splits["train"]:
            for word, tag in zip(sentence.tokens, sentence.labels, strict=True):
                tags[word][tag.split("-")[-1]] += 1
        guess = [[tags[w].most_common(1)[0][0] if w in tags else "O" for w in s.tokens] for s in splits["test"]]
        gold = [s.labels for s in splits["test"]]
        if task == "pos":
            pairs = [(g, p) for gs, ps in zip(gold, guess, strict=True) for g, p in zip(gs, ps, strict=True)]
            return "accuracy", 100 * sum(g == p for g, p in pairs) / len(pairs)
        bio = [[t if t == "O" else ("I-" if i and s[i - 1] == t else "B-") + t for i, t in enumerate(s)]
               for s in guess]
        return "f1", span_scores(gold, bio).overall.f1
    if task == "sentiment":                                # the best a bag of words can do on the test split
        bags = defaultdict(Counter)
        for document in splits["test"]:
            bags[tuple(sorted(document.text.split()))][document.label] += 1
        return "accuracy", 100 * sum(max(c.values()) for c in bags.values()) / len(splits["test"])
    references = [pair.target for pair in splits["test"]]
    if task == "translation":                              # word for word, in the toy language's order
        return "greedy_bleu", bleu([" ".join(word_for_word(p.source)) for p in splits["test"]], references)
    common = Counter(pair.target for pair in splits["train"]).most_common(1)[0][0]   # the commonest subject
    return "greedy_bleu", bleu([common] * len(references), references)


# what the small data's model reaches at least (measured: lm 5.3 perplexity, pos 98.9, ner 94.6 F1, sentiment
# 100, translation 93.8 BLEU, summarization 94.2 BLEU; the baselines 28.8, 90.3, 62, 68.5, 7.8, 5.0)
GOOD = {"lm": 8.0, "pos": 97.0, "ner": 85.0, "sentiment": 95.0, "translation": 80.0, "summarization": 80.0}


@pytest.mark.slow
@pytest.mark.parametrize("task", list(examples.TASKS))
def test_examples_small_data_trains_to_a_good_score_with_the_command(task, tmp_path):
    from seqlab.runs.records import final_figures

    folder = folder_of(examples.write(task, tmp_path / "data"))
    metric, blind = baseline(task, folder)
    started, cpu = time.perf_counter(), time.process_time()
    assert main([*shlex.split(examples.command(task, folder, output=str(tmp_path / "run")))[1:], "--no-progress"]) == 0
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    score = final_figures(tmp_path / "run")["test"][metric]
    print(f"\n{task}: test {metric} {score:.2f} (blind baseline {blind:.2f}) in {seconds:.0f} s "
          f"({cpu:.0f} s of CPU)")
    if metric == "perplexity":
        assert score < GOOD[task] < blind / 3
    else:
        assert score > GOOD[task] > blind + 5
    if task == "sentiment":      # the pooled bag of embeddings, trained well, reaches the bag's best and no more
        words = shlex.split(examples.command(task, folder, output=str(tmp_path / "pooled")))[1:]
        words = [word for word in words if word != "--bidirectional"]          # of the recurrent encoders only
        assert main([*words, "--arch", "pooled", "--pooling", "mean", "--lr", "1e-2", "--epochs", "15",
                     "--no-progress"]) == 0
        pooled = final_figures(tmp_path / "pooled")["test"]["accuracy"]
        print(f"sentiment: the pooled classifier's test accuracy {pooled:.2f}")
        assert pooled <= blind + 1e-9 and pooled < score - 20
