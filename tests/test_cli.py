"""The command line end to end (train -> evaluate -> generate) and every bad input: exit 2, one line."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import seqlab
from conftest import ARCHS, TEST, TRAIN, VALID
from seqlab.cli.main import main
from seqlab.data.vocab import EOS
from seqlab.training.checkpoint import load_tensors, save_model

TINY = ["--embedding-size", "16", "--batch-size", "4", "--seq-len", "8", "--max-steps", "4", "--eval-every", "2",
        "--no-progress", "--log-every", "1"]


def tiny(arch: str = "lstm") -> list[str]:
    """Small options for `arch`, only those that act on it (the others are refused)."""
    return [*TINY, *(["--hidden-size", "16"] if arch != "transformer" else []),
            *(["--layers", "1"] if arch != "ffn" else []), *(["--heads", "2"] if arch == "transformer" else [])]


def train(tmp_path, *extra, name="run", data=(TRAIN, VALID), arch=None):
    output = tmp_path / name
    arch = arch or (extra[extra.index("--arch") + 1] if "--arch" in extra else "lstm")
    code = main(["train", "lm", "--train", str(data[0]), "--valid", str(data[1]), "--output", str(output),
                 *tiny(arch), *extra])
    return code, output


@pytest.mark.parametrize("arch", ARCHS)
def test_cli_train_evaluate_generate(tmp_path, capsys, arch):
    context = {"transformer": ["--context", "16"], "ffn": ["--context", "3"]}.get(arch, [])
    code, run = train(tmp_path, "--arch", arch, "--tokenizer", "word", "--test", str(TEST), *context, "--tied")
    assert code == 0
    assert main(["evaluate", str(run), str(TEST), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["tokens"] == sum(len(line.split()) + 1 for line in TEST.read_text().splitlines())
    assert figures["unit"] == "word" and figures["perplexity"] > 1
    assert figures["characters"] == len(TEST.read_text())                 # every line ends with its newline
    assert figures["bits_per_char"] == pytest.approx(figures["bits_per_token"] * figures["tokens"]
                                                     / figures["characters"], rel=1e-12)
    assert main(["evaluate", str(run), str(TEST)]) == 0
    text = capsys.readouterr().out
    assert "perplexity:" in text and "nats per word token" in text and "bits per word token" in text
    assert f"bits per char: {figures['bits_per_char']:.4f}" in text
    assert main(["generate", str(run), "--prompt", "First Citizen", "--max-tokens", "5", "--seed", "1",
                 "--no-stop-at-eos"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("First Citizen ") and len(out.split()) == 2 + 5
    assert main(["generate", str(run), "--prompt", "First Citizen", "--beam", "3", "--max-tokens", "5"]) == 0
    out = capsys.readouterr().out
    continuation = out[len("First Citizen"):-1]                              # the CLI ends with a newline
    assert out.startswith("First Citizen") and continuation.strip()
    assert len(continuation.split()) + continuation.count("\n") == 5          # 5 tokens: words and line ends
    assert continuation == seqlab.load(run).generate("First Citizen", beam=3, max_tokens=5)
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["arch"] == arch and config["model"]["tie_weights"] is True


def test_cli_generate_goes_past_line_ends_unless_stop_at_eos(tmp_path, capsys):
    """A word model's </s> is a line break: `seqlab generate` writes it and goes on to --max-tokens (prose
    hard-wrapped into lines does not end after one); --stop-at-eos stops at the first line end."""
    code, run = train(tmp_path, "--tokenizer", "word")
    assert code == 0
    lm = seqlab.load(run)
    with torch.no_grad():
        lm.model.output.decoder.bias[EOS] += 6.0                               # </s> about one token in three
    save_model(run / "model.safetensors", lm.model)
    capsys.readouterr()
    assert main(["generate", str(run), "--prompt", "We are", "--max-tokens", "30", "--seed", "1"]) == 0
    going_on = capsys.readouterr().out[len("We are"):-1]                        # the CLI ends with a newline
    assert going_on.count("\n") >= 3
    assert len(going_on.split()) + going_on.count("\n") == 30                 # 30 tokens: words and line ends
    assert main(["generate", str(run), "--prompt", "We are", "--max-tokens", "30", "--seed", "1",
                 "--stop-at-eos"]) == 0
    assert capsys.readouterr().out[len("We are"):-1] == going_on[:going_on.index("\n")]


@pytest.mark.slow
def test_cli_default_corpus_and_sampling_options(tmp_path, capsys):
    output = tmp_path / "run"
    assert main(["train", "lm", "--output", str(output), "--arch", "gru", *tiny("gru")]) == 0
    assert "Tiny Shakespeare" in capsys.readouterr().err
    assert json.loads((output / "config.json").read_text())["data"]["tokenizer"] == "char"
    for options in (["--greedy"], ["--temperature", "0.5", "--top-k", "5"], ["--top-p", "0.9", "--seed", "2"],
                    ["--beam", "2", "--length-penalty", "0"]):
        assert main(["generate", str(output), "--prompt", "KING", "--max-tokens", "20", *options]) == 0
        out = capsys.readouterr().out
        assert out.startswith("KING") and len(out) >= len("KING") + 20 + 1   # 20 characters (or more: <unk>)
    assert main(["generate", str(output), "--beam", "3", "--top-k", "5"]) == 2
    assert "--beam 3 searches for the most likely continuation" in error_of(capsys)


def test_cli_config_file_and_command_line_override(tmp_path, capsys):
    config = tmp_path / "options.yaml"
    config.write_text("model:\n  arch: rnn\n  hidden_size: 12\ntrain:\n  lr: 1e-3\n  epochs: 3\n")
    code, run = train(tmp_path, "--config", str(config), "--hidden-size", "20", arch="rnn")
    assert code == 0
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["arch"] == "rnn" and saved["model"]["hidden_size"] == 20
    assert saved["train"]["lr"] == 1e-3 and saved["train"]["epochs"] == 3
    toml = tmp_path / "options.toml"
    toml.write_text('arch = "ffn"\ncontext = 4\n')
    code, run = train(tmp_path, "--config", str(toml), name="toml", arch="ffn")
    assert code == 0 and json.loads((run / "config.json").read_text())["model"]["context"] == 4
    code, _ = train(tmp_path, "--config", str(toml), "--heads", "2", name="heads", arch="ffn")
    assert code == 2                                  # an option that does nothing for the arch: refused
    assert "error: --heads applies to --arch transformer only, not ffn" in capsys.readouterr().err
    toml.write_text('arch = "ffn"\ncontext = 4\nnum_heads = 2\n')
    code, _ = train(tmp_path, "--config", str(toml), name="warned", arch="ffn")       # a shared recipe: a warning
    assert code == 0
    assert "warning: config file" in capsys.readouterr().err.split("--heads applies to --arch transformer only")[0]


def test_cli_resume_continues_and_extends(tmp_path):
    code, run = train(tmp_path)
    assert code == 0
    assert main(["train", "lm", "--output", str(run), "--resume", "--max-steps", "6", "--no-progress"]) == 0
    steps = [json.loads(line)["step"] for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


# ---------------------------------------------------------------- bad input: exit 2, one clear line

def error_of(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1] if err else ""


def test_cli_missing_empty_binary_and_non_utf8_training_files(tmp_path, capsys):
    cases = {"missing.txt": None, "empty.txt": b"", "blank.txt": b"  \n\n", "binary.txt": b"abc\n\x00\x01\x02\n",
             "latin1.txt": "one\ntwo\ncaf\xe9\n".encode("latin-1")}
    expected = {"missing.txt": "does not exist", "empty.txt": "is empty", "blank.txt": "is empty",
                "binary.txt": "binary.txt:2", "latin1.txt": "latin1.txt:3"}
    for name, content in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        code, _ = train(tmp_path, data=(path, VALID), name=f"run-{name}")
        message = error_of(capsys)
        assert code == 2, name
        assert message.startswith("seqlab: error: training file") and expected[name] in message, message


def test_cli_validation_file_of_unknown_tokens(tmp_path, capsys):
    alien = tmp_path / "alien.txt"
    alien.write_text("qqqq zzzz xxxx\nwwww vvvv\n")
    code, _ = train(tmp_path, "--tokenizer", "word", data=(TRAIN, alien))
    message = error_of(capsys)
    assert code == 2 and "alien.txt" in message and "unknown to the vocabulary" in message


def test_cli_unknown_arch_and_option_values(tmp_path, capsys):
    for args in (["--arch", "mamba"], ["--tokenizer", "sentencepiece"], ["--optimizer", "lion"], ["--bogus", "1"]):
        with pytest.raises(SystemExit) as exit_info:
            train(tmp_path, *args)
        assert exit_info.value.code == 2
        assert "error:" in capsys.readouterr().err
    code, _ = train(tmp_path, "--activation", "gelu", "--arch", "lstm")
    assert code == 2 and "--activation" in error_of(capsys)
    code, _ = train(tmp_path, "--arch", "gru", "--gru-reset", "before")
    assert code == 2 and "--rnn-impl textbook" in error_of(capsys)
    config = tmp_path / "bad.yaml"
    config.write_text("hiden_size: 3\n")
    code, _ = train(tmp_path, "--config", str(config))
    assert code == 2 and "hiden_size" in error_of(capsys)


def test_cli_prompt_longer_than_the_window(tmp_path, capsys):
    code, run = train(tmp_path, "--arch", "transformer", "--context", "8")
    assert code == 0
    assert main(["generate", str(run), "--prompt", "A very long prompt indeed", "--max-tokens", "3"]) == 2
    assert "longer than the model's context of 8" in error_of(capsys)
    assert main(["generate", str(run), "--prompt", "A very long prompt indeed", "--max-tokens", "3",
                 "--truncate-prompt"]) == 0


def test_cli_unknown_prompt_token_warns(tmp_path, capsys):
    code, run = train(tmp_path, "--tokenizer", "word")
    assert code == 0
    assert main(["generate", str(run), "--prompt", "xylophone", "--max-tokens", "2", "--seed", "0"]) == 0
    assert "seqlab: warning:" in capsys.readouterr().err


def test_cli_not_a_run_directory_and_damaged_checkpoints(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path), str(VALID)]) == 2
    assert "not a seqlab run directory" in error_of(capsys)
    assert main(["evaluate", str(tmp_path / "nowhere"), str(VALID)]) == 2
    assert "not a directory" in error_of(capsys)
    code, run = train(tmp_path)
    assert code == 0
    good = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").write_bytes(good[: len(good) // 2])
    assert main(["evaluate", str(run), str(VALID)]) == 2
    assert "truncated or corrupted" in error_of(capsys)
    damaged = bytearray(good)
    damaged[-10] ^= 0xFF
    (run / "model.safetensors").write_bytes(bytes(damaged))
    assert main(["generate", str(run), "--max-tokens", "2"]) == 2
    assert "corrupted" in error_of(capsys)
    (run / "config.json").write_text("{not json")
    assert main(["evaluate", str(run), str(VALID)]) == 2
    assert "config.json:1" in error_of(capsys)


def test_cli_existing_run_is_never_overwritten_by_accident(tmp_path, capsys):
    code, run = train(tmp_path)
    assert code == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    code, _ = train(tmp_path)
    assert code == 2 and "--resume" in error_of(capsys)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    assert main(["train", "lm", "--output", str(tmp_path / "fresh"), "--resume"]) == 2
    assert "has no checkpoint.safetensors to resume from" in error_of(capsys)
    code, _ = train(tmp_path, "--overwrite")
    assert code == 0


def test_cli_resume_refuses_to_change_the_model(tmp_path, capsys):
    code, run = train(tmp_path)
    assert code == 0
    assert main(["train", "lm", "--output", str(run), "--resume", "--hidden-size", "64"]) == 2
    assert "cannot change" in error_of(capsys)


@pytest.mark.slow
def test_cli_python_dash_m_and_help():
    result = subprocess.run([sys.executable, "-m", "seqlab", "train", "lm", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "--arch {ffn,rnn,lstm,gru,transformer}" in result.stdout
    bad = subprocess.run([sys.executable, "-m", "seqlab", "evaluate"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2


@pytest.mark.slow
def test_cli_kill_during_training_leaves_a_good_checkpoint(tmp_path):
    """SIGKILL a run that checkpoints every step, at several moments: the checkpoint always loads and resumes."""
    run = tmp_path / "run"
    command = [sys.executable, "-m", "seqlab", "train", "lm", "--train", str(TRAIN), "--valid", str(VALID),
               "--output", str(run), "--hidden-size", "64", "--embedding-size", "32", "--batch-size", "4",
               "--seq-len", "16", "--max-steps", "100000", "--epochs", "1000", "--eval-every", "1",
               "--no-progress", "--threads", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for attempt, delay in enumerate((0.4, 0.77, 1.13)):
        process = subprocess.Popen(command + (["--resume"] if attempt else []), env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not (run / "checkpoint.safetensors").exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        tensors, metadata = load_tensors(run / "checkpoint.safetensors")   # raises if damaged
        assert "trainer" in metadata and any(k.startswith("model.") for k in tensors)
        load_tensors(run / "model.safetensors")
    leftovers = [p.name for p in Path(run).iterdir() if p.name.endswith(".tmp")]
    assert main(["train", "lm", "--output", str(run), "--resume", "--max-steps",
                 str(json.loads(load_tensors(run / "checkpoint.safetensors")[1]["trainer"])["step"] + 2),
                 "--no-progress"]) == 0
    assert all(name.startswith(".") for name in leftovers)


def every_parser(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from every_parser(sub)


@pytest.mark.parametrize("argv, says", [
    (["train", "lm", "--epoch", "3"], "seqlab train lm: error: unknown option --epoch; did you mean --epochs? "
                                      "(see seqlab train lm --help)"),
    (["train", "classifier", "--text-colum", "0"], "seqlab train classifier: error: unknown option --text-colum; "
                                                   "did you mean --text-column? (see seqlab train classifier --help)"),
    (["evaluate", "runs/x", "f.txt", "--batchsize", "3"], "seqlab evaluate: error: unknown option --batchsize; did "
                                                          "you mean --batch-size? (see seqlab evaluate --help)"),
    (["tune", "classifier", "--arch", "pooled", "--output", "o", "--trails=3"],
     "seqlab tune classifier: error: unknown option --trails; did you mean --trials? (see seqlab tune classifier "
     "--help)"),
    (["train", "lm", "--zzzz"], "seqlab train lm: error: unknown option --zzzz (see seqlab train lm --help)"),
])
def test_cli_an_unknown_option_names_the_nearest_of_its_subcommand(capsys, argv, says):
    """An unknown option is reported by the subcommand whose options it is not among, with the nearest of
    them (difflib), in one line, exit 2: not `seqlab: error: unrecognized arguments` and `seqlab --help`."""
    from seqlab.cli.main import main

    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err == says + "\n"


def test_no_command_takes_an_abbreviated_option(capsys):
    """argparse would read `--dev b.txt` as `--device b.txt` (a prefix of one option): no parser of any command
    takes abbreviations."""
    from seqlab.cli import serve
    from seqlab.cli.main import build_parser
    parsers = [*every_parser(build_parser()), *every_parser(serve.parser())]
    assert len(parsers) > 20
    assert [p.prog for p in parsers if p.allow_abbrev] == []
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["train", "lm", "--devi", "cpu"])
    assert stopped.value.code == 2 and "unknown option --devi" in capsys.readouterr().err


@pytest.mark.parametrize("family, dest", [("lm", "valid"), ("tagger", "dev"), ("classifier", "dev"),
                                          ("seq2seq", "dev")])
def test_every_family_takes_dev_and_the_lm_keeps_valid(family, dest):
    from seqlab.cli.main import build_parser
    args = build_parser().parse_args(["train", family, "--train", "a.txt", "--dev", "b.txt"])
    assert getattr(args, dest) == "b.txt" and "device" not in vars(args)
    if family == "lm":
        assert build_parser().parse_args(["train", "lm", "--valid", "c.txt"]).valid == "c.txt"
