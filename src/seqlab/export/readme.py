"""An ONNX export's README.md (`seqlab.export.onnx` writes it): what the folder holds, each graph's inputs
and outputs with their names, dtypes and shapes (read from the .onnx files, the dynamic axes by name), what
the scores are, how to tokenize text into the graph's ids, and an example in numpy and onnxruntime alone.

The family's part comes from its `graphs.about(trained, manifest)`, a dict:

    summary    one sentence: what the model is
    graphs     {graph: what it computes, in a user's words} (also the graph's doc_string)
    axes       {axis name: what it counts}, for the axes its graphs name
    meanings   {input or output name: what it holds}
    scores     Markdown: what the scores are (logits? over which vocabulary or label set?)
    tokenize   Markdown: text -> the graph's ids (and back)
    example    Python: a complete program, about 20 to 40 lines, that reads this folder's files by name and
               prints what `prints` says; tests/test_export_readme.py runs it against seqlab's runtime
    prints     Markdown: what the example prints

The packages the example needs are those it imports (`needs`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seqlab.fileio import atomic_write_text
from seqlab.version import __version__

if TYPE_CHECKING:
    from seqlab.contract import Family

DTYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
          11: "float64", 16: "bfloat16"}

# the files every export holds besides the family's own
COMMON_FILES = {
    "README.md": "this file",
    "config.json": "the run's configuration, as seqlab trained it (absolute paths reduced to their file names)",
    "manifest.json": "what seqlab's runtime reads: each graph's file, inputs and outputs, every file of the folder, "
                     "the seqlab, torch and opset versions",
    "seqlab/": "the run's own tokenizer, vocabulary and label files (JSON), which seqlab's runtime reads "
               "(`seqlab serve --runtime onnx`, `seqlab.export.runtime.load_export`)",
}


def signature(path: Path) -> tuple[str, list[tuple[str, str, str, str]]]:
    """A graph's doc_string (its first paragraph) and its inputs and outputs: (input or output, name, dtype,
    shape), the shape's axes by name where they are dynamic."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)

    def shape(value: Any) -> str:
        dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
                for d in value.type.tensor_type.shape.dim]
        return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"

    rows = [(kind, v.name, DTYPES.get(v.type.tensor_type.elem_type, "?"), shape(v))
            for kind, values in (("input", model.graph.input), ("output", model.graph.output)) for v in values]
    return model.doc_string.split("\n\n")[0].replace("\n", " "), rows


def needs(example: str) -> list[str]:
    """The packages an example imports, Python's own left out, in the order it imports them."""
    imported = re.findall(r"^(?:import|from) (\w+)", example, re.M)
    return list(dict.fromkeys(name for name in imported if name not in sys.stdlib_module_names))


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def readme(out: Path, family: Family, manifest: dict[str, Any], files: dict[str, str], about: dict[str, Any]) -> str:
    """The README.md of the export in `out` (see the module's docstring)."""
    graphs = {name: signature(out / graph["file"]) for name, graph in manifest["graphs"].items()}
    described = {graph["file"]: f"the {name} graph: {doc}" for (name, (doc, _)), graph in
                 zip(graphs.items(), manifest["graphs"].values(), strict=True)}
    listed = {**described, **files, **COMMON_FILES}
    title = family.title.removeprefix("a ").removeprefix("an ")
    lines = [f"# {title[:1].upper()}{title[1:]}: a seqlab ONNX export", "",
             f"{about['summary']} Exported from the run `{manifest['source_run']}` by seqlab {__version__} "
             "(`seqlab export RUN --format onnx`): the graphs run on onnxruntime with numpy, without seqlab or "
             "PyTorch, as the example below shows; seqlab runs them too (`seqlab serve --runtime onnx DIR`, "
             "`seqlab.export.runtime.load_export(DIR)`).", "", "## Files", "", "| file | what it holds |", "|---|---|",
             *(f"| `{name}` | {cell(what)} |" for name, what in listed.items()), "", "## Graphs", ""]
    used = {axis for _, rows in graphs.values() for *_, shape in rows for axis in shape.strip("(,)").split(", ")}
    axes = [f"{axis} {what}" for axis, what in about["axes"].items() if axis in used]
    lines += [f"The batch and sequence axes are dynamic, named in the shapes: {'; '.join(axes)}. Every graph is "
              "ONNX opset {}; metadata_props in each file name the family, arch, vocabulary sizes and special "
              "ids.".format(manifest["opset"]), ""]
    for name, (doc, rows) in graphs.items():
        lines += [f"### `{manifest['graphs'][name]['file']}`", "", f"{doc[:1].upper()}{doc[1:].rstrip('.')}.", "",
                  "| | name | dtype | shape | what it is |",
                  "|---|---|---|---|---|",
                  *(f"| {kind} | `{value}` | {dtype} | {shape} | {cell(about['meanings'].get(value, ''))} |"
                    for kind, value, dtype, shape in rows), ""]
    packages = needs(about["example"])
    lines += ["## What the scores are", "", about["scores"], "", "## Tokenizing text", "", about["tokenize"], "",
              "## Example", "", f"With {', '.join(packages[:-1])} and {packages[-1]} alone (`pip install "
              f"{' '.join(packages)}`), no seqlab: run it "
              "in this folder, whose files it reads by name.", "", "```python", about["example"].strip("\n"), "```", "",
              about["prints"], ""]
    return "\n".join(lines)


def write_readme(out: Path, family: Family, manifest: dict[str, Any], files: dict[str, str],
                 about: dict[str, Any]) -> None:
    atomic_write_text(out / "README.md", readme(out, family, manifest, files, about))


def commented(code: str, comment: str, column: int = 56) -> str:
    """A line of an example with its comment at `column` (or two spaces after a longer line)."""
    return f"{code:<{column}}# {comment}" if len(code) < column else f"{code}  # {comment}"
