"""`seqlab exercises [TUTORIAL [N]]`: the tutorials' exercises, listed or shown; `--check ANSWER` checks an answer
(exit 0 right, 1 not yet), `--hint [K]` gives a hint, `--solution` the worked solution (`seqlab.exercises`)."""

from __future__ import annotations

import argparse

import seqlab.exercises as book
from seqlab.cli.options import Commands, Number
from seqlab.errors import SeqlabError


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("exercises", help="the tutorials' exercises: list, show, check an answer, a hint, "
                                 "the solution")
    parser.add_argument("tutorial", metavar="TUTORIAL", nargs="?", choices=book.TUTORIALS,
                        help="the tutorial (its page's name, e.g. rnn-lm); without it, every tutorial's exercises")
    parser.add_argument("number", metavar="N", nargs="?", type=Number(int, at_least=1),
                        help="the exercise's number; without it, the tutorial's exercises are listed")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", metavar="ANSWER", help="check this answer: exit 0 when right, 1 when not yet")
    what.add_argument("--hint", metavar="K", nargs="?", const=1, type=Number(int, at_least=1),
                      help="print the K-th hint (default: the first)")
    what.add_argument("--solution", action="store_true", help="print the worked solution")
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    if args.tutorial is None or args.number is None:
        if args.check is not None or args.hint is not None or args.solution:
            raise SeqlabError("--check, --hint and --solution need a TUTORIAL and an exercise number N, e.g. "
                              "seqlab exercises rnn-lm 2 --check 0.37")
        for tutorial in [args.tutorial] if args.tutorial else book.TUTORIALS:
            for exercise in book.exercises(tutorial):
                print(f"{tutorial} {exercise.number}  ({exercise.kind})  {exercise.title}")
        return 0
    exercise = book.get(args.tutorial, args.number)
    if args.check is not None:
        if exercise.parse is None:
            raise SeqlabError(f"the answer to exercise {args.tutorial} {args.number} is Python code: check it in "
                              f"Python, seqlab.exercises.check({args.tutorial!r}, {args.number}, your_function)")
        try:
            answer = exercise.parse(args.check)
        except ValueError:
            raise SeqlabError(f"--check {args.check!r}: not an answer this exercise reads "
                              f"({getattr(exercise.parse, '__name__', 'text')})") from None
        verdict = exercise.check(answer)
        print(verdict)
        return 0 if verdict.correct else 1
    if args.hint is not None:
        print(book.hint(args.tutorial, args.number, args.hint))
        return 0
    if args.solution:
        print(exercise.solution)
        return 0
    print(f"{args.tutorial} {exercise.number}. {exercise.title} ({exercise.kind})\n\n{exercise.prompt}\n\n"
          f"{len(exercise.hints)} hint(s): seqlab exercises {args.tutorial} {exercise.number} --hint; check: "
          f"seqlab exercises {args.tutorial} {exercise.number} --check ANSWER")
    return 0
