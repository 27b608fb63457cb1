"""Train a sequence-to-sequence model on a standard dataset and record BLEU / ROUGE and perplexity.

    python benchmarks/seq2seq_quality.py --dataset multi30k --name gru-dot --target 30 -- \
        --arch gru --attention dot --bidirectional
    python benchmarks/seq2seq_quality.py --dataset multi30k --name transformer --target 36 -- --arch transformer
    python benchmarks/seq2seq_quality.py --dataset aeslc --name lm -- --arch lm --shared-vocab --tokenizer bpe
    python benchmarks/seq2seq_quality.py --dataset aeslc --lead-baseline

Datasets (files under --data-dir):
    multi30k  German -> English, multi30k/tok/{train,val,test_2016_flickr}.lc.norm.tok.{de,en}: 29,000 /
              1,014 / 1,000 pairs, lowercased and Moses-tokenised (the text the published figures score).
              Recorded: BLEU on that tokenised text (sacrebleu, tokenize none; `bleu_tok_lc`), and sacrebleu
              on detokenised text: the outputs detokenised by the Moses detokenizer against the original
              multi30k/raw/test_2016_flickr.en, lowercased because the outputs are (`sacrebleu_detok_lc`);
              chrF; test perplexity of the references. Beam 5 and greedy.
    aeslc     email body -> subject line, aeslc/{train,dev,test}.jsonl (14,436 / 1,960 / 1,906). Recorded:
              ROUGE-1/2/L F1 on test against the original subjects (rouge-score, Porter stemmer), beam 5,
              and test perplexity. `--lead-baseline` records the first-k-words baseline instead, with k
              chosen on dev (ROUGE-L).

Runs `seqlab train seq2seq` and `seqlab evaluate` as a user would; writes benchmarks/results/<results>.json
and .md (one record per figure, each with its command).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402
from seqlab.families.seq2seq.parallel import read_paired  # noqa: E402
from seqlab.fileio import read_text  # noqa: E402
from seqlab.metrics import bleu, rouge  # noqa: E402

TOK = "multi30k/tok/{split}.lc.norm.tok.{lang}"
DATASETS = {
    "multi30k": ["--train-src", TOK.format(split="train", lang="de"),
                 "--train-tgt", TOK.format(split="train", lang="en"),
                 "--dev-src", TOK.format(split="val", lang="de"), "--dev-tgt", TOK.format(split="val", lang="en"),
                 "--test-src", TOK.format(split="test_2016_flickr", lang="de"),
                 "--test-tgt", TOK.format(split="test_2016_flickr", lang="en")],
    "aeslc": ["--train", "aeslc/train.jsonl", "--dev", "aeslc/dev.jsonl", "--test", "aeslc/test.jsonl",
              "--format", "jsonl", "--source-field", "email", "--target-field", "subject"],
}
DATASET_NAMES = {"multi30k": "multi30k-de-en", "aeslc": "aeslc"}


def describe(config) -> str:
    model = config.model
    if model.arch in ("rnn", "lstm", "gru"):
        arch = ("bi-" if model.bidirectional else "") + model.arch + f" {model.hidden_size}"
        arch += f" x{model.num_layers}" if model.num_layers > 1 else ""
        arch += f", {model.attention} attention" if model.attention != "none" else ", no attention"
        extras = [name for name in ("copy", "coverage") if getattr(model, name, False)]
        return arch + "".join(f" + {name}" for name in extras)
    kind = "transformer enc-dec" if model.arch == "transformer" else "decoder-only lm with <sep>"
    return f"{kind} d{model.embedding_size} x{model.num_layers}"


def evaluate(output: Path, arguments: list[str]) -> dict:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = seqlab_main(["evaluate", str(output), *arguments, "--json"])
    if code:
        raise SystemExit(code)
    return json.loads(buffer.getvalue())


def multi30k_figures(output: Path, folder: Path, beam: int) -> dict:
    from sacremoses import MosesDetokenizer

    hypotheses = output / f"test_2016_flickr.beam{beam}.en"
    result = evaluate(output, ["--src", str(folder / TOK.format(split="test_2016_flickr", lang="de")),
                               "--tgt", str(folder / TOK.format(split="test_2016_flickr", lang="en")),
                               "--beam", str(beam), "--bleu-tokenize", "none", "--hypotheses", str(hypotheses)])
    outputs = read_text(hypotheses).splitlines()
    detokenizer = MosesDetokenizer("en")
    detokenized = [detokenizer.detokenize(line.split()) for line in outputs]
    raw = read_text(folder / "multi30k/raw/test_2016_flickr.en.gz").splitlines()
    return {"bleu_tok_lc": result["bleu"], "sacrebleu_detok_lc": bleu(detokenized, raw, "13a", lowercase=True),
            "chrf": result["chrf"], "perplexity": result["perplexity"]}


def aeslc_figures(output: Path, folder: Path, beam: int) -> dict:
    result = evaluate(output, [str(folder / "aeslc/test.jsonl"), "--format", "jsonl", "--beam", str(beam),
                               "--hypotheses", str(output / f"test.beam{beam}.subjects")])
    return {"rouge1": result["rouge1"], "rouge2": result["rouge2"], "rougeL": result["rougeL"],
            "perplexity": result["perplexity"]}


def lead_words(text: str, k: int) -> str:
    return " ".join(text.split()[:k])


def lead_baseline(folder: Path) -> tuple[int, dict, dict]:
    """The first k words of the email as its subject, k (1-30) chosen by dev ROUGE-L."""
    dev = read_paired(folder / "aeslc/dev.jsonl", "jsonl", "email", "subject")
    test = read_paired(folder / "aeslc/test.jsonl", "jsonl", "email", "subject")
    scored = {k: rouge([lead_words(p.source, k) for p in dev], [p.target for p in dev]) for k in range(1, 31)}
    k = max(scored, key=lambda n: scored[n]["rougeL"])
    return k, scored[k], rouge([lead_words(p.source, k) for p in test], [p.target for p in test])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, choices=list(DATASETS))
    parser.add_argument("--name", help="the row's config name")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", help="run directory (default: runs/bench/<dataset>-<name>)")
    parser.add_argument("--results", default="seq2seq_quality", help="results file under benchmarks/results")
    parser.add_argument("--target", type=float, help="the test BLEU the issue asks for (multi30k)")
    parser.add_argument("--note", default="", help="a remark stored with the records")
    parser.add_argument("--lead-baseline", action="store_true", help="aeslc: record the lead-words baseline")
    parser.add_argument("--skip-training", action="store_true", help="evaluate the run in --output as it is")
    parser.add_argument("seqlab_options", nargs=argparse.REMAINDER,
                        help="`seqlab train seq2seq` options after --, e.g. -- --arch gru --attention dot")
    args = parser.parse_args()
    folder = Path(args.data_dir)
    notes = ("BLEU, chrF and ROUGE in percent. multi30k: `bleu_tok_lc` is BLEU on the lowercased Moses-tokenised "
             "text (the published figures' convention; sacrebleu, tokenize none); `sacrebleu_detok_lc` is sacrebleu "
             "(13a) on the outputs detokenised by sacremoses against the original test references, lowercased. "
             "aeslc: ROUGE F1 against the original subject lines (rouge-score with stemming). `perplexity`: of "
             "the reference targets, per target token (</s> included). Config names ending in `-greedy` are the "
             "same run decoded greedily. Each row's command is in the JSON.")
    if args.lead_baseline:
        k, dev, test = lead_baseline(folder)
        rows = [record(task="seq2seq", dataset="aeslc", split=split, arch=f"lead-{k} words (k chosen on dev)",
                       config="lead-words", metric=metric, value=round(figures[metric], 2), params=0, device="-")
                for split, figures in (("valid", dev), ("test", test)) for metric in ("rouge1", "rouge2", "rougeL")]
        write_records(args.results, rows, "Sequence to sequence quality", notes)
        for r in rows:
            print(json.dumps(r))
        return 0
    if not args.name:
        parser.error("--name is required")
    output = Path(args.output or f"runs/bench/{args.dataset}-{args.name}")
    options = [a for a in args.seqlab_options if a != "--"]
    data_options = [str(folder / a) if "/" in a else a for a in DATASETS[args.dataset]]
    start = time.time()
    if not args.skip_training:
        code = seqlab_main(["train", "seq2seq", *data_options, "--output", str(output), "--overwrite", *options])
        if code:
            raise SystemExit(code)
    wall = time.time() - start
    model = seqlab.load(output)
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    metrics = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    periodic = [m for m in metrics if not m.get("final")]
    if args.skip_training:          # the training time the run itself logged (to its last periodic evaluation)
        wall = max((m["elapsed_s"] for m in periodic if "elapsed_s" in m), default=None)
    valid = [m for m in metrics if m.get("final") and m["split"] == "valid"]
    common = {"task": "seq2seq", "dataset": DATASET_NAMES[args.dataset], "arch": describe(model.config),
              "params": model.model.num_parameters(), "wall_s": None if wall is None else round(wall, 1),
              "epochs": periodic[-1]["epoch"] if periodic else None,
              "target_tokens_per_s_training": statistics.median(r["tokens_per_s"] for r in log) if log else None,
              "device": device_name("cpu" if model.config.train.device in ("auto", "cpu")
                                    else model.config.train.device)}
    if args.note:
        common["note"] = args.note
    rows = []
    if valid:
        rows.append(record(**common, config=args.name, split="valid", metric="perplexity",
                           value=round(valid[0]["perplexity"], 2)))
    for beam, suffix in ((5, ""), (1, "-greedy")):
        figures = (multi30k_figures if args.dataset == "multi30k" else aeslc_figures)(output, folder, beam)
        for metric, value in figures.items():
            if suffix and metric == "perplexity":
                continue
            target = args.target if metric == "bleu_tok_lc" and not suffix else None
            rows.append(record(**common, config=args.name + suffix, split="test", metric=metric,
                               value=round(value, 2), target=target))
    write_records(args.results, rows, "Sequence to sequence quality", notes)
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
