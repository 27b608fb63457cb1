"""Running an ONNX export (`seqlab.export.onnx`) on onnxruntime: the whole task in numpy, without the run
directory and without PyTorch (text <-> ids through seqlab's own tokenizers and vocabularies, read from the
export's copies of the run's files, its seqlab/ folder, by each family's torch-free `vocab` module). Importing this
module and running an export never imports torch (tests/test_export.py checks it in a fresh process). An export
reads only the files inside its folder (`seqlab.export.manifest.confine`).

    from seqlab.export.runtime import load_export
    tagger = load_export("exports/ner")               # an ExportedTagger
    tagger.tag_sentences([["John", "lives", "in", "Paris", "."]])

`load_export` gives the family's runtime (its `exported` part), which answers as the family's PyTorch API
does (`seqlab.load(run)`), and as `seqlab serve --runtime onnx` serves it:

    ExportedClassifier.classify(texts)                 -> [Prediction]       (as TrainedClassifier.classify)
    ExportedTagger.tag_sentences(sentences)            -> [[(tag, p)]]       argmax, or Viterbi with a CRF
    ExportedLM.generate(prompt, max_tokens)            -> str                greedy (generate_ids: the ids)
    ExportedLM.stream(prompt, **options)               -> text pieces        greedy, sampled or beam search
    ExportedSeq2Seq.translate(texts)                   -> [str]              greedy
    ExportedSeq2Seq.generate(texts, beam, ...)         -> [Output]           greedy, sampled or beam search

Greedy, argmax and Viterbi results equal the PyTorch model's, the scores within float rounding
(tests/test_export.py checks 1e-4); the searches are `seqlab.decoding`'s, on numpy arrays. Batches are
formed as the PyTorch API forms them (`length_batches`, shortest first).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from seqlab.errors import DAMAGED, SeqlabError
from seqlab.export.manifest import read_manifest

if TYPE_CHECKING:
    from seqlab.export.session import Exported

# how the families' readers of a run's files end the message of a damaged one, meant for a run directory
RUN_ADVICE = "retrain into this directory with --overwrite"


def load_export(export_dir: str | Path, threads: int = 0) -> Exported:
    """An export directory as its family's runtime: an `ExportedClassifier`, `ExportedTagger`, `ExportedLM` or
    `ExportedSeq2Seq`. Whatever keeps it from loading (a file missing, damaged, or not a regular file; a graph
    truncated or not ONNX; config.json without what the family reads) is a SeqlabError of one line."""
    from seqlab.registry import FAMILIES

    task = read_manifest(export_dir).get("task")
    if task not in FAMILIES:
        raise SeqlabError(f"{export_dir}/manifest.json names the task {task!r}, which this seqlab cannot run")
    try:
        return FAMILIES[task].part("exported").RUNTIME(export_dir, threads)
    except SeqlabError as error:            # the family's readers advise what a run directory needs
        message = str(error)
        if not message.endswith(RUN_ADVICE):
            raise
        raise SeqlabError(f"{message.removesuffix(RUN_ADVICE)}export the run again") from None
    except DAMAGED as error:                 # a config.json or file that parses but lacks what the family reads
        raise SeqlabError(f"{export_dir} is damaged: its config.json or the run's files (seqlab/) lack what "
                          f"{FAMILIES[task].title} needs ({type(error).__name__}: {error}); export the run "
                          "again") from None


__all__ = ["load_export"]
