"""Each task's quick default on a dataset of its kind that no shipped benchmark uses, against the task's tuned
recipe, and (where this release changed a default) against the old default: what a user who trains with the
defaults on data we never saw gets.

    python benchmarks/defaults_new_data.py --list
    python benchmarks/defaults_new_data.py --run tagging-default tagging-before tagging-recipe
    python benchmarks/defaults_new_data.py --run all            # every run, one after the other (about 2 hours)

The runs (RUNS below; each is `seqlab train ...` as a user would type it, with the task's data options, the
CPU budget and `--threads 1`):

    tagging         CoNLL-2003's POS column (column 1, the Penn Treebank tags; the shipped tagging benchmarks
                    are UD UPOS and CoNLL-2003 NER): `seqlab train tagger` with its defaults (now with a
                    character BiLSTM), the old default (`--char-features none`), and the UD POS recipe
                    (configs/ud-pos-bilstm-char.yaml)
    classification  Davidson et al. 2017 hate speech / offensive / neither tweets, a fixed split of
                    labeled_data.csv (80/10/10, shuffled with seed 2017; the text is offensive on purpose):
                    `seqlab train classifier` with its defaults (a unidirectional LSTM), `--arch pooled` with
                    mean and max pooling from the new N(0, 0.01) and the old N(0, 1) embeddings, and the SST-2
                    recipe (configs/sst2-bilstm-max-phrases.yaml on whole tweets: --no-phrases --tokenizer words)
    lm              the English side of Multi30k (lowercased, tokenised: multi30k/tok/*.en; no LM benchmark uses
                    it): `seqlab train lm` with its defaults (a character-level 2 x 200 LSTM), the same with
                    `--tokenizer bpe`, and the wikitext-2 recipe (configs/wikitext2-lstm-tied-short.yaml, a
                    tied word-level LSTM); bits per character compare the three
    seq2seq         Multi30k English -> German, the reverse of the shipped German -> English rows:
                    `seqlab train seq2seq` with its defaults (an LSTM encoder-decoder without attention) and the
                    GRU + dot attention recipe (configs/multi30k-gru-dot.yaml)

Every run must train within ~15 minutes on one CPU thread: where the defaults or the recipe would take longer,
both get the same smaller number of epochs (EPOCHS: 10 for the taggers, whose default and recipe have 20
(an epoch of CoNLL-2003 took a minute on one shared thread); 4 for the language models, whose default is 10
and recipe 5; 1 for seq2seq, whose default is 10 and recipe 8), stated in each record (`epochs`, `budget`).
Records go to benchmarks/results/defaults_new_data.json and .md.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import hashlib
import io
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from classification_quality import describe as describe_classifier  # noqa: E402
from seq2seq_quality import describe as describe_seq2seq  # noqa: E402
from seq2seq_quality import evaluate as evaluate_json  # noqa: E402

import seqlab  # noqa: E402
from common import RESULTS, device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402
from tagging_quality import describe as describe_tagger  # noqa: E402

RESULTS_NAME = "defaults_new_data"
TITLE = "Defaults on new data: each task's quick default against its tuned recipe"
DAVIDSON_CLASSES = {"0": "hate", "1": "offensive", "2": "neither"}
DAVIDSON_SEED = 2017
TOK = "multi30k/tok/{split}.lc.norm.tok.{lang}"


@dataclass
class Run:
    task: str          # tagging, classification, lm, seq2seq
    role: str          # default (the new default), before (the old default), recipe (the tuned recipe)
    options: list[str]
    what: str          # the run in words
    epochs: int | None = None     # this run's epochs, where not the task's EPOCHS (the few-epoch rows)


RUNS = {
    "tagging-default": Run("tagging", "default", [], "seqlab train tagger defaults (char BiLSTM)"),
    "tagging-before": Run("tagging", "before", ["--char-features", "none"], "the old default: no characters"),
    "tagging-recipe": Run("tagging", "recipe", ["--config", "configs/ud-pos-bilstm-char.yaml"],
                          "the UD POS recipe (ud-pos-bilstm-char)"),
    "classification-default": Run("classification", "default", [], "seqlab train classifier defaults (uni-LSTM)"),
    "classification-pooled": Run("classification", "default", ["--arch", "pooled"],
                                 "--arch pooled (mean), N(0, 0.01) embeddings"),
    "classification-pooled-before": Run("classification", "before", ["--arch", "pooled", "--embedding-std", "1.0"],
                                        "--arch pooled (mean), the old N(0, 1) embeddings"),
    "classification-pooled-max": Run("classification", "default", ["--arch", "pooled", "--pooling", "max"],
                                     "--arch pooled --pooling max, N(0, 0.01) embeddings"),
    "classification-pooled-max-before": Run("classification", "before", ["--arch", "pooled", "--pooling", "max",
                                                                         "--embedding-std", "1.0"],
                                            "--arch pooled --pooling max, the old N(0, 1) embeddings"),
    "classification-recipe": Run("classification", "recipe", ["--config", "configs/sst2-bilstm-max-phrases.yaml",
                                                              "--no-phrases", "--tokenizer", "words"],
                                 "the SST-2 recipe (sst2-bilstm-max-phrases) on whole tweets"),
    "lm-default": Run("lm", "default", [], "seqlab train lm defaults (char 2 x 200 LSTM)"),
    "lm-default-bpe": Run("lm", "default", ["--tokenizer", "bpe"], "the defaults with --tokenizer bpe"),
    "lm-recipe": Run("lm", "recipe", ["--config", "configs/wikitext2-lstm-tied-short.yaml"],
                     "the wikitext-2 recipe (wikitext2-lstm-tied-short, words)"),
    **{f"ner-{name}-{epochs}": Run("ner", role, options, f"{what}, {epochs} epochs", epochs)
       for epochs in (3, 5) for name, role, options, what in (
           ("default", "default", [], "seqlab train tagger defaults (a CRF for entity tags, Adam 5e-3)"),
           ("before", "before", ["--no-crf", "--lr", "0.002"], "the old default: per-token softmax, Adam 2e-3"),
           ("crf", "before", ["--lr", "0.002"], "a CRF at the old default's Adam 2e-3"),
           ("recipe", "recipe", ["--config", "configs/conll2003-ner-bilstm-crf-char.yaml"],
            "the CoNLL NER recipe (conll2003-ner-bilstm-crf-char)"))},
    **{f"pos-{name}-{epochs}": Run("pos", role, options, f"{what}, {epochs} epochs", epochs)
       for epochs in (3, 5) for name, role, options, what in (
           ("default", "default", [], "seqlab train tagger defaults (Adam 5e-3)"),
           ("before", "before", ["--lr", "0.002"], "the old default: Adam 2e-3"),
           ("recipe", "recipe", ["--config", "configs/ud-pos-bilstm-char.yaml"],
            "the UD POS recipe (ud-pos-bilstm-char)"))},
    "seq2seq-default": Run("seq2seq", "default", [], "seqlab train seq2seq defaults (LSTM, no attention)"),
    "seq2seq-recipe": Run("seq2seq", "recipe", ["--config", "configs/multi30k-gru-dot.yaml"],
                          "the Multi30k de-en recipe (multi30k-gru-dot)"),
}
# the CPU budget: every run of a task trains this many epochs (None: its own default or recipe's number)
EPOCHS = {"tagging": 10, "classification": None, "lm": 4, "seq2seq": 1, "ner": None, "pos": None}
DATASETS = {"tagging": "conll2003", "classification": "davidson_hate_speech", "lm": "multi30k", "seq2seq": "multi30k",
            "ner": "conll2003", "pos": "ud_english_ewt"}
COMMANDS = {"tagging": ["train", "tagger"], "classification": ["train", "classifier"], "lm": ["train", "lm"],
            "seq2seq": ["train", "seq2seq"], "ner": ["train", "tagger"], "pos": ["train", "tagger"]}


# ---------------------------------------------------------------------------- data

def davidson_split(data_dir: Path, folder: Path) -> dict:
    """labeled_data.csv as train / dev / test JSON lines ({"text", "label"}: hate, offensive, neither), 80/10/10
    of the tweets shuffled with seed DAVIDSON_SEED; returns the sizes and the source's SHA-256."""
    source = data_dir / "davidson_hate_speech" / "labeled_data.csv"
    raw = source.read_bytes()
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    order = list(range(len(rows)))
    random.Random(DAVIDSON_SEED).shuffle(order)
    cut = [0, int(0.8 * len(rows)), int(0.9 * len(rows)), len(rows)]
    folder.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for k, split in enumerate(("train", "dev", "test")):
        chosen = [rows[i] for i in order[cut[k]:cut[k + 1]]]
        lines = [json.dumps({"text": r["tweet"], "label": DAVIDSON_CLASSES[r["class"]]}, ensure_ascii=False)
                 for r in chosen]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        sizes[split] = len(chosen)
    return {"sizes": sizes, "sha256": hashlib.sha256(raw).hexdigest()}


