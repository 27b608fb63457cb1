"""Train a language model on a standard dataset with a shipped config and record its perplexity.

    python benchmarks/lm_quality.py --dataset ptb --config configs/ptb-lstm-zaremba.yaml --target 114.5

Runs `seqlab train lm` (the command line, exactly as a user would) with the dataset's files from
--data-dir, then records valid and test figures, parameters, training tokens/s (median over the
logging windows) and wall time (with --seeds: one run per seed, the mean recorded beside every
seed's figure and the standard deviation) into benchmarks/results/<results>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import seqlab  # noqa: E402
from common import device_name, record, write_records  # noqa: E402
from seqlab.cli.main import main as seqlab_main  # noqa: E402

FILES = {"ptb": ("ptb/ptb.train.txt", "ptb/ptb.valid.txt", "ptb/ptb.test.txt"),
         "wikitext-2": ("wikitext-2/train.txt", "wikitext-2/valid.txt", "wikitext-2/test.txt")}


def shakespeare_split(data_dir: Path, folder: Path) -> tuple[Path, Path]:
    """nanoGPT's shakespeare_char split: the first 90% of the characters train, the rest validate."""
    text = (data_dir / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    cut = int(0.9 * len(text))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(text[:cut], encoding="utf-8")
    (folder / "valid.txt").write_text(text[cut:], encoding="utf-8")
    return folder / "train.txt", folder / "valid.txt"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, choices=[*FILES, "tinyshakespeare"])
    parser.add_argument("--config", required=True, help="a configs/*.yaml file")
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--output", help="run directory (default: runs/bench/<config name>)")
    parser.add_argument("--results", default="lm_quality", help="results file name under benchmarks/results")
    parser.add_argument("--target", type=float, help="the published figure to compare with")
    parser.add_argument("--metric", default="perplexity", choices=["perplexity", "loss"])
    parser.add_argument("--title", default="Language-model quality", help="the Markdown table's title")
    parser.add_argument("--note", default="", help="a remark stored with the records")
    parser.add_argument("--seeds", type=int, nargs="+",
                        help="train once per seed and record the mean (with every seed's figure and the spread)")
    parser.add_argument("seqlab_options", nargs=argparse.REMAINDER,
                        help="further `seqlab train lm` options after --, e.g. -- --epochs 6")
    args = parser.parse_args()
    data_dir = Path(args.data_dir)
    name = Path(args.config).stem
    output = Path(args.output or f"runs/bench/{name}")
    if args.dataset == "tinyshakespeare":
        train, valid = shakespeare_split(data_dir, Path(tempfile.mkdtemp(prefix="seqlab-shakespeare-")))
        test = None
    else:
        train, valid, test = (data_dir / f for f in FILES[args.dataset])
    extra = [a for a in args.seqlab_options if a != "--"]
    runs = []                                       # one (metrics, log, wall, output) per seed
    for seed in args.seeds or [None]:
        run_output = output if seed is None or len(args.seeds) == 1 else output.with_name(f"{output.name}-seed{seed}")
        command = ["train", "lm", "--config", args.config, "--train", str(train), "--valid", str(valid),
                   "--output", str(run_output), "--overwrite", *extra]
        if seed is not None:
            command += ["--seed", str(seed)]
        if test is not None:
            command += ["--test", str(test)]
        start = time.time()
        code = seqlab_main(command)
        if code:
            return code
        wall = time.time() - start
        metrics = [json.loads(line) for line in (run_output / "metrics.jsonl").read_text().splitlines()]
        log = [json.loads(line) for line in (run_output / "train_log.jsonl").read_text().splitlines()]
        runs.append((metrics, log, wall, run_output))
    metrics, log, wall, output = runs[0]
    lm = seqlab.load(output)
    periodic = [m for m in metrics if not m.get("final")]
    common = {"task": "lm", "dataset": args.dataset, "arch": lm.config.model.arch, "config": name,
              "params": lm.model.num_parameters(),
              "tokens_per_s": statistics.median(r["tokens_per_s"] for run in runs for r in run[1]),
              "wall_s": round(statistics.mean(run[2] for run in runs), 1),
              "device": device_name(lm.config.train.device if lm.config.train.device != "auto" else "cpu"),
              "epochs": round(log[-1]["step"] / max(1, periodic[-1]["step"]) * periodic[-1]["epoch"], 2),
              "unit": lm.unit}
    if args.note:
        common["note"] = args.note
    records = []
    for m in metrics:
        if not m.get("final"):
            continue
        values = [next(r[args.metric] for r in run[0] if r.get("final") and r["split"] == m["split"])
                  for run in runs]
        extra_fields = {}
        if len(runs) > 1:                            # the mean over seeds, every seed's figure beside it
            extra_fields = {"seeds": args.seeds, "values": values,
                            "stdev": statistics.stdev(values), "min": min(values), "max": max(values)}
        records.append(record(**common, split=m["split"], metric=args.metric, value=statistics.mean(values),
                              target=args.target if m["split"] == ("test" if test else "valid") else None,
                              **extra_fields))
    write_records(args.results, records, args.title,
                  notes="Perplexity per token (`</s>` counted once per line, PTB convention); `loss` in nats "
                        "per token. `target` is the published figure the issue names.")
    for r in records:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
