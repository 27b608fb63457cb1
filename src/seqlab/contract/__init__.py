"""The family contract: what a task family (a language model, a tagger, a classifier, a sequence-to-sequence
model) tells the rest of seqlab about itself, so that the shared capabilities (the CLI, serving, exporting,
model cards, comparisons, the trainer) iterate over `seqlab.registry` and never name a family.

A family is one package, `seqlab.families.<name>`. Its `__init__` holds the torch-free part, a `Family`:
names, units, data splits, HTTP endpoints, metrics (declared in `seqlab.metrics`), the `seqlab evaluate`
options that apply, the model card's text and the compare defaults. The rest are modules of the package,
imported only when a capability needs them (`Family.part`), each holding the names the capability calls.
Each part is a `typing.Protocol` of `seqlab.contract.parts`, which declares every one of those names with its
signature (mypy checks each family's modules against it: `make typecheck`), and `Family.part(name)` is typed
with it:

    pipeline   PipelinePart: PIPELINE, a `Pipeline` (configuration, train, load, evaluate)      PyTorch
    trained    TrainedPart: the trained model's API (TrainedLM, ...; its `family` is the Family),
               reached through PIPELINE.load
    cli        CliPart: add_commands(commands): its inference commands (generate, tag, ...), each parser
               naming its `handler`; report(args, scorer): what `seqlab evaluate` prints;
               EVALUATE_OPTIONS: the evaluate options of its own, with their argparse spec
    graphs     GraphsPart: refuse(saved config), export(trained, out) -> {graph: its file, inputs,
               outputs}: the ONNX graphs; files, metadata and about: the export's plain files, the
               graphs' metadata and its README                                                  PyTorch
    exported   ExportedPart: RUNTIME, the export's API on onnxruntime (ExportedLM, ...)          numpy
    serve      ServePart: add_routes(app, routes): its HTTP endpoints (`endpoints`, `openai_endpoints`,
               `openai_refused`); run_batch(trained, key, items) for those that batch concurrent
               requests; FORMS: the web page's form of each endpoint (`seqlab.serve.ui.Form`)
    cards      CardsPart: read_split, read_units, side_unit, training_data (None: the shared
               datasheet), evaluation_file and interval_items: the model card's data
    compare    ComparePart: RECIPES, TRAIN, SPACE, ARCH_SPACE, resize(options, size) and sections(spec,
               rows, models, winner, figures): `seqlab compare`, `seqlab tune` and the report
    prepare    PreparePart (families that `prepares`): SKIP (data options that do not shape the prepared
               ids), prepare(data, output, workers, overwrite, progress) -> the folder: `seqlab prepare`
               (its for_run, the one data path of its training, is its pipeline's own)          numpy
    completion CompletionPart (families that can "generate"): complete, complete_stream,
               prompt_logprobs and spell: OpenAI's /v1/completions                            PyTorch
    examples   ExamplesPart: EXAMPLES, {task: a `seqlab.data.examples.ExampleTask`}, the datasets
               `seqlab examples` writes (where `Family.examples`)                                torch-free
    explain    ExplainPart (families that `explains`): VIEWS, the views `seqlab explore` shows
               (`seqlab.contract.views`), arch(model), explain(trained, text, specs, options),
               explain_exported(...) on an export, examples(model, count): texts to try        PyTorch
    <format>   FormatPart, for each of `exports` but onnx (the language model's "hf": a Hugging Face
               GPT-2 directory): export(run, output, overwrite), report(run, out) and
               legacy_export_files(folder)

`Family.provides()` says which parts a family has. `tests/test_contracts.py` checks that every family
provides every name of every part it has, that no module outside the families imports one (the registry
alone imports their packages), and that the shared modules hold no family's name.

Capabilities that outer modules ask of a trained model, whatever its family, are Protocols of
`seqlab.contract.capabilities`: `Auditable` (what `seqlab.harms`' audits call on a model; a family's trained model
that offers it can be audited) and `Classifies` (a toxicity scorer).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, overload

from seqlab.contract.capabilities import Auditable, Classifies
from seqlab.contract.parts import (
    PARTS,
    CardsPart,
    CliPart,
    ComparePart,
    CompletionPart,
    ExamplesPart,
    ExplainPart,
    ExportedPart,
    FormatPart,
    GraphsPart,
    PipelinePart,
    PreparePart,
    ServePart,
    TrainedPart,
    members,
)
from seqlab.metrics import Metric

__all__ = ["PARTS", "Auditable", "Classifies",
           "CardText", "CardsPart", "CliPart", "ComparePart", "CompletionPart", "ExamplesPart", "ExplainPart",
           "ExportedPart",
           "Family", "FormatPart", "GraphsPart", "Pipeline", "PipelinePart", "PreparePart", "ServePart", "TrainedPart",
           "members"]

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
    metrics: tuple[Metric, ...]         # the figures its evaluations report (`seqlab.metrics`; `metric` among them)
    evaluate_options: tuple[str, ...]   # the options of `seqlab evaluate` that act on its runs
    card: CardText
    arch_option: str = "arch"           # the model option that names its architecture (a tagger's: "encoder")
    exports: tuple[str, ...] = ("onnx",)   # `seqlab export --format` values it supports
    compare_prompt: bool = False        # `seqlab compare` takes --prompt (the samples its report shows)
    package: str = ""                   # seqlab.families.<name>
    prepares: bool = False              # it has a `prepare` part (`seqlab prepare`, training from --data)
    examples: bool = False              # it has an `examples` part (its datasets of `seqlab examples`)
    explains: bool = False              # it has an `explain` part (the views of `seqlab explore`)
    public: dict[str, str] = dataclasses.field(default_factory=dict, hash=False)
    """Its names that `seqlab` offers (`seqlab.TrainedLM`): name -> the module that defines it, relative to
    the family's package when it starts with "." (".trained"); `seqlab.train_<name>` comes with every family."""
    openai_endpoints: tuple[str, ...] = ()  # OpenAI's endpoints under /v1 its serve part adds for its models on
                                            # PyTorch, beside `endpoints` (GET /v1/models lists them)
    openai_refused: tuple[str, ...] = ()    # OpenAI's routes under /v1 its serve part answers with why they are
                                            # not served (these and the above answer errors in OpenAI's shape)

    @overload
    def part(self, module: Literal["pipeline"]) -> PipelinePart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["trained"]) -> TrainedPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["cli"]) -> CliPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["graphs"]) -> GraphsPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["exported"]) -> ExportedPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["serve"]) -> ServePart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["cards"]) -> CardsPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["compare"]) -> ComparePart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["prepare"]) -> PreparePart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["completion"]) -> CompletionPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["examples"]) -> ExamplesPart: ...  # type: ignore[overload-overlap]
    @overload
    def part(self, module: Literal["explain"]) -> ExplainPart: ...  # type: ignore[overload-overlap]

    @overload
    def part(self, module: str) -> FormatPart: ...          # any other name: an export format (`exports`)

    def part(self, module: str) -> Any:
        """One of the family's lazily imported parts (the module's docstring lists them), typed with its protocol
        (`seqlab.contract.parts`)."""
        return importlib.import_module(f"{self.package}.{module}")

    def provides(self) -> dict[str, type]:
        """{part: its protocol} for every part the family has: those of every family, `prepare` when it
        `prepares`, `completion` when it can "generate", `examples` when it has
        `examples`, and a `FormatPart` per export format but onnx."""
        optional = {"prepare": self.prepares, "completion": self.can("generate"), "examples": self.examples,
                    "explain": self.explains}
        return {**{name: protocol for name, protocol in PARTS.items() if optional.get(name, True)},
                **{fmt: FormatPart for fmt in self.exports if fmt != "onnx"}}

    def __post_init__(self) -> None:
        if self.metric not in {m.name for m in self.metrics}:
            raise ValueError(f"the family {self.name!r} ranks by {self.metric!r}, which is not among its metrics")

    @property
    def lower_is_better(self) -> bool:
        """Whether a lower `metric` is better (its declaration in `seqlab.metrics` says)."""
        return next(m for m in self.metrics if m.name == self.metric).lower_is_better

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

    config: type[Any]                  # LMTrainConfig, ...
    groups: dict[str, type[Any]]       # {"data": ..., "model": ..., "train": ...}
    train_defaults: dict[str, Any]     # the trainer's defaults for this family (over the train group's own)
    derived: tuple[str, ...]           # model fields set from the data, not options (vocab_size, ...)
    resolve: Callable[..., Any]        # (config_file, overrides, resume) -> config
    train: Callable[..., Any]          # (config, resume, overwrite, callback) -> final figures
    load: Callable[..., Any]           # (run_dir, device) -> the trained model's API object
    evaluate: Callable[..., Any]       # (trained, path, **options) -> figures of a file
    next_steps: tuple[str, ...] = ()   # commands to try after training ({output}: the run directory)

    @property
    def option_groups(self) -> dict[str, str]:
        """{option: its group} for every option of the family."""
        return {f.name: group for group, cls in self.groups.items() for f in dataclasses.fields(cls)}