def data_options(task: str, data_dir: Path, work: Path) -> tuple[list[str], dict]:
    """The task's data options for `seqlab train` (after any --config, so they win) and a note on the data."""
    if task == "tagging":
        folder = data_dir / "conll2003"
        return ["--train", str(folder / "train.txt"), "--dev", str(folder / "valid.txt"), "--test",
                str(folder / "test.txt"), "--format", "conll", "--label-column", "1"], {
            "data": "conll2003 train / valid / test, column 1 (POS, Penn Treebank tags)"}
    if task == "ner":
        folder = data_dir / "conll2003"
        return ["--train", str(folder / "train.txt"), "--dev", str(folder / "valid.txt"), "--test",
                str(folder / "test.txt"), "--format", "conll"], {
            "data": "conll2003 train / valid / test, the NER column (IOB1 in the files, trained as IOB2)"}
    if task == "pos":
        folder = data_dir / "ud_english_ewt"
        return ["--train", str(folder / "en_ewt-ud-train.conllu"), "--dev", str(folder / "en_ewt-ud-dev.conllu"),
                "--test", str(folder / "en_ewt-ud-test.conllu")], {"data": "UD English-EWT train / dev / test, UPOS"}
    if task == "classification":
        split = davidson_split(data_dir, work / "davidson")
        return ["--train", str(work / "davidson" / "train.jsonl"), "--dev", str(work / "davidson" / "dev.jsonl"),
                "--test", str(work / "davidson" / "test.jsonl"), "--format", "jsonl"], {
            "data": f"labeled_data.csv (sha256 {split['sha256'][:12]}...) shuffled with seed {DAVIDSON_SEED}, "
                    f"80/10/10: {split['sizes']['train']:,} / {split['sizes']['dev']:,} / "
                    f"{split['sizes']['test']:,} tweets"}
    if task == "lm":
        return ["--train", str(data_dir / TOK.format(split="train", lang="en")),
                "--valid", str(data_dir / TOK.format(split="val", lang="en")),
                "--test", str(data_dir / TOK.format(split="test_2016_flickr", lang="en"))], {
            "data": "multi30k/tok/*.lc.norm.tok.en: train / val / test_2016_flickr"}
    return ["--train-src", str(data_dir / TOK.format(split="train", lang="en")),
            "--train-tgt", str(data_dir / TOK.format(split="train", lang="de")),
            "--dev-src", str(data_dir / TOK.format(split="val", lang="en")),
            "--dev-tgt", str(data_dir / TOK.format(split="val", lang="de")),
            "--test-src", str(data_dir / TOK.format(split="test_2016_flickr", lang="en")),
            "--test-tgt", str(data_dir / TOK.format(split="test_2016_flickr", lang="de"))], {
        "data": "multi30k/tok/*.lc.norm.tok.{en,de}, English -> German: train / val / test_2016_flickr"}


