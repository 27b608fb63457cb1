"""The parts of a family as types: one `Protocol` per part, declaring every module-level name the shared code
calls on it (its functions with their signatures, its constants), so that mypy checks both sides of the wall:
each family's part modules satisfy their protocol (PEP 544, modules as implementations of protocols: `make
typecheck` assigns every family's every part to its protocol), and the shared callers, which get a typed part
from `Family.part(name)`, call only what the protocol declares. `PARTS` names them; `members` lists what one
declares (`tests/test_contracts.py` checks every family against it at run time too).

Constants are declared as read-only properties (a module's constant satisfies one, whatever its exact type);
functions as methods without their `self`. The parameter names are the families' (a caller may pass them by
keyword). Nothing here is imported at run time but the standard library: the types the signatures name are
imported for the type checker only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import argparse

    from fastapi import FastAPI

    from seqlab.cards.bootstrap import Items
    from seqlab.cards.splits import Split
    from seqlab.compare.pages import Section
    from seqlab.contract import Pipeline
    from seqlab.contract.views import ExplainOptions, View, ViewSpec
    from seqlab.data.examples import ExampleTask
    from seqlab.export.session import Exported
    from seqlab.serve.routes import Routes
    from seqlab.serve.ui import Form


class PipelinePart(Protocol):
    """`pipeline` (PyTorch): the family end to end (`Family.pipeline`)."""

    @property
    def PIPELINE(self) -> Pipeline: ...              # configuration, resolve, train, load, evaluate


class TrainedPart(Protocol):
    """`trained` (PyTorch): the trained model's API, a class (TrainedLM, ...) whose `family` is the Family,
    which `PIPELINE.load` returns; the shared code reaches it only through that, so it declares no name."""


class CliPart(Protocol):
    """`cli`: the family's inference commands and what `seqlab evaluate` prints."""

    def add_commands(self, commands: Any) -> None:
        """Add its commands (`generate`, `tag`, ...) to argparse's subcommands, each parser naming its
        `handler`."""

    def report(self, args: argparse.Namespace, scorer: Callable[[], Any]) -> int:
        """`seqlab evaluate`: score args.file with `scorer()` (the pipeline's evaluate on the loaded model),
        print it; the exit status."""

    @property
    def EVALUATE_OPTIONS(self) -> Sequence[Any]:  # noqa: N802  (a module constant)
        """The `seqlab evaluate` options of its own, each a `seqlab.cli.options.EvaluateOption` (flag, help, its
        default in words, choices): the parser is built from every family's."""


class GraphsPart(Protocol):
    """`graphs` (PyTorch): the family's ONNX graphs and what an export's files and README say of them."""

    def refuse(self, saved: dict[str, Any]) -> None:
        """Refuse (SeqlabError) a run (its saved config.json) whose model cannot be exported."""

    def export(self, trained: Any, out: Path) -> dict[str, Any]:
        """Draw the graphs into `out`: {graph: {"file", "inputs", "outputs"}}."""

    def files(self, trained: Any, out: Path) -> dict[str, str]:
        """Write its plain files (vocabularies, labels, ...) into `out`: {file: what it holds}."""

    def metadata(self, trained: Any) -> dict[str, Any]:
        """The family's entries of the graphs' metadata."""

    def about(self, trained: Any, manifest: dict[str, Any]) -> dict[str, Any]:
        """The family's part of the export's README (`seqlab.export.readme`)."""


class ExportedPart(Protocol):
    """`exported` (numpy): an export's API on onnxruntime."""

    @property
    def RUNTIME(self) -> type[Exported]: ...          # ExportedLM, ...: (export_dir, threads) -> the API


class ServePart(Protocol):
    """`serve`: the family's HTTP endpoints."""

    def add_routes(self, app: FastAPI, routes: Routes) -> None:
        """Add its endpoints (`Family.endpoints`, under /v1) to `app`."""

    def run_batch(self, trained: Any, key: Any, items: list[Any]) -> list[Any]:
        """Answer the concurrent requests batched under `key` (one answer per item)."""

    @property
    def FORMS(self) -> Sequence[Form]:  # noqa: N802  (a module constant)
        """The served page's form of each endpoint it offers there (`seqlab.serve.ui.Form`: fields, the body it
        sends, the view that draws the answer); () for none."""


class CardsPart(Protocol):
    """`cards`: the model card's data, read by the family's own readers."""

    def read_split(self, config: Any, option: str) -> Split | None:
        """The split a data option names (None: not given)."""

    def read_units(self, path: str | Path, fmt: str = ..., **options: Any) -> dict[str, Any]:
        """A file's units, their texts and labels (`seqlab.cards.datasheet.read_units`)."""

    def side_unit(self, config: Any, side: str) -> str:
        """The unit a side's contamination is measured in ("words", "characters")."""

    def training_data(self, config: Any) -> dict[str, Any] | None:
        """The datasheet section when the family says what its data was without files (None: the shared
        datasheet)."""

    def evaluation_file(self, data: Any, option: str) -> tuple[str, dict[str, Any], list[str]] | None:
        """The file a split's intervals are computed on, its read options and the figures (None: none)."""

    def interval_items(self, trained: Any, path: Any, progress: bool | None,
                       read_options: dict[str, Any]) -> tuple[Items, dict[str, Any]] | None:
        """The per-item figures of a file, for the bootstrap intervals (None: the family has none)."""


