"""`seqlab compare`: every architecture under one budget into ordinary run directories, a killed compare
resumed, options applied where they act, the plan kept, the report built, and the bad inputs refused."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seqlab.cli.main import main
from seqlab.compare.run import archs, compare, parse_budget, recipe, run_state
from seqlab.errors import SeqlabError
from seqlab.registry import FAMILIES

FIXTURES = Path(__file__).parent / "fixtures"
LM_DATA = ["--train", str(FIXTURES / "shakespeare_train.txt"), "--valid", str(FIXTURES / "shakespeare_valid.txt")]
TINY = ["--size", "tiny", "--no-progress", "--batch-size", "4"]


def cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit:                 # the parser's own refusals
        return exit.code


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def lm_compare(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "lm"
    assert main(["compare", "lm", *LM_DATA, "--archs", "ffn", "lstm", "transformer", "--budget-tokens", "600",
                 *TINY, "--seq-len", "10", "--heads", "2", "--output", str(out)]) == 0
    return out


def test_compare_trains_every_architecture_under_one_token_budget(lm_compare):
    plan = json.loads((lm_compare / "compare.json").read_text())
    assert plan["archs"] == ["ffn", "lstm", "transformer"] and plan["budget"] == {"tokens": 600}
    assert plan["options"]["train"] == str((FIXTURES / "shakespeare_train.txt").resolve())
    for arch in plan["archs"]:
        run = lm_compare / "runs" / arch
        config = json.loads((run / "config.json").read_text())
        assert config["model"]["arch"] == arch and config["train"]["max_tokens"] == 600
        card = json.loads((run / "model_card.json").read_text())
        tokens = card["model_details"]["tokens_seen"]
        per_step = tokens / card["model_details"]["steps"]
        assert 600 <= tokens < 600 + per_step                    # stopped at the step that spent the budget
        assert run_state(run) == "finished"
    transformer = json.loads((lm_compare / "runs" / "transformer" / "config.json").read_text())
    assert transformer["model"]["num_heads"] == 2                # --heads acts on the transformer ...
    assert (lm_compare / "report.html").exists() and (lm_compare / "report.md").exists()


@pytest.mark.slow
def test_compare_a_finished_compare_is_kept_and_a_different_plan_is_refused(lm_compare, capsys):
    before = {arch: (lm_compare / "runs" / arch / "model.safetensors").stat().st_mtime_ns
              for arch in ("ffn", "lstm", "transformer")}
    assert main(["compare", "lm", *LM_DATA, "--archs", "ffn", "lstm", "transformer", "--budget-tokens", "600",
                 *TINY, "--seq-len", "10", "--heads", "2", "--output", str(lm_compare)]) == 0
    assert before == {arch: (lm_compare / "runs" / arch / "model.safetensors").stat().st_mtime_ns
                      for arch in before}
    capsys.readouterr()
    assert main(["compare", "lm", *LM_DATA, "--archs", "ffn", "--budget-tokens", "900", *TINY,
                 "--output", str(lm_compare)]) == 2
    err = capsys.readouterr().err
    assert "planned differently" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_compare_a_killed_compare_resumes_where_it_stopped(tmp_path):
    out = tmp_path / "cmp"
    argv = [sys.executable, "-m", "seqlab", "compare", "lm", *LM_DATA, "--archs", "ffn", "lstm",
            "--budget-tokens", "4000", *TINY, "--seq-len", "10", "--eval-every", "5", "--output", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = out / "runs" / "ffn" / "checkpoint.safetensors"
    deadline = time.time() + 60
    while not checkpoint.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert checkpoint.exists() and run_state(out / "runs" / "ffn") == "resumable"
    assert not (out / "runs" / "lstm").exists()
    plan = compare("lm", out, {"train": LM_DATA[1], "valid": LM_DATA[3], "progress": False, "batch_size": 4,
                               "seq_len": 10, "eval_every": 5}, ["ffn", "lstm"], budget_tokens=4000, size="tiny")
    assert plan["budget"] == {"tokens": 4000}
    sessions = json.loads((out / "runs" / "ffn" / "environment.json").read_text())["sessions"]
    assert [s["resume"] for s in sessions] == [True]          # ... the killed run continued, not restarted
    assert run_state(out / "runs" / "lstm") == "finished"


@pytest.mark.slow
def test_compare_other_tasks_and_the_report_command(tmp_path, capsys):
    tsv = str(FIXTURES / "classify" / "sentiment.tsv")
    out = tmp_path / "clf"
    assert main(["compare", "classifier", "--train", tsv, "--dev", tsv, "--archs", "pooled", "gru",
                 "--budget-tokens", "40", *TINY, "--output", str(out)]) == 0
    for arch in ("pooled", "gru"):
        final = [r for r in records(out / "runs" / arch) if r.get("final")]
        assert final and "accuracy" in final[0]
    (out / "report.html").unlink()
    assert main(["compare", "--report", str(out)]) == 0
    assert (out / "report.html").exists()
    src = [str(FIXTURES / "seq2seq" / f"{split}.{side}") for split in ("train", "dev") for side in ("src", "tgt")]
    out = tmp_path / "s2s"
    assert main(["compare", "seq2seq", "--train-src", src[0], "--train-tgt", src[1], "--dev-src", src[2],
                 "--dev-tgt", src[3], "--archs", "gru", "gru-attention", "--budget-tokens", "300", *TINY,
                 "--output", str(out)]) == 0
    config = json.loads((out / "runs" / "gru-attention" / "config.json").read_text())
    assert config["model"]["attention"] == "dot" and config["model"]["bidirectional"]


def test_compare_recipes_and_budgets():
    assert parse_budget("90s") == 90 and parse_budget("5m") == 300 and parse_budget("1.5h") == 5400
    assert parse_budget("42") == 42
    for task in FAMILIES:
        for arch in archs(task):
            assert recipe(task, arch, "medium")["lr"] > 0
    assert recipe("lm", "lstm", "medium")["hidden_size"] == 2 * recipe("lm", "lstm", "small")["hidden_size"]
    with pytest.raises(SeqlabError, match="--budget"):
        parse_budget("5x")


def test_compare_bad_inputs_are_one_line_and_exit_2(tmp_path, capsys):
    out = str(tmp_path / "bad")
    for argv, message in [
        (["compare", "lm", *LM_DATA, "--budget", "5 minutes", "--output", out], "--budget"),
        (["compare", "lm", *LM_DATA, "--budget", "0", "--output", out], "--budget"),
        (["compare", "lm", *LM_DATA, "--budget", "5m", "--budget-tokens", "9", "--output", out], "not allowed"),
        (["compare", "lm", *LM_DATA, "--archs", "lstm", "cnn", "--output", out], "invalid choice"),
        (["compare", "lm", *LM_DATA, "--archs", "lstm", "lstm", "--output", out], "twice"),
        (["compare", "lm", "--train", str(tmp_path / "missing.txt"), "--valid", LM_DATA[3], "--archs", "lstm",
          *TINY, "--output", out], "missing.txt"),
        (["compare", "--report", out, "lm", "--output", out], "without a task"),
        (["compare", "--report", str(tmp_path / "nothing")], "nothing"),
        (["compare"], "needs a task"),
    ]:
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)


VARIANTS = """\
# the tagging table's kind of row: one factor changed at a time
bilstm-crf: {recipe: bilstm, crf: true, hidden-size: 12}
plain-gru: {encoder: gru}
"""


@pytest.mark.slow
def test_compare_variants_beside_recipes_under_an_epoch_budget(tmp_path):
    conllu = str(FIXTURES / "tagging.conllu")
    variants = tmp_path / "variants.yaml"
    variants.write_text(VARIANTS)
    out = tmp_path / "tag"
    argv = ["compare", "tagger", "--train", conllu, "--dev", conllu, "--archs", "window", "--variants",
            str(variants), "--budget-epochs", "2", *TINY, "--dropout", "0.1", "--output", str(out)]
    assert main(argv) == 0
    plan = json.loads((out / "compare.json").read_text())
    assert plan["archs"] == ["window", "bilstm-crf", "plain-gru"] and plan["budget"] == {"epochs": 2}
    assert plan["variants"]["bilstm-crf"] == {"recipe": "bilstm", "crf": True, "hidden_size": 12}
    configs = {name: json.loads((out / "runs" / name / "config.json").read_text()) for name in plan["archs"]}
    crf = configs["bilstm-crf"]
    assert crf["model"]["encoder"] == "lstm" and crf["model"]["bidirectional"] and crf["model"]["crf"]
    assert crf["model"]["hidden_size"] == 12                 # its own option wins over the tiny size's 16 ...
    assert crf["model"]["dropout"] == 0.1                    # ... and the shared option reaches it
    assert crf["train"]["lr"] == recipe("tagger", "bilstm", "tiny")["lr"]
    gru = configs["plain-gru"]                               # no recipe: seqlab train tagger's defaults
    from seqlab.registry import family
    default = family("tagger").pipeline.resolve(None, {"train": conllu, "output": str(tmp_path / "x")}, resume=False)
    assert gru["model"]["encoder"] == "gru" and gru["train"]["lr"] == default.train.lr
    assert gru["model"]["hidden_size"] == default.model.hidden_size and gru["model"]["dropout"] == 0.1
    for name in plan["archs"]:
        config = configs[name]
        assert config["train"]["epochs"] == 2 and not config["train"].get("max_tokens")
        assert not config["train"].get("max_time")
        periodic = [r for r in records(out / "runs" / name) if not r.get("final")]
        assert periodic[-1]["epoch"] == 2                    # two whole passes, each run on its own schedule
    report = (out / "report.md").read_text()
    assert "## Variants" in report and "| bilstm-crf | bilstm | crf=true, hidden_size=12 |" in report
    assert "budget 2 epochs" in report
    variants.write_text(VARIANTS.replace("crf: true", "crf: false"))
    assert cli(argv) == 2                                    # the same DIR with other variants: refused, not mixed


def test_compare_bad_variants_are_one_line_and_exit_2(tmp_path, capsys):
    conllu = str(FIXTURES / "tagging.conllu")
    out = str(tmp_path / "bad")

    def variants(text: str) -> str:
        path = tmp_path / f"v{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(text)
        return str(path)

    for given, message in [
        ([str(tmp_path / "none.yaml")], "does not exist"),
        ([variants("")], "is empty"),
        ([variants("a: {recipe: bilstm\nb: [")], "line"),
        ([variants("- bilstm\n")], "mapping"),
        ([variants("a: {recipe: cnn}\n")], "recipe 'cnn'"),
        ([variants("a: {layers: 2}\n")], "unknown option 'layers'"),
        ([variants("a: {epochs: 3}\n")], "set by seqlab compare"),
        ([variants("a/b: {crf: true}\n")], "variant name"),
        ([variants("a: 3\n")], "as a mapping"),
        ([variants("window: {crf: true}\n"), "--archs", "window"], "twice"),
    ]:
        argv = ["compare", "tagger", "--train", conllu, "--variants", *given, *TINY, "--output", out]
        assert cli(argv) == 2, given
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (given, err)
    for argv, message in [(["--budget-epochs", "0"], "--budget-epochs"),
                          (["--budget-epochs", "2", "--budget-tokens", "9"], "not allowed"),
                          (["--budget-epochs", "2", "--epochs", "3"], "leave --epochs out")]:
        assert cli(["compare", "tagger", "--train", conllu, *argv, *TINY, "--output", out]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.slow
def test_compare_more_architectures_join_a_finished_comparison(lm_compare, tmp_path):
    import shutil

    out = tmp_path / "lm"
    shutil.copytree(lm_compare, out)
    before = (out / "runs" / "lstm" / "model.safetensors").stat().st_mtime_ns
    assert main(["compare", "lm", *LM_DATA, "--archs", "gru", "lstm", "--budget-tokens", "600", *TINY, "--seq-len",
                 "10", "--heads", "2", "--output", str(out)]) == 0
    plan = json.loads((out / "compare.json").read_text())
    assert plan["archs"] == ["ffn", "lstm", "transformer", "gru"] and plan["runs"]["gru"] == "runs/gru"
    assert run_state(out / "runs" / "gru") == "finished"
    assert (out / "runs" / "lstm" / "model.safetensors").stat().st_mtime_ns == before     # kept, not retrained
    report = (out / "report.md").read_text()
    assert all(f"| {arch} |" in report for arch in plan["archs"])