# ---------------------------------------------------------------------------- figures

def figures(task: str, output: Path, data_dir: Path, threads: int) -> tuple[str, dict[str, dict[str, float]]]:
    """The model in words and {split: {metric: value}} for the valid and test splits, with the best weights."""
    final = {m["split"]: m for m in map(json.loads, (output / "metrics.jsonl").read_text().splitlines())
             if m.get("final")}
    model = seqlab.load(output)
    if task in ("tagging", "pos"):
        return describe_tagger(model.config), {s: {"accuracy": m["accuracy"]} for s, m in final.items()}
    if task == "ner":
        return describe_tagger(model.config), {s: {"f1": m["f1"], "accuracy": m["accuracy"]}
                                               for s, m in final.items()}
    if task == "classification":
        return describe_classifier(model.config), {s: {"accuracy": m["accuracy"], "macro_f1": m["macro_f1"]}
                                                   for s, m in final.items()}
    if task == "lm":
        arch = f"{model.config.model.arch} {model.config.model.num_layers} x {model.config.model.hidden_size}, " \
               f"{model.unit}s" + (", tied" if model.config.model.tie_weights else "")
        return arch, {s: {"perplexity": m["perplexity"], "bits_per_char": m["bits_per_char"],
                          "bits_per_token": m["bits_per_token"]} for s, m in final.items()}
    result = {}
    for split, name in (("valid", "val"), ("test", "test_2016_flickr")):
        evaluated = evaluate_json(output, ["--src", str(data_dir / TOK.format(split=name, lang="en")),
                                           "--tgt", str(data_dir / TOK.format(split=name, lang="de")),
                                           "--beam", "5", "--bleu-tokenize", "none", "--threads", str(threads)])
        result[split] = {"bleu_tok_lc": evaluated["bleu"], "chrf": evaluated["chrf"],
                         "perplexity": evaluated["perplexity"]}
    return describe_seq2seq(model.config), result