class ComparePart(Protocol):
    """`compare`: `seqlab compare`'s recipes, its search space for `seqlab tune`, and its report's sections."""

    @property
    def RECIPES(self) -> dict[str, dict[str, Any]]: ...         # {arch: its model options}
    @property
    def TRAIN(self) -> dict[str, Any]: ...                      # the training options every recipe shares
    @property
    def SPACE(self) -> dict[str, Any]: ...                      # {option: its range} that `seqlab tune` searches
    @property
    def ARCH_SPACE(self) -> dict[str, dict[str, Any]]: ...      # {arch: more of them}

    def resize(self, options: dict[str, Any], size: str) -> dict[str, Any]:
        """A recipe's options at --size `size`."""

    def sections(self, spec: dict[str, Any], rows: list[dict[str, Any]], models: dict[str, Any], winner: Any,
                 figures: Path) -> list[Section]:
        """The family's sections of the comparison's report."""


class PreparePart(Protocol):
    """`prepare` (numpy; the families with `prepares`): `seqlab prepare`. Its `for_run`, the one data path of
    its training, is called by its own pipeline only, so it is not declared here."""

    @property
    def SKIP(self) -> tuple[str, ...]: ...             # data options that do not shape the prepared ids

    def prepare(self, data: Any, output: str | Path, workers: int = 0, overwrite: bool = False,
                progress: bool = True) -> Path:
        """Prepare the splits of `data` (the data group) into the folder `output`; that folder."""


class CompletionPart(Protocol):
    """`completion` (PyTorch; the families that `can("generate")`): OpenAI's /v1/completions."""

    def complete(self, trained: Any, prompts: list[str], options: Any, top_logprobs: int = 0) -> list[Any]:
        """Each prompt's continuation, decoded in one batch (a `Completion` each)."""

    def complete_stream(self, trained: Any, prompt: str, options: Any, top_logprobs: int = 0) -> Iterator[Any]:
        """One prompt's continuation as it is generated, a `Completion` per piece."""

    def prompt_logprobs(self, trained: Any, prompt: str) -> tuple[list[str], list[float]]:
        """The prompt's tokens and each one's log probability given the ones before it."""

    def spell(self, trained: Any, tokens: list[str], before: list[str],
              top: list[dict[str, float]] | None = None) -> tuple[list[str], list[int], list[dict[str, float]]]:
        """Tokens as the text a client reads, where each begins, and the top tokens spelt so."""


class FormatPart(Protocol):
    """An export format other than ONNX (a part named after it: each of `Family.exports` but "onnx", e.g. the
    language model's "hf")."""

    def export(self, run_dir: str | Path, output: str | Path, overwrite: bool = False) -> Path:
        """`seqlab export --format NAME`: write the export; its folder."""

    def report(self, run_dir: str | Path, out: Path) -> None:
        """Print what was written and how to load it."""

    def legacy_export_files(self, folder: Path) -> set[str] | None:
        """The files of an export of this format from before its manifest.json (what --overwrite may replace
        with another format's export), or None: `folder` is not one."""


class ExamplesPart(Protocol):
    """`examples` (families that have `examples`; torch-free): the small datasets `seqlab examples` writes."""

    @property
    def EXAMPLES(self) -> Mapping[str, ExampleTask]: ...  # noqa: N802  task name -> its files, sizes and generator


class ExplainPart(Protocol):
    """`explain` (families that `explains`): what `seqlab explore` shows of a trained model, computed on its own
    forward pass (`seqlab.contract.views`). `explain` runs on PyTorch, `explain_exported` on an export's API
    (numpy; the views declared `exported`), `examples` on either."""

    @property
    def VIEWS(self) -> Sequence[ViewSpec]: ...  # noqa: N802  every view the family can show, in the page's order

    def arch(self, model: Any) -> str:
        """The architecture of a trained model or export, as its views' `archs` name it ("lstm", ...)."""

    def explain(self, trained: Any, text: str, specs: Sequence[ViewSpec],
                options: ExplainOptions) -> tuple[list[str], list[View], bool]:
        """The text's tokens as the model read them, each view of `specs` (in that order), and whether the text
        was cut to `seqlab.contract.views.MAX_TOKENS`."""

    def explain_exported(self, exported: Any, text: str, specs: Sequence[ViewSpec],
                         options: ExplainOptions) -> tuple[list[str], list[View], bool]:
        """`explain` on an export (onnxruntime), for the views declared `exported`."""

    def examples(self, model: Any, count: int) -> list[str]:
        """Up to `count` texts to try, from the run's dev set (or test set; [] when it has neither at hand)."""


PARTS: dict[str, type] = {"pipeline": PipelinePart, "trained": TrainedPart, "cli": CliPart, "graphs": GraphsPart,
                          "exported": ExportedPart, "serve": ServePart, "cards": CardsPart, "compare": ComparePart,
                          "prepare": PreparePart, "completion": CompletionPart,
                          "examples": ExamplesPart, "explain": ExplainPart}    # and FormatPart, per format


def members(protocol: type) -> dict[str, str]:
    """The names a part's protocol declares: {name: "function" or "constant"}."""
    found = {}
    for name, value in vars(protocol).items():
        if not name.startswith("_"):
            found[name] = "constant" if isinstance(value, property) else "function"
    return found
