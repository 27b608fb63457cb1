"""Train a tagger on a standard dataset with a shipped config and record its accuracy or entity F1.

    python benchmarks/tagging_quality.py --dataset ud_english_ewt --config configs/ud-pos-bilstm-char.yaml --target 95.0
    python benchmarks/tagging_quality.py --dataset conll2003 \
        --config configs/conll2003-ner-bilstm-crf-char.yaml --target 87.0

Runs `seqlab train tagger` (the command line, as a user would) on the dataset's files from --data-dir,
then records dev and test figures (UPOS accuracy for UD, entity F1 for CoNLL-2003), parameters,
training tokens/s (median over the logging windows) and wall time in benchmarks/results/<results>.json
and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402

DATASETS = {  # train, dev, test, the metric the issue names
    "ud_english_ewt": ("en_ewt-ud-train.conllu", "en_ewt-ud-dev.conllu", "en_ewt-ud-test.conllu", "accuracy"),
    "conll2003": ("train.txt", "valid.txt", "test.txt", "f1"),
}


def describe(config) -> str:
    """The model in a few words, e.g. `bi-lstm +char-lstm, crf` or `transformer x2, softmax`."""
    model = config.model
    encoder = model.encoder
    if encoder in ("rnn", "lstm", "gru"):
        encoder = ("bi-" if model.bidirectional else "uni-") + encoder
    if model.num_layers > 1 and model.encoder != "window":
        encoder += f" x{model.num_layers}"
    if model.char_features != "none":
        encoder += f" +char-{model.char_features}"
    if config.data.vectors:
        encoder += " +vectors" + (" (frozen)" if model.freeze_embeddings else "")
    if config.data.lm_features:
        encoder += " +char-LM features" + (" (fwd+bwd)" if len(config.data.lm_features) == 2 else " (fwd)")
    return f"{encoder}, {'crf' if model.crf else 'softmax'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, choices=list(DATASETS))
    parser.add_argument("--config", required=True, help="a configs/*.yaml file")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--name", help="the row's config name (default: the config file's stem); name a variant "
                                       "when further options change the config")
    parser.add_argument("--output", help="run directory (default: runs/bench/<name>)")
    parser.add_argument("--results", default="tagging_quality", help="results file name under benchmarks/results")
    parser.add_argument("--target", type=float, help="the figure the issue asks for")
    parser.add_argument("--title", default="Tagging quality", help="the Markdown table's title")
    parser.add_argument("--note", default="", help="a remark stored with the records")
    parser.add_argument("seqlab_options", nargs=argparse.REMAINDER,
                        help="further `seqlab train tagger` options after --, e.g. -- --epochs 5")
    args = parser.parse_args()
    name = args.name or Path(args.config).stem
    output = Path(args.output or f"runs/bench/{name}")
    train, dev, test, metric = DATASETS[args.dataset]
    folder = Path(args.data_dir) / args.dataset
    command = ["train", "tagger", "--config", args.config, "--train", str(folder / train), "--dev", str(folder / dev),
               "--test", str(folder / test), "--output", str(output), "--overwrite",
               *[a for a in args.seqlab_options if a != "--"]]
    start = time.time()
    code = seqlab_main(command)
    if code:
        return code
    records = records_of(args.dataset, name, output, time.time() - start, args.target, args.note)
    write_records(args.results, records, args.title, notes=NOTES)
    for r in records:
        print(json.dumps(r))
    return 0


NOTES = ("`accuracy`: UPOS token accuracy in percent; `f1`: conlleval entity F1 in percent. `valid` is the "
         "development file. `target` is the figure the issue asks for.")


def records_of(dataset: str, name: str, output: Path, wall: float | None = None, target: float | None = None,
               note: str = "") -> list[dict]:
    """The records of a trained tagger's run directory: dev and test figures with params, speed and `wall`
    (seconds; default the card's training wall time)."""
    metric = DATASETS[dataset][3]
    if wall is None:
        wall = json.loads((output / "model_card.json").read_text())["model_details"]["wall_time_s"]
    metrics = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]
    tagger = seqlab.load(output)
    periodic = [m for m in metrics if not m.get("final")]
    common = {"task": "tagging", "dataset": dataset, "arch": describe(tagger.config), "config": name,
              "params": tagger.model.num_parameters(),
              "tokens_per_s": statistics.median(r["tokens_per_s"] for r in log), "wall_s": round(wall, 1),
              "device": device_name("cpu" if tagger.config.train.device in ("auto", "cpu") else
                                    tagger.config.train.device),
              "epochs": periodic[-1]["epoch"]}
    if note:
        common["note"] = note
    return [record(**common, split="valid" if m["split"] == "valid" else m["split"], metric=metric,
                   value=m[metric], target=target if m["split"] == "test" else None,
                   **({"by_type": {k: v["f1"] for k, v in m["by_type"].items()}} if "by_type" in m else {}))
            for m in metrics if m.get("final")]


if __name__ == "__main__":
    raise SystemExit(main())