def run_one(name: str, data_dir: Path, work: Path, threads: int, precision: str | None = None) -> list[dict]:
    spec = RUNS[name]
    output = work / name
    data, note = data_options(spec.task, data_dir, work)
    epochs = spec.epochs or EPOCHS[spec.task]
    budget = ["--epochs", str(epochs)] if epochs else []
    command = [*COMMANDS[spec.task], *spec.options, *data, *budget, "--output", str(output), "--overwrite",
               "--threads", str(threads), "--no-progress", *(["--precision", precision] if precision else [])]
    print("seqlab " + " ".join(command), file=sys.stderr, flush=True)
    start = time.time()
    code = seqlab_main(command)
    if code:
        raise SystemExit(code)
    wall = time.time() - start
    arch, by_split = figures(spec.task, output, data_dir, threads)
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    periodic = [m for m in map(json.loads, (output / "metrics.jsonl").read_text().splitlines()) if not m.get("final")]
    model = seqlab.load(output)
    speed = round(statistics.median(r["tokens_per_s"] for r in log), 1) if log else None   # the trainer's units
    speeds = {"tagging": {"tokens_per_s": speed}, "ner": {"tokens_per_s": speed}, "pos": {"tokens_per_s": speed},
              "lm": {"tokens_per_s": speed},
              "classification": {"tokens_per_s": None, "docs_per_s_training": speed},
              "seq2seq": {"tokens_per_s": None, "target_tokens_per_s_training": speed}}[spec.task]
    common = {"task": spec.task, "dataset": DATASETS[spec.task], "arch": arch, "config": name,
              "params": model.model.num_parameters(), **speeds,
              "wall_s": round(wall, 1), "device": device_name("cpu"), "epochs": periodic[-1]["epoch"],
              "role": spec.role, "run": spec.what, "seqlab_command": "seqlab " + " ".join(command),
              "budget": f"{spec.epochs} epochs, default and recipe alike" if spec.epochs else
              f"{EPOCHS[spec.task]} epochs for every {spec.task} run" if EPOCHS[spec.task] else
              "the run's own number of epochs", **note}
    if spec.task == "lm":
        common["unit"] = model.unit
    return [record(**common, split=split, metric=metric, value=round(value, 4 if metric.startswith("bits") else 2))
            for split, values in by_split.items() for metric, value in values.items()]


