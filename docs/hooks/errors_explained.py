"""The causes and fixes of seqlab's error messages, for the error reference (reference/errors.md, built by
error_reference.py): each entry covers the messages of `files` (a glob on the path under src/seqlab) that its regular
expression `match` finds (searched in the message as the page shows it, each field as ‹words›), says what the user
was doing (`group`), what happened and why seqlab refuses (`cause`), and what to do next (`fix`). Every message is
covered by exactly one entry and every entry covers at least one (tests/test_docs.py checks).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Entry:
    """The cause and fix of one or more messages that share them."""
    group: str           # what the user was doing: a key of GROUPS
    files: str           # the modules that raise the messages: a glob on the path under src/seqlab
    match: str           # a regular expression searched in each message (fields as ‹words›)
    title: str           # a few words: the entry's heading
    cause: str           # what happened and why seqlab refuses (Markdown)
    fix: str             # what the user does next: the option, the command, the file to change (Markdown)


OPTIONS = "Choosing options and config files"
EXAMPLES = "Writing example data"
READING = "Reading a data file"
WRITING = "Writing results"
PREPARING = "Preparing a corpus"
MODEL = "Choosing a model's architecture"
TRAINING = "Training"
RUNS = "Resuming and run directories"
EVALUATING = "Evaluating"
GENERATING = "Generating and decoding"
LABELLING = "Tagging and classifying"
SERVING = "Serving"
EXPORTING = "Exporting"
COMPARING = "Comparing and tuning"
HARMS = "Auditing harms"
PROCESSES = "Several processes and machines"
CARDS = "Model cards"
EXERCISES = "Checking exercises"
PYTHON = "Calling the library from Python"
EXPLORING = "Looking inside a model (seqlab explore)"

GROUPS = {
    OPTIONS: "Options on the command line, keys of a `--config` file, the family named after `seqlab train`: each "
             "is checked before anything is read or written, against its type, its range and the rest of the "
             "configuration. The option's range is in `seqlab COMMAND --help` and in the "
             "[command reference](cli/index.md).",
    EXAMPLES: "`seqlab examples TASK DIR` writes small example data sets to try a family on.",
    READING: "Every file seqlab reads (training text, CoNLL, TSV/CSV/JSONL documents, pairs, vectors, lexicons, "
             "standard input) is read as UTF-8 and checked line by line; a message names the file and the line.",
    WRITING: "Every file seqlab writes is written whole or not at all (a temporary file renamed into place), so "
             "a refused write leaves what was there before intact.",
    PREPARING: "`seqlab prepare` (and `seqlab train` given files, which prepares them into the run's `prepared/`) "
               "turns text into memory-mapped shards with a manifest; training with `--data DIR` reads that "
               "folder back and verifies it.",
    MODEL: "The architecture options (`--arch`, sizes, heads, attention, output layer, ...) are checked together "
           "when the model is built: an option that does nothing, or a combination no model computes, is refused.",
    TRAINING: "`seqlab train`: the device, the schedule, the batch, the loss staying finite, and the trackers "
              "(`--log`).",
    RUNS: "A run directory (`--output`) holds `config.json`, the weights, the vocabulary and the checkpoint. seqlab "
          "never replaces what it did not write, resumes only the run it was given, and refuses a damaged file "
          "rather than load half of it.",
    EVALUATING: "`seqlab evaluate RUN FILE` scores a trained run on a file.",
    GENERATING: "Generating from a language model, translating or summarising with a sequence-to-sequence model: "
                "the prompt, the search options (`--beam`, `--sample`, `--top-p`, ...) and the model's context.",
    LABELLING: "Tagging sentences and classifying documents with a trained run (`seqlab tag`, `seqlab classify`, "
               "`seqlab.load(...)`).",
    SERVING: "`seqlab serve` runs trained runs (or ONNX exports) behind an HTTP API.",
    EXPORTING: "`seqlab export RUN --format onnx|hf` writes a self-contained export; seqlab's ONNX runtime and "
               "`seqlab serve --runtime onnx` read it back and verify it.",
    COMPARING: "`seqlab compare` trains several architectures under one budget and reports them side by side; "
               "`seqlab tune` searches a run's options with Optuna; the report also draws what the gates and attention "
               "of the models do (`seqlab.compare.inside`).",
    HARMS: "`seqlab audit` measures a trained language model's harms (SLP's harms section): memorised training "
           "text, exposure of planted canaries, bias on CrowS-Pairs, toxicity of continuations.",
    PROCESSES: "Training on several GPUs or machines with `torchrun` (PyTorch DDP), and one run directory written "
               "by one process at a time.",
    CARDS: "`seqlab card RUN` writes a run's model card (`model_card.json`, `MODEL_CARD.md`) with confidence "
           "intervals of its figures.",
    EXERCISES: "`seqlab exercises` (and `seqlab.exercises.check`) checks the answers to the tutorials' exercises.",
    EXPLORING: "`seqlab explore`, the served page's Explore tab, POST /v1/explain and `seqlab.load(run).explain(text)` "
               "compute the views a family declares (next-token probabilities, gates, attention, lattices, beam "
               "trees) on one text; the text, the views and the options are checked first.",
    PYTHON: "Messages a user of the command line never sees: they guard the library's functions and modules "
            "against arguments that do not fit (a shape, a missing input), called from your own Python code.",
}

# a field's words where the rules of error_reference.words name it badly: "expression" or "file:expression"
NAMES = {
    "config.py:problem": "what is wrong with the value",
    "range_text(metadata)": "range",
    "', '.join((n for n, f in FAMILIES.items() if f.prepares))": "families",
    "', '.join((repr(o) for o in options))": "choices",
    "l + 1": "layer",
    "MAGIC.decode()": "signature",
    "next((t for t in tokens if not isinstance(t, str)))": "token",
    "slot.group(0)": "slot",
    "message.removesuffix(RUN_ADVICE)": "what the run's files lack",
    "str(error).splitlines()[0][:300] if str(error) else 'no message'": "what onnxruntime said",
    "data/sniff.py:error": "what the reader found",
    "option.hint(found)": "the format the file reads as",
    "training/distributed.py:problem": "what failed on which rank",
    "link.relative_to(folder.resolve())": "link",
    "link.relative_to(Path(export_dir).resolve())": "link",
    "os.readlink(link)": "target",
    "self.name": "split",
    "self.path": "path",
    "source.path or source.name": "path",
    "str(error).split('; retrain')[0]": "what is damaged",
    "where_": "where",
    "able(needs)": "what it needs",
    "_field_word(fmt)": "tab- or comma-separated",
    "_json_kind(text)": "kind of value",
    "_json_kind(label)": "kind of value",
    "_flag(name, given)": "option",
    "_flag(name, value)": "option given at prepare time",
    "_shown(name, given)": "option",
    "_shown(name, value)": "option given at prepare time",
    "graph_damage(path, error)": "what is wrong with the graph",
    "missing_manifest(export_dir)": "what is there instead",
    "kind(export_dir)": "what it is",
    "kind(path)": "what it is",
    "PLURALS[side]": "sources or targets",
    "vocabulary - blocked": "number of tokens",
    "size - 1": "number of other processes",
    "self.position.step + 1": "step",
    "empty[0] + 1": "number",
    "start + T": "length",
    "manifest.get('family')": "family it was prepared for",
    "what": "which file",
    "config.py:what": "source",
    "owned.py:what": "input",
    "tuning/study.py:what": "what it is",
    "families/seq2seq/trained.py:what": "input",
    "families/seq2seq/pipeline.py:what": "the run resumed or started from",
    "runs/directory.py:what": "the family",
    "data/prepared.py:what": "vocabulary",
    "families/classifier/prepare.py:what": "split",
    "len(stream)": "number of units",
    "len(row)": "number of fields",
    "len(header)": "number of columns",
    "len(found)": "number of exercises",
    "len(line.text)": "number of characters",
    "data/canaries.py:r": "repeats",
    "data/documents.py:c": "column",
}

ENTRIES: list[Entry] = []

ENTRIES += [
    # ------------------------------------------------------------------------------------- options and config files
    Entry(OPTIONS, "config.py", r"^‹option› needs a value", "An option without a value",
          "The option was given with no value (an empty `--x=`, or a key of a config file left empty); every "
          "option has a type and no option means 'nothing' by being empty.",
          "Give the option a value, or leave it out to take its default (shown by `seqlab COMMAND --help`)."),
    Entry(OPTIONS, "config.py", r"^‹option› (must|expects)", "A value of the wrong type or out of range",
          "The value does not have the option's type (a word where a number goes, a number that is not an "
          "integer), is not finite (`nan`, `inf`), lies outside the option's range, or is not one of its choices. "
          "It is refused before anything runs: `--lr inf`, for one, would train to `nan` weights.",
          "Give a value of the type and range the message names; every option's range is in `seqlab COMMAND "
          "--help` and in the [command reference](cli/index.md)."),
    Entry(OPTIONS, "config.py", r"option ‹name› (‹what is wrong|expects)", "A config file value of the wrong type or "
          "out of range",
          "A key of a config file (or of a Python `overrides` mapping) holds a value of the wrong type, a value out "
          "of the option's range, or a list where one value goes.",
          "Correct the value in the file named first in the message; the option's type and range are in the "
          "[config reference](config.md)."),
    Entry(OPTIONS, "config.py|runs/directory.py", r"unknown option", "An unknown option in a config file or overrides",
          "A key of the config file (or of the `overrides` given to a `resolve_*_config` function) is not an option "
          "of this family. A typo in a config file is refused, never ignored.",
          "Correct the key: the message lists the known options (names as in a config file: `hidden_size`, not "
          "`--hidden-size`); every key is in the [config reference](config.md)."),
    Entry(OPTIONS, "config.py", r"^config file ‹path›: (the key|option ‹key› is given twice|option ‹key› belongs|"
          r"unknown group)", "A config file's layout",
          "The config file maps something that is not an option name, names an option twice (once at the top and "
          "once in a group, or in two groups), puts an option under a group it does not belong to, or has a group "
          "seqlab does not know.",
          "Give each option once, at the top level or under its own group (`data`, `model`, `train`, ...); the "
          "message names the right group. The [config reference](config.md) lists every option by group."),
    Entry(OPTIONS, "config.py", r"^config file ‹path›(: task is|(:‹line›)? is not valid|: expected)",
          "A config file that cannot be read",
          "The file is not valid YAML or TOML (the message gives the line and the parser's complaint), has another "
          "extension than `.yaml`, `.yml` or `.toml`, does not hold a mapping of option names to values, or its "
          "`task:` is not a family's name.",
          "Correct the file: a mapping such as `lr: 0.001` or grouped `train: {lr: 0.001}`, and `task:` one of "
          "`lm`, `tagger`, `classifier`, `seq2seq` (or leave `task:` out)."),
    Entry(OPTIONS, "cli/train.py", r"needs the family before|is not a family seqlab trains|is for seqlab train",
          "The family of `seqlab train`",
          "`seqlab train` needs the family (`lm`, `tagger`, `classifier`, `seq2seq`) before its options. It may come "
          "from the config file's `task:` key; here it is missing, unknown, or the config file names another "
          "family than the command line.",
          "Run `seqlab train FAMILY --config FILE ...`, or add `task: FAMILY` to the config file; when they differ, "
          "use the family the config file was written for."),
    Entry(OPTIONS, "cli/train.py|runs/directory.py", r"^--resume continues the run in --output and --overwrite",
          "`--resume` with `--overwrite`",
          "`--resume` continues the run in `--output`, and `--overwrite` deletes it to start again: the two "
          "contradict each other.",
          "Give `--resume` to continue the run, or `--overwrite` to replace it, not both."),
    Entry(OPTIONS, "registry.py", r"^unknown task", "An unknown family",
          "The task (family) named is not one this seqlab knows.",
          "Use one of the families the message lists (seqlab's own: `lm`, `tagger`, `classifier` and `seq2seq`, "
          "and any family registered from outside, reference/adding-a-family.md)."),
    Entry(PYTHON, r"registry\.py|^__init__\.py", r"is a seqlab.contract.Family, not|its name must be a "
          r"Python identifier|"
          r"is registered already|one of seqlab's own families, which cannot be removed|is declared twice \(the",
          "Registering a family",
          "`seqlab.registry.register` adds a family defined outside seqlab (reference/adding-a-family.md): it takes "
          "a `seqlab.contract.Family` whose name is a Python identifier not taken yet and whose `package` names "
          "the module of its parts, and whose public names (`Family.public`, offered as `seqlab.NAME`) no other "
          "family declares; `unregister` removes only a family registered so.",
          "Pass the package's `FAMILY`, give it a name of its own and set `package=__name__` in its `__init__`; "
          "leave seqlab's own families registered."),
    Entry(OPTIONS, "runs/directory.py", r"applies to .* only, not", "An option that does nothing here",
          "The option acts only with another option's value (`--heads` only with `--arch transformer`); with this "
          "configuration it would do nothing, and seqlab refuses an option given on the command line that it would "
          "silently ignore. (From a config file shared by several architectures it is a warning instead.)",
          "Leave the option out, or change the option it depends on to the value the message names."),
    Entry(OPTIONS, "runs/directory.py", r"--fused-output ‹fused output› is for language models",
          "`--fused-output` for a tagger or classifier",
          "`--fused-output` computes the loss of an output layer over a large vocabulary without building all the "
          "logits; a tagger or classifier scores a few labels, so it has nothing to fuse.",
          "Leave `--fused-output` out."),
    Entry(OPTIONS, "api.py|cli/prepare.py", r"seqlab prepare", "What `seqlab prepare` takes",
          "`seqlab prepare` was called without a task (or with `--verify DIR` and a task at once), for a family "
          "that has no prepare step, or with an option that belongs to training, not to preparing.",
          "Run `seqlab prepare TASK --output DIR --train ... ` with a family that prepares, or `seqlab prepare "
          "--verify DIR` alone; give training options to `seqlab train` instead."),
    Entry(OPTIONS, "progress.py", r"give the seconds between progress lines", "`SEQLAB_PROGRESS_EVERY`",
          "The environment variable that sets how often progress lines are written to a log (when the output is "
          "not a terminal) holds something that is not a number of seconds.",
          "Set it to a number such as `30` or `0.5`, or `0` for no progress lines, or unset it."),
    Entry(OPTIONS, "families/lm/config.py", r"--canary-repeats needs --canary|--canary plants|--train needs "
          r"--valid|--valid needs --train", "Language-model data options that go together",
          "A language model's data options depend on each other: `--train` needs `--valid` (held-out text for "
          "perplexity and early stopping) and the other way round, `--canary-repeats` needs a `--canary` template, "
          "and canaries are planted while the text is prepared, so they cannot be added to a prepared `--data` "
          "folder.",
          "Give `--train` and `--valid` together; give `--canary` with `--canary-repeats`; with canaries, train from "
          "`--train`/`--valid` files rather than `--data`."),
    Entry(OPTIONS, "families/lm/config.py", r"--reverse applies to --tokenizer char", "`--reverse` on a word model",
          "`--reverse` trains a right-to-left character LM, the backward half of contextual string embeddings "
          "(`--lm-features`); it exists for `--tokenizer char` only.",
          "Add `--tokenizer char`, or leave `--reverse` out."),
]

ENTRIES += [
    # ---------------------------------------------------------------------------------------- reading a data file
    Entry(READING, r"fileio.py|data/stream.py|data/prepare_text.py|info.py|runs/records.py|data/prepared(_check)?\.py",
          r"^cannot read ",
          "A file that cannot be opened",
          "The operating system refused to open or read the file: it does not exist, it is not readable by you, "
          "or the disk failed. The message gives the system's reason and what to do about it.",
          "Check the path and its permissions (`ls -l PATH`); the advice after the `;` says what fits the reason."),
    Entry(READING, "fileio.py", r"^‹which file› ‹path› (does not exist|is a directory, expected)",
          "A file that is not there",
          "The path given for a file does not exist, or names a directory.",
          "Give the path of the file itself; relative paths are read from the folder you run seqlab in."),
    Entry(READING, "fileio.py|data/stream.py|data/prepare_text.py", r"is not a readable gzip file",
          "A `.gz` file that is not gzip",
          "Files whose names end in `.gz` are read through gzip; this one is not a gzip file, or is truncated.",
          "Decompress it again from its source (`gzip -t FILE` tests it), or rename it if it is plain text."),
    Entry(READING, "fileio.py|data/stream.py|data/prepare_text.py|families/classifier/prepare.py",
          r"^(‹which file› ‹source path›|‹which file› ‹path›|‹place›) is empty$|^‹where› holds no documents",
          "An empty file",
          "The file holds nothing to learn from or to score (no line, or only blank lines).",
          "Give the file that holds the data; check that it was written completely."),
    Entry(READING, "fileio.py", r"holds a NUL byte", "A binary file",
          "The file holds a NUL byte, which no text has: it is likely a binary file (a compressed file without "
          "`.gz`, a model, a spreadsheet) given where text goes.",
          "Give the text file; export a spreadsheet as TSV or CSV, and name gzip files `*.gz`."),
    Entry(READING, "fileio.py|data/vectors.py", r"is not valid UTF-8", "A file that is not UTF-8",
          "seqlab reads every text as UTF-8; the byte at the offset the message gives is not UTF-8 (the file is in "
          "Latin-1, Windows-1252, UTF-16, ...). It is refused rather than read with wrong characters.",
          "Convert it: `iconv -f latin1 -t utf-8 FILE > FILE.utf8` (with the file's real encoding)."),
    Entry(READING, "fileio.py", r"is not valid JSON", "A JSON file that does not parse",
          "A JSON file seqlab reads (a run's or export's file, a request, a record) is not valid JSON at the line "
          "given.",
          "If you edited the file, correct it at that line; if seqlab wrote it, it was damaged: write it again "
          "(retrain, re-export)."),
    Entry(READING, "fileio.py", r"^‹which file› ‹path› is a (file, not a folder|folder: give)",
          "A file where a folder goes, or a folder where a file goes",
          "The path names a file where seqlab writes a folder, or a folder where it writes a file.",
          "Choose another path of the right kind."),
    Entry(READING, "data/stream.py", r"^standard input", "Standard input closed or unreadable",
          "The input was to be read from standard input (`-`), but it is closed (no pipe, a terminal closed) or "
          "cannot be read.",
          "Give a file, or pipe the input in: `cat FILE | seqlab ... -`."),
    Entry(READING, "data/stream.py", r"a ‹fmt› line cannot be cut", "A line too long to read whole",
          "Lines are read up to a limit of characters (set by `--max-input-length`); a longer line of plain text is "
          "cut, but a line of a structured format (a TSV row, a JSON record, a CoNLL token, a tree) cannot be cut "
          "and still be read.",
          "Raise `--max-input-length`, or break the record into shorter ones."),
    Entry(READING, "families/lm/stream.py", r"a BPE model reads lines whole", "A line too long for BPE",
          "A BPE tokenizer reads each line whole, and this line is longer than the most it reads at once.",
          "Break the text into shorter lines (a paragraph or a sentence a line)."),
    Entry(READING, "families/lm/stream.py|data/prepare_text.py|data/readers.py",
          r"tokens are unknown to the vocabulary",
          "A file whose every token is unknown",
          "Every token of the file maps to `<unk>`: it is in another language or another tokenization than the "
          "training file, so a perplexity or score on it would mean nothing.",
          "Give a file in the language and tokenization of the training data (the same `--tokenizer`; lower case if "
          "the training text was)."),
    Entry(READING, "data/sniff.py", r".", "A file in another format than the one given",
          "The reader of the given (or default) `--format` failed on the file's first lines, and another format "
          "reads them cleanly; the message is the reader's, followed by the format the file looks like.",
          "Give the format the message suggests with `--format` (or `--input-format`), or correct the file."),
    # CoNLL
    Entry(READING, "families/tagger/conll.py", r"^--label-column|^--format", "CoNLL columns and formats",
          "The `--label-column` does not name a column of the format (CoNLL-U has ten named columns, 0-9; other "
          "CoNLL files are chosen by index), or the `--format` is not one seqlab reads.",
          "Give a column the message lists (`upos`, `xpos`, ... or an index; `-1` is the last column) and a "
          "format it names."),
    Entry(READING, "families/tagger/conll.py", r"^(line ‹number›|‹place›): "
          r"(10 tab|expected 10|the ID column|token ID|the ‹conllu columns› column)",
          "A CoNLL-U line that does not parse",
          "A CoNLL-U token line has ten tab-separated columns, an ID counting 1, 2, 3 within a sentence (or a range "
          "`1-2`, or an empty node `1.1`), and no empty column (an unknown value is `_`). This line breaks one of "
          "those rules; a sentence cut short by a lost blank line shows as IDs that do not count on.",
          "Correct the line the message names (tabs, not spaces, between columns; a blank line between "
          "sentences)."),
    Entry(READING, "families/tagger/conll.py",
          r"^‹place›: (‹name› ‹index› does not exist|one column only|‹number of fields› columns, but|"
          r"the token is empty)|holds no sentences",
          "A CoNLL line with the wrong columns",
          "In a CoNLL file (a token and its labels a line, whitespace-separated, a blank line between sentences) "
          "every token line has as many columns as the first; this line has a different number, only one column, "
          "an empty token, or the file holds no sentence at all.",
          "Correct the line the message names; check that the file is the one meant (`--format`) and that the "
          "label column exists."),
    # documents: TSV, CSV, JSONL, SST
    Entry(READING, "data/documents.py", r"^--format|^--sst-classes|^--header", "Document format options",
          "`--format`, `--sst-classes` or `--header` has a value the document readers do not take.",
          "Use one of the values the message lists."),
    Entry(READING, "data/documents.py", r"holds no documents|empty line; every line|found only ‹label›",
          "A document file with an empty line or none",
          "A document file holds one document a line; this one is empty, has an empty line, or has a line with a "
          "label and no text.",
          "Remove the empty lines (or give every line its text)."),
    Entry(READING, "data/documents.py", r"^line ‹line›: (‹label› is not a plain label|a tab-separated row)",
          "A label that is not plain",
          "In `label text` files the label is the first word; this one holds a tab, which means the file is "
          "tab-separated (TSV), or is not a plain word.",
          "Read the file with `--format tsv`, or correct the label."),
    Entry(READING, "data/documents.py", r"column|fields \(as in the first row\)|not a CSV row",
          "A TSV/CSV row or column that does not fit",
          "A TSV or CSV file has the same number of fields on every row; the text and label columns are chosen by "
          "index or, with a header row, by name. Here a row has another number of fields (a quote left open, a tab "
          "inside a text), a column does not exist, or a name was given for a file without a header.",
          "Correct the row at the line given, or choose the columns (`--text-column`, `--label-column`) and "
          "`--header` to fit the file; the message names the columns it has."),
    Entry(READING, "data/documents.py", r"the (text|label|target) \(‹names›\) is|feature ‹name› is|"
          r"is not valid JSON|expected a JSON object|no field ‹missing›", "A JSONL record that does not fit",
          "A JSONL file holds one JSON object a line, with the text (and the label, and any numeric feature) in "
          "the fields named by the column options. This line is not JSON, not an object, lacks a field, or holds "
          "a value of the wrong kind (a number where text goes, text where a feature's number goes, `NaN`).",
          "Correct the record at the line given, or name its fields with `--text-column` and `--label-column`."),
    Entry(READING, "data/documents.py", r"not an SST tree", "An SST tree that does not parse",
          "With `--format sst` each line is a Stanford Sentiment Treebank tree, `(3 (2 a) (4 fine) ...)`; this line "
          "is not one (an unbalanced parenthesis, a missing label).",
          "Give the SST files as distributed (`trees/train.txt`, ...), or use another `--format`."),
    # Parquet, JSON text
    Entry(READING, "data/prepare_text.py|families/classifier/encode.py|families/seq2seq/sources.py",
          r"reading Parquet needs pyarrow", "Parquet without pyarrow",
          "Parquet files are read with pyarrow, an optional dependency that is not installed.",
          "`pip install 'seqlab[parquet]'`, or convert the file to JSONL or TSV."),
    Entry(READING, "data/prepare_text.py|families/classifier/encode.py|families/seq2seq/sources.py",
          r"not a readable Parquet file|has no column|holds ‹type›, not text|not a JSON record|no text field|"
          r"holds no documents", "A Parquet or JSON-lines column that is not there",
          "A Parquet or JSONL file is read by column (field): the text, the label or the source and target are "
          "named by options. The file is not readable, lacks the column named, or the column does not hold text.",
          "Name the right columns (`--text-column`, `--label-column`, `--feature-columns`, `--source-field`, "
          "`--target-field`); the message lists the columns the file has."),
    Entry(READING, "data/prepare_text.py", r"^--format ‹fmt›: a text to prepare", "An unknown text format",
          "The `--format` of a text to prepare is not one seqlab reads.",
          "Use one of the formats the message lists."),
    # pairs
    Entry(READING, "families/seq2seq/parallel.py", r"lines but|a file of pairs", "Aligned source and target files",
          "A sequence-to-sequence model learns from aligned pairs: line i of the source file translates line i of "
          "the target file. The two files have different numbers of lines (or the format of a file of pairs is "
          "unknown).",
          "Give files that align line by line (`wc -l SRC TGT`), or a file of pairs in a format the message lists."),
    Entry(READING, "families/seq2seq/sources.py", r"the ‹side› \(‹field›\)", "A pair with an empty side",
          "A record of a file of pairs lacks its source or target, or holds something other than text there.",
          "Correct the record at the line given, or name the fields with `--source-field` and `--target-field`."),
    # vectors and lexicons
    Entry(READING, "data/vectors.py|families/tagger/prepare.py", r"^vectors file(?!.*UTF-8)", "A word-vectors file",
          "`--vectors` reads pretrained embeddings in word2vec or GloVe text format: a word and its numbers a line "
          "(an optional first line `COUNT WIDTH`). The file is missing, empty, or a line has another number of "
          "numbers, a missing word, or something that is not a finite number.",
          "Give the `.txt` vectors (not a binary `.bin`); correct or remove the line the message names."),
    Entry(READING, "families/classifier/features.py", r"^lexicon file", "A lexicon file",
          "A lexicon (for the hand-built features of `--arch features`) holds `word class` a line; this file has a "
          "line with another number of fields, or no word at all.",
          "Correct the file: one word and its class, separated by whitespace, a line."),
]

ENTRIES += [
    Entry(WRITING, "fileio.py", r"^cannot (write|append)", "A file that cannot be written",
          "The operating system refused the write: the disk is full, the folder is not writable, the path names a "
          "folder, or a part of it is a file. The message gives the system's reason; a file that was there is "
          "left as it was.",
          "Act on the advice after the `;` (free space, fix permissions, choose another path), then run again."),
]

DAMAGED_PREPARED = (r"data/prepared.*|families/\w+/prepare\.py|families/tagger/task\.py|families/lm/prepare\.py")

ENTRIES += [
    # ------------------------------------------------------------------------------------------- preparing a corpus
    Entry(PREPARING, DAMAGED_PREPARED, r"(?<!or )prepare (the folder )?again$|is damaged.*prepare again$",
          "A prepared folder that is damaged",
          "A prepared folder is verified when it is read: its `manifest.json` lists every shard with its size, "
          "count and SHA-256, and every id is checked to be in its vocabulary. Something here does not match: a "
          "shard or an index missing, truncated, edited, copied in from another folder, a vocabulary or "
          "tokenizer file damaged, or a manifest that lacks what it should hold.",
          "Prepare the folder again from its sources (`seqlab prepare TASK --output DIR --overwrite ...`); "
          "`seqlab prepare --verify DIR` checks a folder without training."),
    Entry(PREPARING, r"data/prepared_check\.py", r"outside the prepared folder", "A prepared folder that leads "
          "outside itself",
          "A prepared folder is read only from the files inside it; its manifest names a path outside the folder, "
          "or one of its files is a link that leads out. seqlab refuses to read it (it could be made to read any "
          "file of the machine).",
          "Prepare the folder again; copy prepared folders with `cp -r` (not as links to another folder)."),
    Entry(PREPARING, r"data/prepared\.py", r"^‹flag› ‹folder›(: no such folder| is a file| is not a prepared)",
          "`--data` is not a prepared folder",
          "`--data` (or `--verify`) names a folder that does not exist, a file, or a folder without the "
          "`manifest.json` of `seqlab prepare` (a prepare that did not finish, or another folder).",
          "Give the folder `seqlab prepare` wrote (its `--output`), or prepare it: `seqlab prepare TASK --output "
          "DIR --train ... `."),
    Entry(PREPARING, r"data/prepared\.py", r"was prepared in format version|was prepared for ‹",
          "A prepared folder of another version or family",
          "The folder was prepared by another version of seqlab, whose format this one does not read, or for "
          "another family (a language model's folder given to a tagger).",
          "Prepare it again with this seqlab, for the family you train: `seqlab prepare FAMILY ...`."),
    Entry(PREPARING, r"data/prepared\.py", r"^--output ‹output›", "Where `seqlab prepare` writes",
          "`--output` of `seqlab prepare` names a file, a folder that holds other files, or an existing prepared "
          "folder. seqlab replaces only a prepared folder, with `--overwrite`, and never deletes a file it did not "
          "write.",
          "Choose a new folder, add `--overwrite` to replace a prepared one, or move out the files the message "
          "lists."),
    Entry(PREPARING, r"data/prepared\.py", r"cannot write the prepared folder|the disk is full: preparing",
          "The prepared folder cannot be written",
          "Writing the shards failed (the disk is full, the folder is not writable). The partial folder is "
          "removed, so nothing half-written is left to be read later.",
          "Free some space or fix the permissions, or give another `--output`, then prepare again."),
    Entry(PREPARING, r"data/prepared\.py|families/(classifier|seq2seq)/prepare\.py",
          r"is not the file ‹(folder|prepared)› was prepared from", "A data file other than the one prepared",
          "With `--data DIR`, a file option (`--train`, `--dev`, ...) given too must be the file the folder was "
          "prepared from (the manifest records its path and SHA-256); this one is another.",
          "Leave the file option out (the folder holds that split already), or prepare the folder again from the "
          "new file."),
    Entry(PREPARING, r"families/\w+/config\.py|families/classifier/prepare\.py",
          r"was prepared (with|without)", "An option that differs from the prepared data's",
          "A data option (the tokenizer, lower-casing, a maximum length, the vocabulary size, ...) was given with "
          "`--data DIR`, but the folder was prepared with another value; the tokens in the folder already follow "
          "the prepared value.",
          "Leave the option out (the prepared value is used), or prepare the folder again with the new value."),
    Entry(PREPARING, r"families/\w+/prepare\.py", r"^--data ‹(folder|prepared)› (has no ‹name› split|holds no)",
          "A prepared folder without a split training needs",
          "The prepared folder lacks a split (a `--dev` or `--valid` split) or a part (features, LM features) "
          "that this training needs.",
          "Prepare the folder with the files the message names (`--train` and `--dev`, or `--valid` for a "
          "language model), or with the option it names."),
    Entry(PREPARING, r"families/\w+/(prepare|pipeline)\.py|families/seq2seq/sources\.py",
          r"needs --train and --(dev|valid) files|^sequence to sequence needs", "Training data not given",
          "Training needs a training file and a held-out file (the development or validation set, for early "
          "stopping and the reported metric), or a prepared folder holding both.",
          "Give `--train FILE --dev FILE` (`--valid` for a language model; a classifier may hold out part of the "
          "training file with `--dev-fraction`), or `--data DIR` from `seqlab prepare`."),
    Entry(PREPARING, r"families/seq2seq/sources\.py", r"^give --‹split›|go together; only one",
          "Source and target files of a split",
          "A split of a sequence-to-sequence corpus is given either as a file of pairs (`--train FILE`) or as two "
          "aligned files (`--train-src` and `--train-tgt`); here both ways, or only one of the two files, were "
          "given.",
          "Give `--SPLIT-src` and `--SPLIT-tgt` together, or `--SPLIT` alone."),
    Entry(PREPARING, r"families/classifier/prepare\.py", r"--labels|not among --labels|at least two classes",
          "The classes of the training data",
          "A classifier learns the classes of its training file: at least two. With `--labels`, the classes "
          "declared must be exactly those of the training file; here one has no example, or the file holds one "
          "not declared.",
          "Correct the labels in the file or in `--labels`, or add examples of the missing class."),
    Entry(PREPARING, r"families/tagger/prepare\.py", r"--scheme|fits no entity scheme", "Entity tags and `--scheme`",
          "With an entity scheme (BIO, BIOES), every tag is `O` or a prefix `B-`/`I-`/`E-`/`S-` and a type "
          "(`B-PER`); span F1 is computed from them. The file's tags are not entity tags, or one tag fits no "
          "scheme (`I-` with no type).",
          "Correct the tag at the line given; for plain tags (part of speech) pass `--scheme none`."),
    Entry(PREPARING, r"data/prepare_text\.py|families/seq2seq/prepare\.py", r"^--max-vocab ‹max vocab›: a BPE",
          "`--max-vocab` with BPE",
          "A BPE vocabulary is the pieces of its BPE model, so its size is set when the BPE model is learnt; "
          "`--max-vocab` cuts word and character vocabularies only.",
          "Set the size with `--bpe-vocab-size`, and leave `--max-vocab` out."),
    Entry(PREPARING, r"families/seq2seq/prepare\.py", r"--shared-vocab|-lang", "Tokenizers and languages of a "
          "corpus of pairs",
          "`--shared-vocab` gives source and target one vocabulary, so both sides need the same tokenizer (and, "
          "for moses, the same language); `--source-lang`/`--target-lang` are read by the moses tokenizer only and "
          "must be ISO 639 codes.",
          "Give both sides the same `--*-tokenizer` (and language), or drop `--shared-vocab`; give a language as "
          "`en`, `de`, `fr` with `--*-tokenizer moses`."),
    Entry(PREPARING, r"data/tokenizers\.py", r"needs the sacremoses package", "The moses tokenizer not installed",
          "The moses tokenizer (for raw text of a sequence-to-sequence corpus) comes from the optional package "
          "sacremoses.",
          "`pip install sacremoses`, or choose another tokenizer."),
    Entry(PREPARING, r"data/words\.py|data/tokenizers\.py", r"^--tokenizer ‹kind›|^unknown tokenizer ‹kind›:",
          "An unknown tokenizer",
          "The tokenizer named is not one seqlab has (on the command line the choices are checked earlier; this "
          "comes from a config given in Python or a hand-edited file).",
          "Use one of the tokenizers the message lists."),
    Entry(PREPARING, r"families/classifier/(prepare|pipeline)\.py",
          r"--features ‹features› needs|--feature-columns are read|--vectors is for classifiers over words",
          "Feature columns of a classifier",
          "`--arch features` classifies hand-built feature vectors: `--features` chooses them, and numeric "
          "`--feature-columns` are read from the columns of a TSV, CSV, JSONL or Parquet file. Pretrained word "
          "`--vectors` do not apply to it.",
          "Give `--feature-columns` with a tabular file, or choose another `--arch` for words and vectors."),
    Entry(PREPARING, r"families/classifier/pipeline\.py", r"^--arch transformer reads at most", "A prepared "
          "maximum length too long for the transformer",
          "A transformer classifier reads at most as many tokens as its positions; the folder was prepared with a "
          "larger `--max-length` (or none).",
          "Prepare the folder again with `--max-length` at most the limit the message gives."),
]

ENTRIES += [
    # --------------------------------------------------------------------------------- choosing the architecture
    Entry(MODEL, r"families/(classifier|lm|tagger)/model\.py|models/transformer_lm\.py|"
          r"nn/(attention|cross_attention)\.py",
          r"must be a multiple of (--heads|the number of heads)", "A width not divisible by the heads",
          "Multi-head attention splits the model width into `--heads` heads of equal size (SLP 9.4: $d_k = d/h$); "
          "the width is not a multiple of the number of heads.",
          "Choose `--hidden-size` (or `--embedding-size` for a language model) a multiple of `--heads`."),
    Entry(MODEL, r"families/lm/model\.py|models/transformer_lm\.py|nn/attention\.py", r"rotary|rotates pairs",
          "Rotary positions with an odd head size",
          "Rotary position embeddings rotate pairs of dimensions of each head, so the head size (width / heads) "
          "must be even.",
          "Choose `--embedding-size` and `--heads` whose quotient is even, or another `--positions`."),
    Entry(MODEL, r"families/(lm|classifier|seq2seq)/model\.py|"
          r"models/(separator_lm|rnn_seq2seq|transformer_seq2seq|transformer_lm)\.py",
          r"^--(activation|no-bias|gru-reset|tied|pooling|lm-features|attention|‹name›|share-embeddings|arch lm|"
          r"copy|output-layer sigmoid)", "Architecture options that do not go together",
          "The option does nothing, or cannot be computed, with the rest of the architecture: an activation the "
          "architecture does not use, a pooling the classifier does not take, attention options without "
          "attention, `--tied` with an adaptive output layer, shared embeddings without a shared vocabulary, "
          "the book's GRU variant with the fused kernel, a sigmoid output for more than two classes.",
          "Do what the message says: leave the option out, or add the option it needs (`--attention dot`, "
          "`--shared-vocab`, `--rnn-impl textbook`, ...)."),
    Entry(MODEL, r"nn/recurrent\.py", r"the fused GRU kernel", "The book's GRU with the fused kernel",
          "PyTorch's fused GRU applies the reset gate after $U$ ($r \\odot (Uh + b)$); the book's variant "
          "($U(r \\odot h)$, `--gru-reset before`) is computed only by seqlab's textbook cells.",
          "Add `--rnn-impl textbook`, or use `--gru-reset after`."),
    Entry(MODEL, r"nn/adaptive_softmax\.py", r"cutoffs|at least 2 words", "Adaptive softmax cutoffs",
          "`--output-layer adaptive` splits the vocabulary (sorted by frequency) into a head and clusters at "
          "`--cutoffs`: comma-separated, positive, strictly increasing integers, all below the vocabulary size.",
          "Give cutoffs such as `2000,10000` that fit the vocabulary size (seqlab prints it when it builds the "
          "vocabulary), or use `--output-layer softmax` for a small vocabulary."),
    Entry(MODEL, r"nn/(recurrent|transformer|attention|cross_attention|encoders)\.py", r"^unknown ",
          "An unknown building block",
          "A layer was asked for a kind it does not have (a cell, a norm, an activation, an attention score or "
          "implementation, a way to combine directions). The command line checks these choices first; this "
          "comes from a config written by hand or a module built in Python.",
          "Use one of the names the message lists."),
    Entry(MODEL, r"nn/cross_attention\.py", r"dot-product attention needs", "Dot attention over states of other "
          "widths",
          "Dot-product attention scores $h^d_{t} \\cdot h^e_{j}$ (SLP 13.8), so decoder and encoder states need the "
          "same width; a bidirectional or differently sized encoder makes them differ.",
          "Use `--attention bilinear` or `additive` (they learn a matrix between the widths), or give both sides "
          "the same size."),
    Entry(MODEL, r"families/lm/task\.py", r"--fused-output on", "`--fused-output on` with adaptive softmax",
          "`--fused-output` avoids building the full logits of a large vocabulary; an adaptive output layer never "
          "builds them anyway, so forcing it on does nothing.",
          "Leave `--fused-output` out or set it to `auto`."),
    Entry(MODEL, r"families/seq2seq/pipeline\.py", r"--arch lm reads|--share-embeddings needs",
          "A sequence-to-sequence model that needs one vocabulary",
          "`--arch lm` reads source and target as one sequence (SLP 9.4.1: article, separator, summary), and "
          "`--share-embeddings` ties source and target embeddings: both need one vocabulary for both sides.",
          "Add `--shared-vocab`."),
    Entry(MODEL, r"families/(classifier|tagger)/graphs\.py|families/classifier/pipeline\.py",
          r"^--lm-features gives each token|^--ngrams is for|^--features ‹features› is for",
          "Classifier inputs that need another `--arch`",
          "`--lm-features` feeds an encoder (an RNN or a transformer), `--ngrams` a bag of n-grams "
          "(`--arch pooled`), and `--features` the feature classifier (`--arch features`); the `--arch` given "
          "reads none of them.",
          "Choose the `--arch` the message names, or leave the option out."),
    Entry(MODEL, r"families/lm/features\.py", r"^--lm-features", "The language models of `--lm-features`",
          "`--lm-features` (contextual string embeddings, Akbik et al. 2018) takes one or two character language "
          "model runs: a forward LM first, then a backward one trained with `--reverse`. The runs given are not "
          "character LMs, are in the wrong order, or cannot be loaded.",
          "Train them with `seqlab train lm --tokenizer char` (and `--reverse` for the second), and give the "
          "forward run first."),
    Entry(MODEL, r"nn/lm_features\.py", r".", "LM features that do not fit the model",
          "The model was built for LM features of another width than the language models given produce, or a "
          "sentence is longer than a transformer character LM's context.",
          "Give the LM runs the model was trained with; for long sentences use a recurrent character LM (its "
          "context is unbounded)."),
]

ENTRIES += [
    # ------------------------------------------------------------------------------ inputs longer than the model
    Entry(GENERATING, r"models/(transformer_lm|separator_lm|transformer_seq2seq)\.py|nn/attention\.py",
          r"attends over at most|reads at most|holds at most|the KV cache holds",
          "More tokens than a transformer's context",
          "A transformer has a fixed number of learnt positions (its context, `--seq-len` or `--max-positions` at "
          "training); the input (a prompt and what is generated, a source, a target) is longer.",
          "Shorten the input, or generate fewer tokens (`--max-tokens`); with the command line, "
          "`--truncate-prompt` keeps a prompt's end and `--long-source truncate` a source's beginning. A longer "
          "context needs a model trained with more positions."),
    Entry(LABELLING, r"families/(classifier|tagger)/model\.py|nn/encoders\.py|families/tagger/exported\.py",
          r"longer than this transformer|positions are more than", "A sentence or document longer than a "
          "transformer's positions",
          "A transformer tagger or classifier reads at most as many tokens as its learnt positions "
          "(`--max-positions` at training); this input is longer.",
          "Split the sentence, or lower `--max-length` (a classifier then reads a document's beginning); a model "
          "trained with more positions reads longer inputs."),
    # ---------------------------------------------------------------------------------------- library calls
    Entry(PYTHON, r"families/(classifier|tagger|lm)/model\.py|models/(rnn_seq2seq|base)\.py|"
          r"nn/(adaptive_softmax|cross_attention)\.py",
          r"(?<!softmax )needs (at least|its|a vocabulary|each)|need a character|uses (character|LM) features|"
          r"--copy model|^output=|coverage attention takes", "A model built or called without what it needs",
          "A model class was built without its sizes (vocabulary, labels, features, a character vocabulary), or "
          "its `forward` was called without an input it reads (characters, LM features, a document's features, "
          "the copy ids of a `--copy` model, the coverage vector), or with an `output=` it does not give. The "
          "families' pipelines pass all of these; this comes from code calling the model directly.",
          "Build the model through the family's pipeline or `seqlab.load(RUN)`, or pass what the message names "
          "(collate batches with the family's vocabulary)."),
    Entry(PYTHON, r"nn/fused_output\.py", r"^linear_cross_entropy", "`linear_cross_entropy` arguments",
          "The fused output layer and cross-entropy takes flattened hidden states (N, D), a weight (V, D), "
          "targets (N,), an optional bias (V,), a label smoothing in [0, 1] and a chunk size of at least 1; an "
          "argument does not fit.",
          "Flatten `(B, T, D)` to `(B * T, D)` and the targets to `(B * T,)`, and pass the weight of the output "
          "layer (`V` rows)."),
    Entry(PYTHON, r"decoding/search\.py", r"^sample_ids", "`sample_ids` arguments",
          "`sample_ids` draws `n` sampled continuations; it was given beam search options or `n` below 1.",
          "Use `generate_ids` for beam search, and ask `sample_ids` for at least one continuation."),
    Entry(PYTHON, r"data/tokenizers\.py", r"has not been trained", "A BPE tokenizer used before `fit`",
          "A BPE tokenizer learns its merges from the training lines; this one was used to encode before it was "
          "trained.",
          "Call `fit(lines)` on the training lines first, or load a run's trained tokenizer."),
    Entry(PYTHON, r"data/prepared_items\.py", r"does not fit", "An id too large for a prepared column",
          "A prepared column stores ids in the smallest integer type that holds them; an id outside it means the "
          "writer was given ids its vocabulary does not make (a family's prepare code at fault).",
          "If a family of your own writes the column, give it ids of its vocabulary; otherwise report it as a bug."),
    Entry(PYTHON, r"harms/exposure\.py", r"cannot batch a model state", "Exposure over an unknown model state",
          "Exposure scores many candidates at once by batching the model's state after the shared prefix; it knows "
          "tensors and tuples of them, not this state's type.",
          "Give a model whose `step` state is a tensor or a tuple of tensors (every seqlab LM's is)."),
]

ENTRIES += [
    # --------------------------------------------------------------------------------------------------- training
    Entry(TRAINING, r"training/(trainer|config)\.py", r"--min-lr|--time-schedule|--momentum is for|--eval-every",
          "Schedule and optimizer options that contradict each other",
          "The options name a schedule or optimizer that cannot be: a cosine schedule that would decay up (`--min-lr` "
          "above `--lr`), a time-based schedule with no `--max-time`, `--momentum` for Adam (which has its betas), "
          "or two ways of spacing evaluations at once.",
          "Do what the message says: lower `--min-lr`, add `--max-time`, use `--beta1`/`--beta2` with Adam, or "
          "give one of `--eval-every` and `--evaluations`."),
    Entry(TRAINING, r"training/devices\.py", r"^--device|^--precision bf16", "A device or precision this machine "
          "lacks",
          "The `--device` is not a device name, names CUDA on a machine without it, or `--precision bf16` was "
          "asked of a CPU without bfloat16 kernels.",
          "Use `--device auto` (or `cpu`), and `--precision fp32` on such a CPU."),
    Entry(TRAINING, r"training/devices\.py", r"^--resume: the run in ‹run dir› trains in bf16", "A bf16 run resumed "
          "on a CPU without bf16 kernels",
          "`--precision auto` chose bf16 autocast when the run started, on a CPU with bfloat16 kernels; a resumed "
          "run keeps that choice, and this CPU has no such kernels.",
          "Resume on a CPU with AMX-BF16 or AVX512-BF16, or pass `--precision fp32` (the run then goes on in fp32, "
          "no longer identical to an uninterrupted one)."),
    Entry(GENERATING, r"models/compiled_decoding\.py", r"^the compiled decoding step (covers|generates|keeps)",
          "What the compiled decoding step does not cover",
          "`seqlab generate --compile` (`TrainedLM.compile_decoding()`, `TransformerLM.compiled_decoder()`) compiles "
          "the step of a transformer with learned or sinusoidal positions and no QK-norm, for one row on the CPU.",
          "Generate without `--compile` (the eager step gives the same tokens), or on the CPU with one prompt."),
    Entry(GENERATING, r"models/compiled_decoding\.py", r"^could not compile the decoding step",
          "The decoding step did not compile",
          "AOTInductor could not build the step: most often no C++ compiler (`g++`) on the machine, or a PyTorch "
          "build without it.",
          "Install a C++ compiler (`apt-get install g++`), or generate without `--compile`."),
    Entry(GENERATING, r"families/lm/trained\.py", r"^--compile: ", "`--compile` of a run it does not apply to",
          "Only a transformer's decoding step compiles (ahead of time, for the CPU); a recurrent or feedforward LM's "
          "step is already a few fused kernels.",
          "Generate without `--compile`, or with `--device cpu`."),
    Entry(TRAINING, r"training/trainer\.py", r"too small for one step", "Too little training data for one step",
          "One optimizer step reads `--batch-size` items (times `--accumulate`); the training data holds fewer.",
          "Lower `--batch-size` or `--accumulate`, or give more training data."),
    Entry(TRAINING, r"training/trainer\.py", r"diverged|no longer finite", "Training diverged",
          "The loss, the gradient norm or an evaluation metric became `nan` or infinite: the learning rate is too "
          "high for this model, the gradients exploded (an RNN without clipping), or half precision overflowed. "
          "Training stops instead of writing `nan` weights; the best weights so far stay in `model.safetensors`.",
          "Lower `--lr` or clip the gradient (`--grad-clip 1`), or use `--precision fp32`, then `--resume` from the "
          "last checkpoint or start again with `--overwrite`."),
    Entry(TRAINING, r"training/trackers\.py", r".", "Experiment trackers (`--log`)",
          "`--log tensorboard` or `--log mlflow` could not start: its package is not installed, its folder or "
          "store cannot be written, the MLflow experiment was deleted, or the tracker failed on its first writes. "
          "Training does not start without the tracker asked for.",
          "Install the extra the message names (`pip install 'seqlab[mlflow]'`, `'seqlab[tensorboard]'`), give "
          "`--mlflow-uri` a store you can write (`sqlite:///PATH/mlflow.db` or `http://HOST:PORT`), restore or "
          "rename the `--experiment`, or leave `--log` out."),
    # ------------------------------------------------------------------------------ resuming and run directories
    Entry(RUNS, r"runs/files\.py", r"is not a directory|is not a seqlab run directory|holds a ‹task› run",
          "Not a run directory (of this family)",
          "The path given as a run is not a directory, has no `config.json` (it is not a folder `seqlab train` "
          "wrote: an export, a prepared folder, a parent folder), or holds a run of another family than the "
          "command or function expects.",
          "Give the `--output` folder of `seqlab train`; load runs of any family with `seqlab.load(RUN)`."),
    Entry(RUNS, r"runs/files\.py|runs/directory\.py|families/\w+/vocab\.py|data/tokenizers\.py|"
          r"families/lm/features\.py|data/vocab\.py",
          r"config\.json (is damaged|has format)|is damaged \(|the run directory is damaged|lists ‹count› entries|"
          r"has neither vocab|tokenizer\.json|vocabulary (must|lists)",
          "A run directory that is damaged or from a newer seqlab",
          "A file of the run (`config.json`, the vocabulary, labels, tokenizer, LM features, the optimizer state) "
          "cannot be read, does not hold what a run holds, does not match the model in `config.json`, or has a "
          "format version newer than this seqlab reads. seqlab refuses it rather than load half a model.",
          "Upgrade seqlab if the run is from a newer version; otherwise restore the run from a copy, or retrain "
          "into the folder with `--overwrite`."),
    Entry(RUNS, r"training/checkpoint\.py", r"^checkpoint ‹path›|^cannot read checkpoint|its optimizer state",
          "A checkpoint or weights file that cannot be loaded",
          "Weights are loaded only from safetensors files that seqlab wrote, with their checksum; this one is "
          "missing, not a file, a pickle (`.pt`: never unpickled, as it could run any code), truncated, not "
          "seqlab's, corrupted, of a newer format, or of another model than `config.json` describes.",
          "Restore the run directory from a copy or retrain it (`--overwrite`); convert foreign weights to a "
          "seqlab run by training, not by copying files in."),
    Entry(RUNS, r"training/checkpoint\.py", r"^cannot resume from", "A checkpoint of an earlier seqlab",
          "The checkpoint's optimizer state follows the parameter order of an earlier seqlab's model; resuming "
          "would give each parameter another's momentum.",
          "Start the run again with `--overwrite`; its `model.safetensors` still loads for evaluation and use."),
    Entry(RUNS, r"runs/directory\.py", r"^(--overwrite replaces|--output ‹run dir›|cannot use --output)",
          "An `--output` that is not a run",
          "`--output` names a file, a folder seqlab cannot write, or a folder holding files that are not a seqlab "
          "run. A run is written into a folder of its own, and `--overwrite` replaces only a seqlab run: seqlab "
          "never deletes what it did not write.",
          "Choose a new `--output` folder, or move the files the message lists out of it."),
    Entry(RUNS, r"runs/directory\.py", r"already holds a run|holds a run that stopped", "An `--output` that holds a "
          "run already",
          "The folder holds a run; training into it would destroy it, so seqlab asks what you mean.",
          "Pass `--resume` to continue it, `--overwrite` to replace it, or choose another `--output`."),
    Entry(RUNS, r"runs/directory\.py|training/trainer\.py", r"^--resume: (the run in ‹run dir› stopped|‹run dir› has "
          r"no checkpoint)", "Nothing to resume",
          "`--resume` continues from the run's `checkpoint.safetensors`, written at each evaluation; the run "
          "stopped before its first one (or the checkpoint is gone).",
          "Start the run again with `--overwrite` (and evaluate more often with `--eval-every` for long runs)."),
    Entry(RUNS, r"runs/directory\.py", r"^--resume: --‹name› ‹path›", "Training data changed under a run",
          "A run records the SHA-256 of every file it trains on; a file has since been moved or changed, and "
          "resuming on other data would not continue the same run.",
          "Put the original file back, or start again with `--overwrite`."),
    Entry(RUNS, r"runs/directory\.py", r"cannot change", "An option changed on `--resume`",
          "`--resume` continues the run as it was configured; only training options (such as `--epochs`) may "
          "change, and this one changes the data or the model.",
          "Resume without the option (or with its saved value), or start a new run with another `--output`."),
    Entry(RUNS, r"families/\w+/pipeline\.py", r"another vocabulary", "Resuming with other prepared data",
          "The prepared data given has another vocabulary (or tag set) than the run: the run's ids would mean "
          "other tokens.",
          "Resume (or fine-tune) with the `--data` folder the run was trained on."),
    Entry(RUNS, r"runs/directory\.py",
          r"has no model\.safetensors yet \(training has not reached its first evaluation\)$",
          "A run without weights yet",
          "The run has not reached its first evaluation, when `model.safetensors` is first written.",
          "Wait for the first evaluation (or `--resume` the run), then load it."),
    Entry(PROCESSES, r"runs/directory\.py", r"is in use by", "A run directory in use",
          "Another process (its id and host in the message) is writing this run directory; two writers would "
          "corrupt it. The lock is released when that process ends, even if it is killed.",
          "Wait for it to end (or stop it), or choose another `--output`."),
    Entry(PROCESSES, r"training/trainer\.py", r"divisible by the number of processes", "A batch not divisible "
          "among processes",
          "With several processes (`torchrun`), `--batch-size` is the global batch, split evenly among them.",
          "Choose a `--batch-size` that is a multiple of the number of processes."),
    Entry(PROCESSES, r"training/distributed\.py", r".", "A process that could not join or failed",
          "Under `torchrun`, every process must start the same command and meet the others within "
          "`--dist-timeout`; one did not arrive (another endpoint or id, a firewall, a crash before it got this "
          "far), or a process failed and the others end with it. The last checkpoint is intact.",
          "Start the same `torchrun` command on every node (`--rdzv-endpoint`, `--rdzv-id`), read the other "
          "processes' logs for the first failure, fix it, then `--resume`."),
]

ENTRIES += [
    Entry(OPTIONS, r"harms/.*|compare/(run|recipes)\.py|tuning/study\.py|cards/intervals\.py|"
          r"data/limits\.py|families/seq2seq/trained\.py|serve/app\.py|families/tagger/trained\.py",
          r"(: at least \d|must be (at least|in |one of|an integer)|: between|a positive time|: choose (truncate|from|"
          r"torch|text)|: median or none|give an integer >= 0|^unknown (ranking|example size)|^runtime)",
          "A number or a choice out of range",
          "An option of `seqlab audit`, `compare`, `tune`, `card`, `examples` or of reading inputs (or the same "
          "argument of its Python function) is outside its range or not one of its choices; the message gives "
          "the range.",
          "Give a value in the range the message names (`seqlab COMMAND --help` lists them)."),
    # ---------------------------------------------------------------------------------------- example data
    Entry(EXAMPLES, r"examples\.py|cli/examples\.py", r".", "Where example data is written",
          "`seqlab examples TASK DIR` writes a small data set into DIR; the task is unknown, DIR is missing, or DIR "
          "holds the files already (or files seqlab did not write, which it never replaces).",
          "Give a task the message lists and a folder; add `--overwrite` (`overwrite=True`) to replace example "
          "files written before, or choose another folder."),
    # ---------------------------------------------------------------------------------------------- evaluating
    Entry(EVALUATING, r"cli/(evaluate|options)\.py|families/seq2seq/cli\.py", r".", "What `seqlab evaluate` takes",
          "`seqlab evaluate RUN FILE` needs the file to score (for a sequence-to-sequence run: `--src` and `--tgt` "
          "together, or a file of pairs), and takes only the options of the run's family.",
          "Give the file (or `--src FILE --tgt FILE`), and leave out options the message says do not apply."),
    Entry(EVALUATING, r"families/classifier/vocab\.py", r"never occurs in the training data", "A label the "
          "classifier never saw",
          "The file being scored holds a label that is not among the classes the classifier was trained on, so it "
          "could never predict it.",
          "Score a file with the training data's classes (the message lists them), or retrain with that class."),
    Entry(EVALUATING, r"families/seq2seq/pipeline\.py", r"no training pair is within", "No pair within the length "
          "limits",
          "Training pairs longer than the source or target length limits are skipped; here every pair is.",
          "Raise `--max-source-length` and `--max-target-length`, or check that the files are split into "
          "sentences."),
    Entry(TRAINING, r"families/seq2seq/pipeline\.py", r"^--init-from", "`--init-from` a run that does not fit",
          "`--init-from RUN` starts from another sequence-to-sequence run's weights; that folder has none, or its "
          "weights have other shapes than this model's.",
          "Give a trained sequence-to-sequence run and the same architecture options it was trained with."),
    Entry(TRAINING, r"families/seq2seq/text_checks\.py", r".", "Untokenised text with a tokenised recipe",
          "The training text looks raw (punctuation attached to words), but the options read it as tokenised "
          "(`--raw-text refuse`): the vocabulary would be full of `word,` and `word.`.",
          "Train raw text with a raw recipe (`--tokenizer bpe --shared-vocab`), add `--tokenizer moses`, or pass "
          "`--raw-text warn` to train on it as it is."),
    Entry(TRAINING, r"families/classifier/task\.py", r"--class-weights", "`--class-weights`",
          "`--class-weights` is `none`, `balanced`, or `label=weight,...` naming classes of the training data; "
          "this value is none of those.",
          "Give `balanced`, or weights for the classes the message lists."),
    Entry(MODEL, r"registry\.py", r"--rnn-impl", "`--rnn-impl` on a model without RNNs",
          "`--rnn-impl` switches a recurrent model between the fused and the textbook cells; this run's model has "
          "no recurrent layer.",
          "Leave `--rnn-impl` out."),
    Entry(RUNS, r"registry\.py", r"names the task", "A run of an unknown family",
          "The run's `config.json` names a family this seqlab does not have (a newer seqlab, or a family "
          "registered by other code).",
          "Use the seqlab (and the family's package) that wrote the run."),
    Entry(RUNS, r"owned\.py", r".", "An output inside (or around) its own input",
          "An output folder would be the input itself, lie inside it, or hold it: writing there could destroy the "
          "input, or the output could not be written.",
          "Write the output to a folder of its own, beside the input; check the permissions when the message says "
          "it cannot write."),
    # ---------------------------------------------------------------------------------- generating and decoding
    Entry(GENERATING, r"decoding/(core|options)\.py", r"^--beam|^--length-penalty|^sampling draws|^--nbest",
          "Beam search and sampling options together",
          "Beam search looks for the most likely continuation and samples nothing, so sampling options "
          "(`--temperature`, `--top-k`, `--top-p`, `--seed`) do not apply to it; `--length-penalty` and "
          "`--nbest` apply to beam search only, and a beam cannot be wider than the tokens the model can produce.",
          "Use `--beam K` alone, or sampling with `--beam 1`; keep `--nbest` between 1 and `--beam`."),
    Entry(GENERATING, r"decoding/options\.py", r"^the prompt is", "A prompt longer than the model's context",
          "The prompt (with its leading `</s>`) has more tokens than the model's context.",
          "Shorten the prompt, or pass `--truncate-prompt` to keep its end."),
    Entry(GENERATING, r"families/lm/(trained|completion)\.py", r"^(?!--compile: )", "Generating from a language model",
          "A `--reverse` language model reads right to left (it is a feature extractor), so it does not generate; "
          "a prompts file given to `--text-column` is plain text; completion requests give options per prompt.",
          "Generate with a left-to-right model; leave `--text-column` out for plain text; give one option set per "
          "prompt."),
    Entry(GENERATING, r"families/seq2seq/(trained|exported|vocab)\.py", r"is empty; there is nothing to decode|"
          r"longer than the model's|no attention weights", "Sources to decode",
          "A source to translate or summarise is empty, is longer than the model reads (with `--long-source "
          "reject`), or attention weights were asked of a model without attention.",
          "Remove empty lines; pass `--long-source truncate` to keep a long source's beginning; ask for attention "
          "only of an RNN trained with `--attention`, or of a transformer."),
    # ---------------------------------------------------------------------------------- tagging and classifying
    Entry(LABELLING, r"families/classifier/(trained|exported|features)\.py", r"^(?!lexicon|--tokenizer)",
          "Documents to "
          "classify",
          "A text to classify is empty, a column option was given for plain-text input, or a feature classifier "
          "got documents without its feature columns.",
          "Remove empty texts; give `--input-format tsv`, `csv` or `jsonl` with `--text-column`/`--header`; give a "
          "feature classifier input in its training format."),
    Entry(LABELLING, r"families/classifier/explain\.py", r"", "A text to explore in a classifier",
          "`seqlab explore`, POST /v1/explain or `seqlab.load(run).explain(text)` was given a text a classifier reads "
          "as no tokens (the words tokenizer drops HTML tags), or a text for a classifier that also reads numeric "
          "columns of its training file (`--feature-columns`), which a text alone does not have.",
          "Give a text of words; explore a classifier trained without `--feature-columns` (or with `--features "
          "builtin`)."),
    Entry(LABELLING, r"data/limits\.py", r"max-input-length ‹tokens›: ‹model›|the ‹noun› is", "An input longer than "
          "`--max-input-length`",
          "Inputs are limited to `--max-input-length` tokens; with `--long-input reject` a longer one is refused "
          "(and the limit cannot exceed the model's positions).",
          "Pass `--long-input truncate` to keep the part the message names, or raise `--max-input-length` up to "
          "the model's limit."),
]

ENTRIES += [
    # -------------------------------------------------------------------------------------------------- serving
    Entry(SERVING, r"cli/serve\.py|serve/(app|onnx)\.py", r"cannot listen", "A port in use",
          "The server could not listen on the host and port: another server uses the port, or the port needs "
          "privileges (below 1024).",
          "Choose another `--port` (or stop the other server)."),
    Entry(SERVING, r"cli/serve\.py|serve/(app|onnx)\.py", r"^--device|is an ONNX export|is a run directory, not|"
          r"needs at least one", "Runs or exports to serve",
          "`seqlab serve` serves run directories with `--runtime torch` (the default) and ONNX exports with "
          "`--runtime onnx` (on the CPU, so `--device` does not apply); a folder of the other kind, or none, was "
          "given.",
          "Give run directories, or exports with `--runtime onnx` (export a run with `seqlab export RUN --format "
          "onnx --output DIR`)."),
    Entry(SERVING, r"serve/(app|onnx)\.py", r"two (runs|exports) are named", "Two models with one name",
          "The API names each model by its folder's name, and two of the folders given have the same name.",
          "Rename one folder (or copy it under another name)."),
    Entry(SERVING, r"serve/app\.py", r"--cors-origin", "A CORS origin",
          "`--cors-origin` takes an origin as a browser sends it: a scheme and host (and port), no path.",
          "Give e.g. `https://app.example.org` or `http://localhost:3000`, or `*`."),
    # ------------------------------------------------------------------------------------------------- exporting
    Entry(EXPORTING, r"export/folder\.py", r"^--output", "Where an export is written",
          "`--output` of `seqlab export` names a file, a folder holding files, a run directory, or a folder with "
          "files its export did not write. `--overwrite` replaces only an export, and seqlab never deletes what it "
          "did not write.",
          "Choose a new folder, add `--overwrite` to replace an export, or move out the files the message lists."),
    Entry(EXPORTING, r"export/(manifest|runtime)\.py", r"does not exist; expected|not an export directory|is not a "
          r"seqlab export|is an export of format|cannot run$", "Not an ONNX export (of this seqlab)",
          "The folder given as an export does not exist, is not a folder, has no `manifest.json` of `seqlab "
          "export`, is a Hugging Face export (which `transformers` loads), or is of a format or family this "
          "seqlab does not run.",
          "Give the `--output` of `seqlab export RUN --format onnx`; export the run again with this seqlab."),
    Entry(EXPORTING, r"export/(manifest|runtime|session)\.py", r"export the run again$",
          "An export that is damaged or incomplete",
          "An export is verified when it is loaded: `manifest.json` lists its files and graphs, and each graph's "
          "inputs and outputs. A file is missing, damaged or of another kind, the manifest lacks what it should "
          "hold, or a graph does not match it.",
          "Export the run again: `seqlab export RUN --format onnx --output DIR --overwrite`."),
    Entry(EXPORTING, r"export/manifest\.py", r"outside the export folder", "An export that leads outside itself",
          "An export is read only from the files inside its folder; its manifest names a path outside it, or a "
          "file is a link that leads out.",
          "Export the run again; copy exports with `cp -r`, not as links."),
    Entry(EXPORTING, r"export/(onnx|session)\.py", r"needs (the onnx package|onnxruntime)", "ONNX not installed",
          "Exporting to ONNX needs the `onnx` package, and running an export needs `onnxruntime`: optional "
          "dependencies.",
          "`pip install 'seqlab[export]'`."),
    Entry(EXPORTING, r"export/session\.py", r"cannot run this input", "An input the ONNX graph cannot run",
          "onnxruntime refused the input (a shape or a length the exported graph does not take).",
          "Check the input against what the model takes (its length limit); if it runs with `--runtime torch`, "
          "report the export."),
    Entry(EXPORTING, r"export/tokens\.py", r".", "A vocabulary that cannot be written as tokens",
          "An export writes the vocabulary one token a line; a token holds a line break, or a BPE piece has no id "
          "in the run's vocabulary (a damaged run).",
          "Retrain the run (clean the training text of such tokens); then export it."),
    Entry(EXPORTING, r"families/\w+/graphs\.py", r".", "A model that is not exported to ONNX",
          "Some models are not exported to ONNX: those reading `--lm-features` (character LMs run over the input), "
          "`--reverse` language models (feature extractors), and some sequence-to-sequence variants.",
          "Serve the run with `seqlab serve` (the torch runtime) instead."),
    Entry(EXPORTING, r"families/lm/hf\.py", r".", "A run that is not a GPT-2",
          "`--format hf` writes a Hugging Face GPT-2; the run must be a transformer language model whose layers "
          "GPT-2 can hold (biases on its output layer, one LayerNorm epsilon).",
          "Export transformer LMs trained with GPT-2's options, or use `--format onnx`."),
    # -------------------------------------------------------------------------------------------------- cards
    Entry(CARDS, r"cards/card\.py|runs/files\.py", r"model card|no model to describe|--card-notes|"
          r"describes other weights", "A run's model card",
          "A model card describes a run's trained weights: the run has none yet, has no card (or a card of other "
          "weights: it was retrained since), the model was not loaded from a run, or `--card-notes` is empty.",
          "Run `seqlab card RUN` (again) after training; write your notes into the `--card-notes` file or leave "
          "the option out."),
    Entry(CARDS, r"cards/intervals\.py", r"evaluation_intervals|per-item statistics", "Intervals of a figure",
          "Confidence intervals are bootstrapped from the per-item statistics of an evaluation; the object given "
          "is not a loaded model, or the statistics do not give the figure the evaluation reports.",
          "Pass a model from `seqlab.load(RUN)`; if the figures disagree, evaluate again and report it."),
    # ----------------------------------------------------------------------------------------------- exercises
    Entry(EXERCISES, r"exercises/__init__\.py|cli/exercises\.py", r"^(the answer|answer one of|--check ‹check›)",
          "An answer of the wrong kind",
          "The exercise reads its answer as a number (finite), one of a few words, or a Python function; the answer "
          "given is of another kind.",
          "Give the kind the message names; function answers are checked in Python: `seqlab.exercises.check("
          "TUTORIAL, N, your_function)`."),
    Entry(EXERCISES, r"exercises/__init__\.py|cli/exercises\.py",
          r"^(?!the answer).*(tutorial|hints 1 to|need a TUTORIAL)",
          "An exercise that does not exist",
          "The tutorial has no exercises, or not that number, or the exercise has fewer hints.",
          "List them with `seqlab exercises` and `seqlab exercises TUTORIAL`."),
]

ENTRIES += [
    # -------------------------------------------------------------------------------------- comparing and tuning
    Entry(COMPARING, r"cli/(compare|tune)\.py|tuning/study\.py", r"needs a task|--report DIR rebuilds|needs --arch",
          "What `seqlab compare` and `seqlab tune` take",
          "`seqlab compare` needs a task (or `--report DIR` alone, to rebuild a report); `seqlab tune` needs a "
          "task and, for it, the `--arch` whose recipe it tunes.",
          "Run `seqlab compare TASK ...`, `seqlab compare --report DIR`, or `seqlab tune TASK --arch ARCH ...`."),
    Entry(COMPARING, r"compare/(recipes|run)\.py|tuning/study\.py",
          r"^(?!‹source›)(unknown option|.*(is set by seqlab|is not an "
          r"architecture seqlab compares|name an architecture twice|--tune-trials tunes|set the tuning))",
          "Options `seqlab compare` sets or does not know",
          "`seqlab compare` sets some options itself for every model alike (the budget, the epochs, the output), "
          "compares only its recipes' architectures, and takes each task's options; the option or architecture "
          "given is one of those it sets, or one it does not know, or is named twice.",
          "Leave out the options the message names, choose `--archs` from the list it gives, and give tuning "
          "options together with `--tune-trials N`."),
    Entry(COMPARING, r"compare/run\.py|tuning/study\.py", r"give one of --(tune-)?budget|sets every (model|trial)'s "
          r"epochs|give a time such as", "The budget of a comparison or a study",
          "Every model of a comparison (every trial of a study) gets one budget: a time (`--budget`), a number of "
          "tokens (`--budget-tokens`) or of epochs (`--budget-epochs`), exactly one; the budget in epochs sets "
          "`--epochs`, and a time is written as `90s`, `5m` or `1.5h`.",
          "Give exactly one budget option, and leave `--epochs` out."),
    Entry(COMPARING, r"tuning/study\.py", r"plan names no task", "A study whose plan names no task",
          "A study's folder keeps its plan (the task, the architecture, the options) in `study.db` from the first "
          "trial on; this one has no task in it, so it was damaged or written by hand.",
          "Start the study again in a new folder, or with `--overwrite`."),
    Entry(COMPARING, r"compare/run\.py", r"^‹source›: (give a mapping|variant)", "Variants of a comparison",
          "`--variants` (a YAML mapping, inline or a file) maps a variant's name (letters, digits, `.`, `_`, `-`; "
          "it names a run directory) to its options: a `recipe` among the task's architectures, and options as in "
          "a config file, other than the budget the comparison sets.",
          "Write e.g. `bilstm-crf: {recipe: bilstm, crf: true}`; option names are a config file's (`num_layers`, "
          "not `--layers`)."),
    Entry(COMPARING, r"compare/run\.py|tuning/space\.py", r"not valid YAML", "A YAML option that does not parse",
          "`--variants` or `--space`, inline or in a file, is not valid YAML (the message gives the parser's "
          "complaint and where).",
          "Correct the YAML; quote an inline value on the command line: `--space 'lr: {low: 1e-4, high: 1e-2}'`."),
    Entry(COMPARING, r"compare/run\.py|tuning/study\.py", r"planned differently|holds a study of", "An output "
          "planned differently",
          "The `--output` holds a comparison or study planned with other options (or another task); resuming it "
          "with these would mix two plans.",
          "Give the same options to resume it, or choose another `--output`."),
    Entry(COMPARING, r"compare/report\.py|compare/seeds\.py", r".", "Not a comparison (or tuning) folder",
          "The folder given to `seqlab compare --report` is missing, a file, or has no `compare.json` (or it is "
          "damaged: no task, no architectures); a tuning summary read by compare lacks its trials.",
          "Give the `--output` folder of `seqlab compare` (or the summary `seqlab tune` wrote)."),
    Entry(COMPARING, r"tuning/space\.py", r"^(?!.*not valid YAML)", "A search space (`--space`)",
          "A search space maps option names (as in a config file) to a range `{low: A, high: B, log: true}` or a "
          "list of values, optionally under an architecture's name. An entry here is not a range or a list, has an "
          "empty or reversed range, a log range reaching 0, a value listed twice, an option the task does not have "
          "or the budget sets, or one that does nothing for that architecture.",
          "Correct the entry the message names, e.g. `lr: {low: 1.0e-4, high: 1.0e-2, log: true}` or "
          "`arch: [lstm, gru]`."),
    Entry(COMPARING, r"tuning/study\.py", r"needs Optuna", "Optuna not installed",
          "`seqlab tune` runs its study with Optuna, an optional dependency.",
          "`pip install 'seqlab[tune]'`."),
    Entry(COMPARING, r"tuning/study\.py",
          r"nothing left to search|is ‹what it is›; give seqlab tune|no trial|no complete trial|reported no finite|"
          r"failed, so the data", "A study with nothing to search or no result",
          "Every option of the space is fixed by options you gave, `--output` is not a folder of its own, or no "
          "trial completed (the first trial failed, which means the data or the options are at fault, or no trial "
          "reported the `--metric`).",
          "Leave out the options you want searched; read the failing trial's message and fix the data or options; "
          "check `--metric` names a metric the task reports."),
    Entry(COMPARING, r"compare/inside\.py", r".", "Looking inside a model",
          "The pictures of gates and attention are drawn by re-running the model with seqlab's textbook cells; the "
          "model has no recurrent layers or attention to draw, is bidirectional, the layer or head asked for does "
          "not exist, the sample text is empty, or the textbook computation differs from the model's own (the "
          "picture would not be this model's).",
          "Choose a model with what you want to see, a layer and head in the range the message gives, and a "
          "sentence; report a difference between textbook and model as a bug."),
    # --------------------------------------------------------------------------------------------- auditing harms
    Entry(HARMS, r"data/canaries\.py", r"^--canary", "A canary template",
          "`--canary` plants secrets into the training text from a template with exactly one slot such as "
          "`{digits:6}` (one line, a slot length in range), and `--canary-repeats` asks for secrets the slot must "
          "have enough fillings for.",
          "Write one slot, e.g. `--canary 'my pin is {digits:6}'`, long enough for the secrets asked."),
    Entry(HARMS, r"data/canaries\.py", r"canaries\.json|is not valid JSON|is damaged", "A run's canaries that do not "
          "match",
          "The run's `canaries.json` (the secrets and where they were planted) is missing, damaged, or was drawn "
          "for a training file of another length.",
          "Start the run again with `--overwrite`."),
    Entry(HARMS, r"harms/__init__\.py|harms/exposure\.py",
          r"seqlab audit ‹name› needs|has no canaries\.json: it was not",
          "An audit this run cannot take",
          "Each audit needs a kind of run: exposure a language model trained with `--canary`, toxicity and "
          "memorization a language model; this run is not one.",
          "Audit a run of the kind the message names (train with `--canary ... --canary-repeats ...` for "
          "exposure)."),
    Entry(HARMS, r"harms/exposure\.py", r"enumerat|one piece per symbol", "Exact exposure not possible",
          "Exact exposure scores every filling of the canary's slot, which needs the tokenizer to read each "
          "symbol of the slot as its own token, and a slot with few enough fillings.",
          "Use `--method approximate`."),
    Entry(HARMS, r"harms/memorization\.py", r"prefix|nothing to measure|blank lines|no sample could match|context",
          "Memorization settings that measure nothing",
          "Memorization extraction prompts the model with prefixes of training text and compares the "
          "continuation; the prefixes are longer than the model's context or the training text, none were given, "
          "the training file is blank, or the samples are shorter than a match.",
          "Give `--prefix-lengths` within the model's context and the text, some `--samples` or `--sequences`, and "
          "`--length` at least `--match-length`."),
    Entry(HARMS, r"harms/bias\.py", r"^(?!resamples)", "A CrowS-Pairs file",
          "The bias audit reads a CrowS-Pairs CSV with a header (`sent_more`, `sent_less`, `stereo_antistereo`, "
          "...); the header lacks a column, a row has another number of fields (a quote left open), a sentence "
          "is empty, or `stereo_antistereo` is neither `stereo` nor `antistereo`.",
          "Give the CSV as distributed, or correct the row the message names."),
    Entry(HARMS, r"harms/toxicity\.py", r"prompt|scored continuation|--toxic-label", "Toxicity prompts and scorer",
          "The toxicity audit continues each prompt of the file and scores the continuations with a classifier "
          "run; the file has no prompts, or the scorer has no label named as the toxic one.",
          "Give a file of prompts (one a line), and `--toxic-label` naming the scorer's toxic class."),
]

ENTRIES += [
    Entry(EXPLORING, r"contract/views\.py", r"must be a number|must be a whole number|must be between|must be .* or |"
          r"strategy must be|unknown explain option", "An explain option out of range",
          "The options of an explanation (top_k, units, max_tokens, temperature, top_p, beam, length_penalty, seed, "
          "strategy) each have a type and a range, so that one request stays small and its numbers mean something.",
          "Give the option within the range the message states (the served page's inputs and "
          "`seqlab explore --help` show them)."),
    Entry(EXPLORING, r"contract/views\.py", r"has no view ", "A view the model does not have",
          "Each family declares its views and the architectures that have them: gates need recurrent layers, "
          "attention a transformer or an attention model, a CRF's lattice a CRF; an export has only the views "
          "computed from its graphs' outputs.",
          "Ask for one of the views the message lists (GET /v1/explain/MODEL lists them with what each shows)."),
    Entry(EXPLORING, r"contract/views\.py|families/\w+/views\.py", r"no views to explore|text to explain",
          "Nothing to explain",
          "The explorer looks inside a model of a family that declares views (every built-in family does) as it "
          "reads one non-empty text of bounded length.",
          "Give a run of a family with views, and a text of at most the characters the message states."),
    Entry(PYTHON, r"nn/inside\.py", r"reads one sequence|kept no weights", "A recording asked for wrongly",
          "`seqlab.nn.inside.recurrent_record` records the gates of one sequence, (1, T, I); `kept` reads the "
          "weights the attention modules kept during a forward pass run within `attention_kept`.",
          "Record each sequence alone; run the model inside `with attention_kept(model) as modules:` before "
          "`kept(modules)`."),
    Entry(EXPLORING, r"nn/inside\.py", r"differs from the", "What the explorer records is not the model's",
          "Gates and attention weights are recorded by running the model's own weights through seqlab's textbook "
          "cells and attention, which compute the same function as the fused kernels; the two differed by more "
          "than the tolerance, so the view would not show this model.",
          "Report it as a bug, with the run; on a GPU, explore on the CPU (`--device cpu`)."),
]

ENTRIES += [
    Entry(EXPLORING, r"cli/explore\.py", r"goes with --text|option of the server", "Options of the other mode",
          "`seqlab explore` runs in one of two modes: with `--text` it computes the views of that text here and "
          "prints them (the view options apply: `--views`, `--top-k`, ...); without it, it serves the page, whose "
          "Explore tab sets the views and options (the server's options apply: `--port`, `--api-key`, the limits).",
          "Drop the options of the mode you are not in, or add `--text` to print the views here."),
    Entry(EXPLORING, r"cli/explore\.py", r"no views to explore|--text is empty|--text has|--views names no view",
          "Nothing to explore", "The runs must be of a family that declares views, the text non-empty and at most "
          "the characters the message states, and `--views` must name at least one view.",
          "Give a run of a built-in family (or of one with an `explain` part), a sentence, and view names "
          "separated by commas (`seqlab explore RUN --text TEXT` lists every view the run has)."),
    Entry(EXPLORING, r"cli/explore\.py", r"--json .* exists and is not an explanation",
          "A --json file seqlab did not write",
          "`--json` replaces a file only if it holds an explanation `seqlab explore` wrote; anything else there is "
          "yours and is kept.",
          "Choose another file name, or move the file away."),
]
