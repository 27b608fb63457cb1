"""Translation from raw text: which tokenizer to train on untokenised sentences, measured.

    python benchmarks/seq2seq_raw_text.py                               # word, moses and joint BPE, 1 epoch each
    python benchmarks/seq2seq_raw_text.py --variants bpe --epochs 8     # one variant, longer (config bpe-8ep)

Multi30k English -> German from the ORIGINAL files (multi30k/raw/{train,val,test_2016_flickr}.{en,de}.gz under
--data-dir: 29,000 / 1,014 / 1,000 pairs, cased, punctuation attached), trained with the GRU-dot recipe
(configs/multi30k-gru-dot.yaml, made for the lowercased tokenised files) and one tokenizer option each:

    word   --tokenizer word: whitespace-separated words, what a user gets today on raw text (`dog.` is a word)
    moses  --tokenizer moses --source-lang en --target-lang de: Moses's rules (sacremoses), detokenised back
    bpe    --tokenizer bpe --shared-vocab --bpe-vocab-size N: one byte-level BPE model learned on both sides

Each run is scored on test_2016_flickr as a user would score it (`seqlab evaluate --src --tgt`): sacrebleu with
its default 13a tokenization on the detokenised outputs against the raw references, greedy and beam 5; chrF;
the share of outputs that hold `<unk>`; the share of the training tokens (source, target) read as <unk>; and the
dev BLEU the run recorded at its last evaluation (greedy, first 500 dev pairs: --eval-decode). Perplexities are
not compared: their tokens differ between tokenizers.

Writes benchmarks/results/seq2seq_raw_text.json and .md (one record per figure, each with its command).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402
from seqlab.fileio import read_text  # noqa: E402

RAW = "multi30k/raw/{split}.{lang}.gz"
RECIPE = Path(__file__).resolve().parent.parent / "configs" / "multi30k-gru-dot.yaml"
VARIANTS = {
    "word": ["--tokenizer", "word", "--raw-text", "warn"],    # the recipe refuses raw text: measured as it trained
    "moses": ["--tokenizer", "moses", "--source-lang", "en", "--target-lang", "de"],
    "bpe": ["--tokenizer", "bpe", "--shared-vocab"],          # --bpe-vocab-size added from the command line
}
NOTES = ("Multi30k English -> German trained on the raw (cased, untokenised) files with the GRU-dot recipe "
         "(configs/multi30k-gru-dot.yaml: bi-GRU 256 with dot attention, --min-freq 2) and one tokenizer option; "
         "`--epochs` epochs on one thread. Test: test_2016_flickr (1,000 pairs). `sacrebleu`: sacrebleu's default "
         "13a tokenization on the detokenised outputs against the raw references (cased); `chrf`: sacrebleu's chrF; "
         "`unk_outputs_pct`: the share of outputs holding `<unk>`; `train_unk_source_pct` / `train_unk_target_pct`: "
         "the share of the training tokens read as <unk> (--min-freq 2; BPE has none); `valid_bleu_greedy`: the dev "
         "BLEU of the run's last evaluation (greedy, first 500 dev pairs). Config names ending in `-greedy` are the "
         "same run decoded greedily (beam 1), the others beam 5. Rows whose command has --skip-training were "
         "scored again from runs this script trained without it (same options). `wall_s`: training, on a machine "
         "shared with other work (compare it across rows with care). Each row's command is in the JSON.")


def evaluate(run: Path, folder: Path, beam: int) -> dict:
    """`seqlab evaluate` of test_2016_flickr, its outputs kept; the share of outputs that hold <unk>."""
    outputs = run / f"test_2016_flickr.beam{beam}.de"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = seqlab_main(["evaluate", str(run),
                            "--src", str(folder / RAW.format(split="test_2016_flickr", lang="en")),
                            "--tgt", str(folder / RAW.format(split="test_2016_flickr", lang="de")),
                            "--beam", str(beam), "--hypotheses", str(outputs), "--json"])
    if code:
        raise SystemExit(code)
    result = json.loads(buffer.getvalue())
    lines = read_text(outputs).splitlines()
    result["unk_outputs_pct"] = 100.0 * sum("<unk>" in line for line in lines) / max(len(lines), 1)
    return result


def training_unknowns(run: Path) -> dict:
    """The share of the training tokens of each side read as <unk>, from the run's prepared data."""
    manifest = run / "prepared" / "manifest.json"
    if not manifest.exists():                       # prepared elsewhere ($SEQLAB_CACHE_DIR)
        return {}
    train = json.loads(manifest.read_text())["splits"]["train"]
    shares = {}
    for side in ("source", "target"):
        tokens = train["streams"][side]["ids"]
        shares[f"train_unk_{side}_pct"] = 100.0 * train[f"unknown_{side}"] / max(tokens, 1)
    return shares


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bpe-vocab-size", type=int, default=8000)
    parser.add_argument("--output", default="runs/bench/raw", help="the runs go to OUTPUT/multi30k-raw-<variant>")
    parser.add_argument("--skip-training", action="store_true", help="score the runs in --output as they are")
    parser.add_argument("--results", default="seq2seq_raw_text", help="results file under benchmarks/results")
    parser.add_argument("seqlab_options", nargs=argparse.REMAINDER, help="more `seqlab train seq2seq` options after --")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)           # scoring too, and the device the records name
    folder = Path(args.data_dir)
    data = []
    for split, flag in (("train", "train"), ("val", "dev")):
        data += [f"--{flag}-src", str(folder / RAW.format(split=split, lang="en")),
                 f"--{flag}-tgt", str(folder / RAW.format(split=split, lang="de"))]
    extra = [a for a in args.seqlab_options if a != "--"]
    rows = []
    for variant in args.variants:
        run = Path(args.output) / f"multi30k-raw-{variant}" if args.epochs == 1 else \
            Path(args.output) / f"multi30k-raw-{variant}-{args.epochs}ep"
        options = VARIANTS[variant] + (["--bpe-vocab-size", str(args.bpe_vocab_size)] if variant == "bpe" else [])
        start = time.time()
        if not args.skip_training:
            code = seqlab_main(["train", "seq2seq", "--config", str(RECIPE), *data, *options, "--epochs",
                                str(args.epochs), "--threads", str(args.threads), "--no-progress", "--output", str(run),
                                "--overwrite", *extra])
            if code:
                raise SystemExit(code)
        wall = time.time() - start
        model = seqlab.load(run)
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        periodic = [m for m in metrics if not m.get("final")]
        if args.skip_training:
            wall = max((m["elapsed_s"] for m in periodic if "elapsed_s" in m), default=None)
        common = {"task": "seq2seq", "dataset": "multi30k-raw-en-de", "arch": "bi-gru 256, dot attention",
                  "params": model.model.num_parameters(), "wall_s": None if wall is None else round(wall, 1),
                  "epochs": periodic[-1]["epoch"] if periodic else None, "device": device_name("cpu"),
                  "source_vocab": len(model.vocabulary.source_vocab),
                  "target_vocab": len(model.vocabulary.target_vocab)}
        figures = {}
        for beam, suffix in ((5, ""), (1, "-greedy")):
            result = evaluate(run, folder, beam)
            figures[suffix] = {"sacrebleu": result["bleu"], "chrf": result["chrf"],
                               "unk_outputs_pct": result["unk_outputs_pct"]}
        figures[""].update(training_unknowns(run))
        if periodic and "greedy_bleu" in periodic[-1]:
            figures[""]["valid_bleu_greedy"] = periodic[-1]["greedy_bleu"]
        name = variant if args.epochs == 1 else f"{variant}-{args.epochs}ep"
        for suffix, values in figures.items():
            for metric, value in values.items():
                split = "valid" if metric.startswith("valid") else "train" if metric.startswith("train") else "test"
                rows.append(record(**common, config=name + suffix, split=split, metric=metric,
                                   value=round(value, 2)))
        write_records(args.results, rows, "Sequence to sequence on raw text: which tokenizer", NOTES)
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