# ---------------------------------------------------------------------------- the summary table

MAIN_METRIC = {"tagging": "accuracy", "classification": "macro_f1", "lm": "bits_per_char", "seq2seq": "bleu_tok_lc",
               "ner": "f1", "pos": "accuracy"}


def summary(records: list[dict]) -> str:
    """One row per run: the task's main test figure (and its others), default against recipe."""
    rows = ["| task | dataset | run | role | params | epochs | minutes | test figures |",
            "|---|---|---|---|---|---|---|---|"]
    for name in RUNS:
        mine = [r for r in records if r["config"] == name and r["split"] == "test"]
        if not mine:
            continue
        first = mine[0]
        shown = ", ".join(f"{r['metric']} **{r['value']}**" if r["metric"] == MAIN_METRIC[first["task"]]
                          else f"{r['metric']} {r['value']}" for r in mine)
        rows.append(f"| {first['task']} | {first['dataset']} | {first['run']} (`{name}`) | {first['role']} | "
                    f"{first['params']:,} | {first['epochs']} | {first['wall_s'] / 60:.1f} | {shown} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs="+", default=[], help=f"runs to train: {', '.join(RUNS)} or all")
    parser.add_argument("--list", action="store_true", help="list the runs and exit")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--work-dir", default="runs/bench/defaults-new-data",
                        help="run directories and the Davidson split")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default=None,
                        help="train with this --precision (default: seqlab's own, auto: bf16 on a CPU with bf16 "
                             "kernels for the large models)")
    args = parser.parse_args()
    if args.list:
        for name, spec in RUNS.items():
            print(f"{name:34} {spec.task:15} {spec.role:8} {spec.what}")
        return 0
    names = list(RUNS) if args.run == ["all"] else args.run
    unknown = [n for n in names if n not in RUNS]
    if unknown or not names:
        parser.error(f"--run: choose among {', '.join(RUNS)} or all" + (f" (unknown: {unknown})" if unknown else ""))
    work = Path(args.work_dir)
    for name in names:
        records = run_one(name, Path(args.data_dir), work, args.threads, args.precision)
        with open(work / "results.lock", "w") as lock:           # runs of two queues may finish together
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = RESULTS / f"{RESULTS_NAME}.json"
            existing = json.loads(path.read_text()) if path.exists() else []
            merged = [r for r in existing if r["config"] != name] + records
            write_records(RESULTS_NAME, records, TITLE, notes=NOTES + "\n\n" + summary(merged))
        for r in records:
            print(json.dumps(r))
    return 0


NOTES = """Each row is one `seqlab train` run on data no shipped benchmark uses (see `benchmarks/defaults_new_data.py`
for the exact data, split and options; `seqlab_command` in the JSON is the command that trained it). `role`:
`default` is what `seqlab train <task>` does with no option but the data (and, for the pooled classifier, the
arch); `before` is the default this release replaced (taggers without characters, the pooled classifier from
N(0, 1) embeddings); `recipe` is the shipped config tuned on the task's benchmark, applied unchanged but for the
data options. One CPU thread per run, one seed. `accuracy` and `macro_f1` in percent; `bits_per_char`: the
summed loss in bits over the characters of the text (a line break each), comparable across tokenizers;
`perplexity` per the run's own unit (`unit`); `bleu_tok_lc`: BLEU of the lowercased tokenised outputs against
the tokenised references (beam 5)."""


if __name__ == "__main__":
    raise SystemExit(main())
