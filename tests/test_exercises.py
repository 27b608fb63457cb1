"""seqlab.exercises: every exercise's check accepts its right answer and refuses its wrong one; the checkers say
why an answer is off without giving it away; `seqlab exercises` lists, shows, checks, hints (exit 0 / 1 / 2)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seqlab import exercises as book
from seqlab.errors import SeqlabError

EVERY = [(t, e.number) for t in book.TUTORIALS for e in book.exercises(t)]


@pytest.mark.parametrize("tutorial, number", EVERY, ids=[f"{t}-{n}" for t, n in EVERY])
def test_exercises_each_check_takes_the_right_answer_and_refuses_the_wrong_one(tutorial, number):
    exercise = book.get(tutorial, number)
    assert exercise.kind in book.KINDS and exercise.hints and exercise.solution.strip() and exercise.prompt.strip()
    right = book.check(tutorial, number, exercise.answer())
    assert right.correct, f"{tutorial} {number}: the right answer is refused: {right}"
    wrong = book.check(tutorial, number, exercise.wrong)
    assert not wrong.correct, f"{tutorial} {number}: the wrong answer {exercise.wrong!r} is taken"
    assert not book.check(tutorial, number, None).correct          # the page's placeholder: "no answer yet"


def test_exercises_numbers_follow_each_other_from_one():
    for tutorial in book.TUTORIALS:
        numbers = [e.number for e in book.exercises(tutorial)]
        assert numbers == list(range(1, len(numbers) + 1)), tutorial


def test_exercises_number_checker_says_high_or_low_and_refuses_what_is_no_number():
    check = book.number(rel=0.01)
    assert check(2.0, 2.01).correct and not check(2.5, 2.0).correct
    assert "too high" in check(2.5, 2.0).message and "too low" in check(1.5, 2.0).message
    assert "2.0" not in check(2.5, 2.0).message.replace("2.5", "")     # the right answer is not given away
    with pytest.raises(SeqlabError, match="a number"):
        check("two", 2.0)
    with pytest.raises(SeqlabError, match="finite"):
        check(float("nan"), 2.0)


def test_exercises_function_checker_runs_the_students_function_against_the_reference():
    import torch

    check = book.function(lambda: [(torch.ones(2, 3),), (torch.arange(6.0).view(2, 3),)])
    assert check(lambda x: torch.tanh(x), torch.tanh).correct
    assert "different numbers" in check(lambda x: torch.sigmoid(x), torch.tanh).message
    assert "raised ZeroDivisionError" in check(lambda x: 1 / 0, torch.tanh).message
    assert "shape" in check(lambda x: x.sum(0), torch.tanh).message


def test_exercises_choice_checker_ignores_case_and_refuses_other_words():
    check = book.choice("higher", "lower")
    assert check(" Higher ", "higher").correct and not check("lower", "higher").correct
    with pytest.raises(SeqlabError, match="answer one of"):
        check("up", "higher")


def test_exercises_unknown_tutorial_or_number_is_one_clear_error():
    with pytest.raises(SeqlabError, match="no tutorial 'rnn' has exercises"):
        book.exercises("rnn")
    with pytest.raises(SeqlabError, match="not 99"):
        book.get(EVERY[0][0], 99) if EVERY else book.get("rnn-lm", 99)


def seqlab(capsys, *args):
    """`seqlab exercises ARGS` in this process (the one real process: the last test)."""
    from seqlab.cli.main import main

    try:
        code = main(["exercises", *args])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.mark.skipif(not EVERY, reason="no exercises yet")
def test_exercises_cli_lists_shows_checks_and_hints(capsys):
    tutorial, number = EVERY[0]
    exercise = book.get(tutorial, number)
    listed = seqlab(capsys)
    assert listed.returncode == 0 and f"{tutorial} {number}" in listed.stdout
    shown = seqlab(capsys, tutorial, str(number))
    assert shown.returncode == 0 and exercise.title in shown.stdout
    assert seqlab(capsys, tutorial, str(number), "--hint").stdout.strip() == exercise.hints[0].strip()
    if exercise.parse is not None:
        right = seqlab(capsys, tutorial, str(number), "--check", str(exercise.answer()))
        assert right.returncode == 0 and right.stdout.startswith("✓ right"), right.stdout + right.stderr
        wrong = seqlab(capsys, tutorial, str(number), "--check", str(exercise.wrong))
        assert wrong.returncode == 1 and wrong.stdout.startswith("✗ not yet")
    bad = seqlab(capsys, tutorial, "99")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().split("\n")) == 1
    assert seqlab(capsys, "--check", "1").returncode == 2
    for number in ("0", "abc", "1.5"):
        refused = seqlab(capsys, tutorial, number)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, number


@pytest.mark.slow
def test_exercises_cli_in_a_real_process_exits_1_on_a_wrong_answer():
    tutorial, number = EVERY[0]
    exercise = book.get(tutorial, number)
    done = subprocess.run([sys.executable, "-m", "seqlab", "exercises", tutorial, str(number), "--check",
                           str(exercise.wrong)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout.startswith("✗ not yet") and not done.stderr


def test_exercises_coverage_answer_is_the_seq2seq_familys_coverage_loss():
    import torch

    from seqlab.exercises import summarisation
    from seqlab.families.seq2seq.task import coverage_losses

    a = torch.tensor(summarisation.COVERAGE_ATTENTION)
    c = torch.cumsum(a, dim=1) - a
    assert summarisation._coverage_loss() == pytest.approx(float(coverage_losses(a, c, torch.ones(1, 3,
                                                                                                  dtype=torch.long))))


def test_exercises_can_counts_are_the_tagger_familys_reading_of_the_pos_example(tmp_path):
    """The stacked-bidirectional page counts the tags of *can* from the CoNLL-U columns itself (a shared module
    imports no family): the same counts as the tagger's reader of the same file."""
    from collections import Counter

    from seqlab import examples
    from seqlab.exercises import stacked_bidirectional
    from seqlab.families.tagger.conll import read_conllu

    train = read_conllu(examples.write("pos", tmp_path, size="tiny")["train"])
    expected = Counter(tag for s in train for word, tag in zip(s.tokens, s.labels, strict=True)
                       if word.lower() == "can")
    assert stacked_bidirectional._can_counts() == expected and sum(expected.values()) > 10


def test_exercises_parameter_counts_are_the_family_models_counts():
    """The exercises build architectures (or a classifier's parts) without a family; their counts are those of the
    families' models the solutions name."""
    from seqlab.exercises import pooled_classifier, rnn_lm, window_lm
    from seqlab.families.classifier.model import Classifier, ClassifierConfig
    from seqlab.families.lm.model import LMConfig, build_lm

    pooled = ClassifierConfig(arch="pooled", vocab_size=5000, embedding_size=100, hidden_size=50, num_labels=3)
    assert pooled_classifier._parameters() == Classifier(pooled).num_parameters() == 505_203
    assert window_lm._parameters() == build_lm(LMConfig(arch="ffn", vocab_size=62, embedding_size=16, hidden_size=64,
                                                        context=4)).num_parameters() == 9_182
    assert rnn_lm._tied_parameters() == build_lm(LMConfig(arch="rnn", vocab_size=10_000, embedding_size=256,
                                                          hidden_size=256, num_layers=1,
                                                          tie_weights=True)).num_parameters() == 2_701_584
