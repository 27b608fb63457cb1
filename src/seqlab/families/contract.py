"""The family contract: what a task family (a language model, a tagger, a classifier, a sequence-to-sequence
model) tells the rest of seqlab about itself, so that the shared capabilities (the CLI, serving, exporting,
model cards, comparisons, the trainer) iterate over `seqlab.registry` and never name a family.

A family is one package, `seqlab.families.<name>`. Its `__init__` holds the torch-free part, a `Family`:
names, units, data splits, HTTP endpoints, metrics, the `seqlab evaluate` options that apply, the model
card's text and the compare defaults. The rest are modules of the package, imported only when a capability
needs them (`Family.part`), each holding the names the capability calls:

    pipeline   PIPELINE: a `Pipeline` (configuration, train, load, evaluate)                  PyTorch
    trained    the trained model's API (TrainedLM, ...; its `family` is the Family)            PyTorch
    cli        add_commands(commands): its inference commands (generate, tag, ...), each parser
               naming its `handler`; report(args, scorer): what `seqlab evaluate` prints
    graphs     refuse(saved config) and export(trained, out) -> {graph: its file, inputs,
               outputs}: the ONNX graphs                                                        PyTorch
    exported   RUNTIME: the export's API on onnxruntime (ExportedLM, ...)                     numpy
    serve      add_routes(app, routes): its HTTP endpoints; run_batch(trained, key, items) for
               those that batch concurrent requests
    cards      read_split(config, option), read_units(path, fmt, ...), side_unit(config, side),
               training_data(config) (None: the shared datasheet), evaluation_file(data, option)
               and interval_items(trained, path, progress, options): the model card's data
    compare    RECIPES, TRAIN, resize(options, size) and sections(spec, rows, models, winner,
               figures): `seqlab compare` and its report
    prepare    SKIP (data options that do not shape the prepared ids), prepare(data, output, workers,
               overwrite, progress) -> the folder: `seqlab prepare`; for_run(...): the one data path of its
               training (the folder given with --data, or its files prepared into a cache)    numpy
    <format>   export(run, output, overwrite) and report(run, out), for each of `exports` but
               onnx (the language model's "hf": a Hugging Face GPT-2 directory)

`tests/test_contracts.py` checks that every family provides every part, and that the shared modules hold no
family's name.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

# options of `seqlab evaluate` that several families take (their families list them in `evaluate_options`)
INPUT_OPTIONS = ("--chunk-size", "--max-input-length", "--long-input", "--long-source")    # reading in chunks
SEARCH_OPTIONS = ("--beam", "--max-length", "--length-penalty", "--sample", "--temperature", "--top-k", "--top-p",
                  "--seed")                                                                   # decoding


@dataclass(frozen=True)
class CardText:
    """What a model card says of every model of the family (Mitchell et al. 2019): its intended and
    out-of-scope uses, and the harms of SLP 9.5 that apply to it."""

    intended: str
    out_of_scope: str
    risks: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """A task family's torch-free part (see the module's docstring for the parts imported when needed)."""

    name: str                           # "lm": in config.json, on the command line, in the API's answers
    title: str                          # "a language model": how messages name it
    summary: str                        # one line for `seqlab train --help`
    unit: str                           # what an item of its data is: "lines", "sentences", "documents", "pairs"
    splits: tuple[tuple[str, str], ...]  # (data option, the split metrics.jsonl names): ("dev", "valid"), ...
    endpoints: tuple[str, ...]          # its HTTP endpoints under /v1, which are also what its API can do
    commands: tuple[str, ...]           # its inference commands (`seqlab tag`, ...)
    metric: str                         # the figure a comparison ranks its runs by (compare.json, the report)
    lower_is_better: bool
    evaluate_options: tuple[str, ...]   # the options of `seqlab evaluate` that act on its runs
    card: CardText
    arch_option: str = "arch"           # the model option that names its architecture (a tagger's: "encoder")
    exports: tuple[str, ...] = ("onnx",)   # `seqlab export --format` values it supports
    compare_prompt: bool = False        # `seqlab compare` takes --prompt (the samples its report shows)
    package: str = ""                   # seqlab.families.<name>
    prepares: bool = False              # it has a `prepare` part (`seqlab prepare`, training from --data)

    def part(self, module: str) -> ModuleType:
        """One of the family's lazily imported parts (the module's docstring lists them)."""
        return importlib.import_module(f"{self.package}.{module}")

    @property
    def pipeline(self) -> Pipeline:
        return self.part("pipeline").PIPELINE

    def can(self, *endpoints: str) -> bool:
        """Whether its models answer every one of `endpoints` (what an audit or a scorer needs of a model)."""
        return all(endpoint in self.endpoints for endpoint in endpoints)


@dataclass(frozen=True)
class Pipeline:
    """A family end to end: its configuration (a dataclass of the groups data, model and train, with the
    trainer's defaults for this family and the model fields the data sets), and the functions the CLI and
    the API call: resolve a config from a file and overrides, train one into a run directory, load a trained
    model, and score a file with it."""

    config: type                       # LMTrainConfig, ...
    groups: dict[str, type]            # {"data": ..., "model": ..., "train": ...}
    train_defaults: dict               # the trainer's defaults for this family (over the train group's own)
    derived: tuple[str, ...]           # model fields set from the data, not options (vocab_size, ...)
    resolve: Callable                  # (config_file, overrides, resume) -> config
    train: Callable                    # (config, resume, overwrite, callback) -> final figures
    load: Callable                     # (run_dir, device) -> the trained model's API object
    evaluate: Callable                 # (trained, path, **options) -> figures of a file
    next_steps: tuple[str, ...] = ()   # commands to try after training ({output}: the run directory)

    @property
    def option_groups(self) -> dict[str, str]:
        """{option: its group} for every option of the family."""
        return {f.name: group for group, cls in self.groups.items() for f in dataclasses.fields(cls)}
