"""Small example datasets that seqlab writes itself, one per task, in the files `seqlab train` reads: a first
model of every family in minutes, on data the package ships (Tiny Shakespeare) or makes (the rest, from seeded
grammars). `write(task, directory)` writes them, `command(task, directory)` is the `seqlab train` line that
trains on them; the CLI is `seqlab examples TASK DIR` (`seqlab.cli.examples`).

    lm             Tiny Shakespeare, the bundled corpus, cut 90/5/5 by lines: train.txt, valid.txt, test.txt
    pos            CoNLL-U sentences of a small English grammar (UPOS in column 4) whose commonest words are
                   ambiguous: "can" AUX / NOUN / VERB, "saw", "flies", "that" DET / SCONJ / PRON, "like"
                   VERB / ADP, "to" PART / ADP, "has" AUX / VERB, plural nouns that are also verbs ("ducks")
    ner            CoNLL-2003 columns (word POS chunk NER, IOB2 PER / LOC / ORG / MISC) of news-like templates
                   filled with names of one to four tokens; "Jordan" and "Washington" are people and places
    sentiment      TSV reviews (text, label pos / neg, balanced) whose label the word order decides: negation
                   ("not bad"), contrast ("dull at first but wonderful in the end") and "although"
    translation    a toy subject-object-verb language with adjectives after their noun, postpositions and
                   relative clauses, and its English, as aligned .src / .tgt files (4 to 20 tokens)
    summarization  JSON lines {"source": an email, "target": its subject line}, the subject read off (or
                   composed from) one sentence of the email among distractors that name other days and topics

Why they are built so. Each dataset has something that the family's simplest model misses and its textbook
model learns, so the first run already shows what the architecture is for:
- pos: a tagger that reads each word alone (the most frequent tag of each form) is wrong on every ambiguous
  form used in its rarer role; a BiLSTM reads the context (SLP 9.2.4 / 13.3.1).
- ner: a quarter of the names (people, places, organisations, MISC) never appear in training, and "Jordan"
  and "Washington" are both people and places: the entity comes from the context and the characters of the
  tokens, not from memory (a tagger that memorises each word's tag reaches about 62 F1 on the test split).
- sentiment: half of the reviews come in twins of the same words in another order with the opposite label
  ("good at first but dull in the end" / "dull at first but good in the end"), which no bag of words can
  tell apart: the best a bag can do is about 70% (the pooled classifier, trained well, gets there: 68.5% of
  the small test split), while a BiGRU reaches 100%.
- translation: the English puts the verb second, the adjectives before their noun (in mirror order), the
  postposition before its phrase and a leading adverb last, so the alignment crosses: attention shows it.
- summarization: the subject depends on which sentence holds the request (and, in a moved call, on which of
  two days is the new one), so a model must find it among sentences that mention other days and topics.
- lm: real text, cut by lines as PTB and wikitext are, small enough for a character LM on a CPU.

Sizes: "tiny" is a few hundred examples (lm: the first 600 lines), which trains in seconds (tests, the docs'
CI); "small" is a few thousand (lm: the whole corpus), on which `command`'s model reaches a clearly good
score in one to three minutes on a laptop CPU. A seed fixes the files byte for byte (lm has no randomness);
no example appears in two splits. Files are written atomically (`seqlab.fileio`) and never replace existing
ones unless asked; asked (--overwrite), they replace only files seqlab examples wrote and that are unchanged
since: the folder's .seqlab-examples.json holds the SHA-256 of each file written (a file that already holds the
bytes to be written is replaced too: nothing is lost). This module is data only: it imports no PyTorch.
"""

from __future__ import annotations

import hashlib
import json
import random
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.fileio import atomic_write_json, atomic_write_text, check_writable

TASKS = {
    "lm": "Tiny Shakespeare (bundled), cut 90/5/5 by lines: a character language model (seqlab train lm)",
    "pos": "part-of-speech tags (CoNLL-U) of a toy English grammar full of ambiguous words (seqlab train tagger)",
    "ner": "named entities PER/LOC/ORG/MISC in CoNLL-2003 columns, from news-like templates (seqlab train tagger)",
    "sentiment": "pos/neg reviews (TSV) decided by word order: negation, contrast (seqlab train classifier)",
    "translation": "a toy subject-object-verb language and its English, aligned .src/.tgt (seqlab train seq2seq)",
    "summarization": "emails and their subject lines, JSON lines source/target (seqlab train seq2seq)",
}
SIZES = ("tiny", "small")
SPLITS = ("train", "dev", "test")


def write(task: str, directory: str | Path, *, size: str = "small", seed: int = 0,
          overwrite: bool = False) -> dict[str, Path]:
    """Write the example dataset of `task` (one of TASKS) into `directory` (created if missing); return its files
    by the data option of `seqlab train` that reads each: {"train": ..., "dev": ..., "test": ...} ("valid" for
    lm; "train_src", "train_tgt", ... for translation). The same seed writes the same bytes."""
    spec = _spec(task)
    if size not in SIZES:
        raise SeqlabError(f"unknown example size {size!r}: choose one of {', '.join(SIZES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SeqlabError(f"example seed {seed!r}: give an integer >= 0")
    paths = files(task, directory)
    existing = [path for path in paths.values() if path.exists()]
    if existing and not overwrite:
        raise SeqlabError(f"{existing[0]} already exists: add --overwrite (overwrite=True) to replace the "
                          f"{task} example's files, or choose another folder")
    check_writable(directory, "example folder", folder=True)
    texts = spec.make(random.Random(f"seqlab.examples {task} {seed}"), spec.counts[size])
    written = _written(Path(directory))
    for option, path in paths.items():                  # all checked before any is replaced
        if path.exists() and _sha256(path) not in (written.get(path.name), _digest(texts[option])):
            why = ("has changed since seqlab examples wrote it" if path.name in written else
                   f"was not written by seqlab examples ({MARKER} does not list it)")
            raise SeqlabError(f"--overwrite: {path} {why}: seqlab never replaces what it did not write; move it "
                              "out, or choose another folder")
    for option, path in paths.items():
        atomic_write_text(path, texts[option])
        written[path.name] = _digest(texts[option])
    atomic_write_json(Path(directory) / MARKER, {"format": MARKER_FORMAT, "files": dict(sorted(written.items()))})
    return paths


MARKER = ".seqlab-examples.json"     # in the folder: the SHA-256 of each file seqlab examples wrote there
MARKER_FORMAT = "seqlab-examples"


def _written(directory: Path) -> dict[str, str]:
    """{file name: SHA-256} of the files `write` wrote in `directory` (the marker; {} without a readable one)."""
    try:
        marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = marker.get("files") if isinstance(marker, dict) and marker.get("format") == MARKER_FORMAT else None
    return {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _sha256(path: Path) -> str:
    from seqlab.fileio import file_sha256

    return file_sha256(path, "example file")


def files(task: str, directory: str | Path) -> dict[str, Path]:
    """The files `write` writes for `task` in `directory`, by the data option that reads each."""
    return {option: Path(directory) / name for option, name in _spec(task).files.items()}


def command(task: str, directory: str | Path, *, output: str | None = None) -> str:
    """The `seqlab train` command line that trains a first model on the files `write` wrote in `directory`
    (its run in `output`, default runs/TASK): ready to paste into a POSIX shell."""
    spec = _spec(task)
    words = ["seqlab", "train", spec.family]
    for option, path in files(task, directory).items():
        words += [f"--{option.replace('_', '-')}", str(path)]
    words += [*spec.recipe.split(), "--output", output or f"runs/{task}"]
    return " ".join(shlex.quote(word) for word in words)


@dataclass(frozen=True)
class _Task:
    family: str                                     # the family that trains on it: `seqlab train <family>`
    files: dict[str, str]                           # data option -> file name
    counts: dict[str, tuple]                        # size -> examples of train, dev, test (lm: (lines read,))
    make: Callable[[random.Random, tuple], dict[str, str]]     # -> {data option: file text}
    recipe: str                                     # the options of a first model that learns the small data


def _spec(task: str) -> _Task:
    if task not in _TASKS:
        raise SeqlabError(f"unknown example task {task!r}: choose one of {', '.join(TASKS)}")
    return _TASKS[task]


def _draw(rng: random.Random, make: Callable[[random.Random, str], list], counts: tuple,
          key: Callable) -> list[list]:
    """The examples of train, dev and test (`counts` of each), drawn from `make(rng, split)` (a list of examples
    kept or dropped together: a twin pair), all distinct: no example of one split is repeated in another."""
    seen, splits = set(), []
    for split, count in zip(SPLITS, counts, strict=True):
        examples, tries = [], 0
        while len(examples) < count:
            tries += 1
            if tries > 100 * count:
                raise RuntimeError(f"the grammar makes too few distinct examples for {count} in {split}")
            unit = make(rng, split)
            keys = [key(example) for example in unit]
            if len(set(keys)) == len(keys) and not seen.intersection(keys):
                seen.update(keys)
                examples.extend(unit)
        splits.append(examples)
    return splits



# ---------------------------------------------------------------------------------------------------- lm

def _make_lm(rng: random.Random, counts: tuple) -> dict[str, str]:
    text = resources.files("seqlab.corpora").joinpath("tinyshakespeare.txt").read_text(encoding="utf-8")
    lines = text.split("\n")[:-1][:counts[0]]                # the first N lines, or all with None
    train_end, valid_end = round(0.9 * len(lines)), round(0.95 * len(lines))
    parts = {"train": lines[:train_end], "valid": lines[train_end:valid_end], "test": lines[valid_end:]}
    return {name: "\n".join(part) + "\n" for name, part in parts.items()}


# ---------------------------------------------------------------------------------------------------- pos
# A clause grammar over word forms (form, UPOS, lemma). The same form under several tags is what the tagger
# must learn from context: nouns whose plural is a verb's third person ("ducks", "flies", "books"), "saw" and
# "rose" as nouns and as past tenses, "can" as AUX / NOUN / VERB, "that" as DET / SCONJ / relative PRON,
# "like" as VERB / ADP, "to" as PART / ADP, "has" as AUX / VERB, "after" / "before" as ADP / SCONJ, "still",
# "fast", "well" and "light" in two or three roles.

_NOUNS = [(w, w + "s") for w in "dog cat farmer teacher river house letter garden song book duck park play train "
          "walk rose light cook paint answer can saw well".split()] + \
         [("child", "children"), ("fly", "flies"), ("watch", "watches"), ("fish", "fish"), ("box", "boxes")]


def _forms(text: str) -> list[tuple[str, ...]]:
    """Comma-separated groups of forms: "see sees saw seen, ..." -> [("see", "sees", "saw", "seen"), ...]."""
    return [tuple(group.split()) for group in text.split(",")]


# base, third person singular, past, participle
_TRANSITIVE = _forms("book books booked booked, paint paints painted painted, cook cooks cooked cooked, "
                     "answer answers answered answered, park parks parked parked, play plays played played, "
                     "train trains trained trained, open opens opened opened, watch watches watched watched, "
                     "love loves loved loved, see sees saw seen, like likes liked liked, can cans canned canned, "
                     "find finds found found, carry carries carried carried, read reads read read, "
                     "light lights lit lit, fish fishes fished fished")
_INTRANSITIVE = _forms("fly flies flew flown, walk walks walked walked, duck ducks ducked ducked, "
                       "fish fishes fished fished, rise rises rose risen, run runs ran run, sleep sleeps slept slept, "
                       "swim swims swam swum, play plays played played, cook cooks cooked cooked, "
                       "train trains trained trained")
_GOING = _forms("walk walks walked, run runs ran, fly flies flew, go goes went")
_SAYING = _forms("say says said, think thinks thought, know knows knew")
_WANTING = _forms("want wants wanted, need needs needed, try tries tried")
_ADJECTIVES = "old small red happy quiet green tall young cold light fast kind still".split()
_AFTER_VERB = "quickly slowly again today well fast".split()            # ADV after the verb
_BEFORE_VERB = "often never still always".split()                        # ADV before it
_PREPOSITIONS = "in on near under with behind after before".split()
_MODALS = "can will must should could might".split()
_SUBJECTS = {"she": True, "he": True, "it": True, "they": False, "we": False, "I": False, "you": False}  # -> 3sg
_OBJECTS = "him her them us me it".split()
_BE = {(True, False): "is", (False, False): "are", (True, True): "was", (False, True): "were"}
_HAVE = {(True, False): "has", (False, False): "have", (True, True): "had", (False, True): "had"}
_DO = {(True, False): "does", (False, False): "do", (True, True): "did", (False, True): "did"}


def _word(form: str, tag: str, lemma: str | None = None) -> tuple[str, str, str]:
    return form, tag, lemma or form.lower()


def _finite(verb: tuple, singular: bool, past: bool) -> str:
    return verb[2] if past else verb[1] if singular else verb[0]


def _pos_np(rng: random.Random, relative: bool = True) -> tuple[list, bool]:
    """A noun phrase and whether it is singular."""
    plural = rng.random() < 0.35
    noun = rng.choice(_NOUNS)
    words = []
    if not plural or rng.random() < 0.6:
        words.append(_word(rng.choice(("the", "some", "these", "those") if plural else
                                      ("the", "the", "a", "this", "that", "every")), "DET"))
    words += [_word(a, "ADJ") for a in rng.sample(_ADJECTIVES, rng.choice((0, 0, 0, 1, 1, 2)))]
    words.append(_word(noun[plural], "NOUN", noun[0]))
    if relative and rng.random() < 0.12:                    # the dog that sees the cat: relative "that" is PRON
        words += [_word("that", "PRON"), *_pos_predicate(rng, not plural, rng.random() < 0.5, nested=True)]
    return words, not plural


def _pos_object(rng: random.Random, nested: bool) -> list:
    if rng.random() < 0.25:
        return [_word(rng.choice(_OBJECTS), "PRON")]
    return _pos_np(rng, relative=not nested)[0]


def _pos_predicate(rng: random.Random, singular: bool, past: bool, nested: bool = False) -> list:
    """The verb phrase of a clause whose subject is (or is not) third person singular."""
    agreement = (singular, past)
    kind = rng.choices(("transitive", "intransitive", "modal", "copula", "perfect", "possess", "negated", "want",
                        "go", "like", "say"), (26, 12, 12, 8, 6, 5, 6, 6, 6, 6, 0 if nested else 7))[0]
    before = [_word(rng.choice(_BEFORE_VERB), "ADV")] if rng.random() < 0.12 else []
    if kind in ("transitive", "intransitive"):
        verb = rng.choice(_TRANSITIVE if kind == "transitive" else _INTRANSITIVE)
        words = [*before, _word(_finite(verb, singular, past), "VERB", verb[0])]
        if kind == "transitive":
            words += _pos_object(rng, nested)
        elif rng.random() < 0.5:
            words.append(_word(rng.choice(_AFTER_VERB), "ADV"))
    elif kind in ("modal", "negated", "perfect"):
        verb = rng.choice(_TRANSITIVE + _INTRANSITIVE)
        if kind == "modal":
            words = [_word(rng.choice(_MODALS), "AUX")] + [_word("not", "PART")] * (rng.random() < 0.2)
        elif kind == "negated":
            words = [_word(_DO[agreement], "AUX", "do"), _word("not", "PART")]
        else:
            words = [_word(_HAVE[agreement], "AUX", "have")]
        words.append(_word(verb[3] if kind == "perfect" else verb[0], "VERB", verb[0]))
        if verb in _TRANSITIVE:
            words += _pos_object(rng, nested)
    elif kind == "copula":
        words = [_word(_BE[agreement], "AUX", "be")] + [_word("not", "PART")] * (rng.random() < 0.2)
        words += [_word("very", "ADV")] * (rng.random() < 0.2) + [_word(rng.choice(_ADJECTIVES), "ADJ")]
    elif kind == "possess":
        words = [_word(_HAVE[agreement], "VERB", "have"), *_pos_object(rng, nested)]
    elif kind == "want":                                    # wants to cook the fish: "to" is PART
        verb, wanted = rng.choice(_WANTING), rng.choice(_TRANSITIVE)
        words = [*before, _word(_finite(verb, singular, past), "VERB", verb[0]), _word("to", "PART"),
                 _word(wanted[0], "VERB"), *_pos_object(rng, nested)]
    elif kind == "go":                                      # walks to the park: "to" is ADP
        verb = rng.choice(_GOING)
        words = [*before, _word(_finite(verb, singular, past), "VERB", verb[0]), _word("to", "ADP"),
                 *_pos_np(rng, relative=False)[0]]
    elif kind == "like":                                    # swims like a fish: "like" is ADP
        verb = rng.choice(_INTRANSITIVE)
        words = [_word(_finite(verb, singular, past), "VERB", verb[0]), _word("like", "ADP"),
                 *_pos_np(rng, relative=False)[0]]
    else:                                                   # says that the dog ...: "that" is SCONJ
        verb = rng.choice(_SAYING)
        words = [_word(_finite(verb, singular, past), "VERB", verb[0]), _word("that", "SCONJ"),
                 *_pos_clause(rng, nested=True)]
    if rng.random() < 0.2:
        words += [_word(rng.choice(_PREPOSITIONS), "ADP"), *_pos_np(rng, relative=False)[0]]
    return words


def _pos_clause(rng: random.Random, nested: bool = False) -> list:
    if rng.random() < 0.3:
        form = rng.choice(list(_SUBJECTS))
        subject, singular = [_word(form, "PRON", form.lower())], _SUBJECTS[form]
    else:
        subject, singular = _pos_np(rng, relative=not nested)
    return subject + _pos_predicate(rng, singular, rng.random() < 0.5, nested)


def _pos_sentence(rng: random.Random) -> tuple:
    while True:
        chance = rng.random()
        if chance < 0.05:                                   # that is old: "that" is PRON
            words = [_word("that", "PRON"), *_pos_predicate(rng, True, rng.random() < 0.5, nested=True)]
        elif chance < 0.15:                                 # after the rain, ...: "after" is ADP
            words = [_word(rng.choice(("after", "before")), "ADP"), *_pos_np(rng, relative=False)[0],
                     _word(",", "PUNCT"), *_pos_clause(rng)]
        else:
            words = _pos_clause(rng)
            if chance > 0.75:                               # ... because / after ... : SCONJ
                words += [_word(rng.choice(("because", "when", "if", "after", "before", "while")), "SCONJ"),
                          *_pos_clause(rng, nested=True)]
            elif chance > 0.65:
                words += [_word(",", "PUNCT"), _word(rng.choice(("and", "but")), "CCONJ"),
                          *_pos_clause(rng, nested=True)]
        if len(words) < 25:
            break
    words = [_word("an", "DET", "a") if w[0] == "a" and nxt[0][0] in "aeiou" else w
             for w, nxt in zip(words, [*words[1:], (".",)], strict=True)]
    words.append(_word(".", "PUNCT"))
    return (_word(words[0][0][:1].upper() + words[0][0][1:], *words[0][1:]), *words[1:])


def _conllu(sentences: list, split: str) -> str:
    """CoNLL-U: # sent_id and # text (no space before "." and ",", which MISC marks SpaceAfter=No), then
    ID FORM LEMMA UPOS and six empty columns per word."""
    blocks = []
    for number, words in enumerate(sentences, 1):
        glued = [nxt[0] in (".", ",") for nxt in [*words[1:], ("",)]]          # no space after the word
        text = "".join(word[0] + " " * (not no_space) for word, no_space in zip(words, glued, strict=True))
        rows = [f"# sent_id = {split}-{number}", f"# text = {text.strip()}"]
        for i, ((form, tag, lemma), no_space) in enumerate(zip(words, glued, strict=True), 1):
            misc = "SpaceAfter=No" if no_space else "_"
            rows.append("\t".join((str(i), form, lemma, tag, "_", "_", "_", "_", "_", misc)))
        blocks.append("\n".join(rows) + "\n")
    return "\n".join(blocks)


def _make_pos(rng: random.Random, counts: tuple) -> dict[str, str]:
    splits = _draw(rng, lambda r, split: [_pos_sentence(r)], counts, key=lambda s: " ".join(w[0] for w in s))
    return {split: _conllu(sentences, split) for split, sentences in zip(SPLITS, splits, strict=True)}


# ---------------------------------------------------------------------------------------------------- ner
# News-like templates, each word with its Penn Treebank tag; {PER}, {LOC}, {ORG}, {NAT} (a MISC adjective),
# {EVENT} (MISC) and the numbers are filled in; the chunk tags follow from the POS tags.

_TEMPLATES = [
    "{PER} visited/VBD {LOC} on/IN {DAY} ./.",
    "{ORG} said/VBD on/IN {DAY} it/PRP would/MD buy/VB {ORG} ./.",
    "{PER} ,/, a/DT spokesman/NN for/IN {ORG} ,/, said/VBD the/DT talks/NNS in/IN {LOC} had/VBD failed/VBN ./.",
    "The/DT {NAT} team/NN beat/VBD {LOC} {SCORE} in/IN the/DT {EVENT} ./.",
    "{PER} won/VBD the/DT {EVENT} in/IN {YEAR} ./.",
    "{PER} told/VBD reporters/NNS in/IN {LOC} that/IN {ORG} would/MD cut/VB {NUM} jobs/NNS ./.",
    "{ORG} ,/, based/VBN in/IN {LOC} ,/, bought/VBD a/DT stake/NN in/IN {ORG} ./.",
    "{PER} (/( {LOC} )/) finished/VBD second/JJ behind/IN {PER} ./.",
    "Police/NNS in/IN {LOC} arrested/VBD {NUM} people/NNS on/IN {DAY} ,/, {PER} said/VBD ./.",
    "{NAT} officials/NNS said/VBD {PER} would/MD visit/VB {LOC} and/CC {LOC} next/JJ week/NN ./.",
    "Shares/NNS of/IN {ORG} rose/VBD {NUM} percent/NN in/IN {LOC} ./.",
    "{PER} scored/VBD twice/RB as/IN {ORG} beat/VBD {ORG} {SCORE} ./.",
    "{LOC} will/MD host/VB the/DT {EVENT} in/IN {YEAR} ./.",
    "The/DT {NAT} minister/NN met/VBD {PER} of/IN {ORG} in/IN {LOC} ./.",
    "{PER} joined/VBD {ORG} from/IN {ORG} last/JJ year/NN ./.",
    "Rain/NN stopped/VBD play/NN in/IN {LOC} on/IN {DAY} ./.",
    "{ORG} fans/NNS celebrated/VBD in/IN {LOC} after/IN the/DT {EVENT} final/NN ./.",
    "{PER} ,/, the/DT {NAT} champion/NN ,/, arrived/VBD in/IN {LOC} on/IN {DAY} ./.",
    "{LOC} beat/VBD {LOC} {SCORE} on/IN {DAY} ./.",
    "{PER} and/CC {PER} will/MD lead/VB the/DT {NAT} delegation/NN to/TO {LOC} ./.",
]
_FIRST = "Anna John Maria Peter Ahmed Yuki Carlos Olga Wei Fatima David Sofia Jordan Lena Tom Amara Ivan Priya".split()
_LAST = ("Smith Berg Okafor Tanaka Garcia Novak Chen Muller Rossi Kowalski Washington Lee Haddad Silva Jordan Brown "
         "Ivanova Mensah Dubois Larsen").split()
_PLACES = ["Paris", "Berlin", "Lagos", "Tokyo", "Lima", "Oslo", "Cairo", "Vienna", "Jordan", "Chile", "Washington",
           "Kenya", "New York", "Hong Kong", "Buenos Aires", "South Africa", "New Zealand", "Sri Lanka",
           "Los Angeles", "Rio de Janeiro"]
_ORGANISATIONS = ["United Nations", "European Union", "Red Cross", "Bank of England", "World Health Organization",
                  "General Motors", "Reuters", "Real Madrid", "Ajax", "Toyota"]
_NATIONALITIES = "German French Japanese Nigerian Brazilian Kenyan Chilean Austrian".split()
_EVENTS = ["World Cup", "Olympic Games", "Nobel Prize", "Champions League", "Tour de France", "Davis Cup"]
_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_NAME_TAGS = {"of": "IN", "de": "IN", "Games": "NNPS", "Nations": "NNPS"}
_CHUNK_KINDS = {**dict.fromkeys(("DT", "JJ", "NN", "NNS", "NNP", "NNPS", "CD", "PRP"), "NP"),
                **dict.fromkeys(("VBD", "VBZ", "VB", "VBN", "MD"), "VP"), "IN": "PP", "TO": "PP", "RB": "ADVP"}


def _names(names: list[str], split: str) -> list[str]:
    """The names a split draws from: training never sees every fourth one of each list."""
    return names if split != "train" else [name for i, name in enumerate(names) if i % 4 != 3]


def _ner_slot(rng: random.Random, slot: str, split: str) -> tuple[list[str], str, str]:
    """The tokens of a slot, their entity type ("" for none) and POS tag."""
    first, last, places = _names(_FIRST, split), _names(_LAST, split), _names(_PLACES, split)
    if slot == "PER":
        shape = rng.random()
        return [rng.choice(first), rng.choice(last)] if shape < 0.75 else \
            [rng.choice(last if shape < 0.9 else first)], "PER", "NNP"
    if slot == "LOC":
        return rng.choice(places).split(), "LOC", "NNP"
    if slot == "ORG":
        single = [place for place in places if " " not in place]
        made = rng.choice((f"{rng.choice(last)} Holdings", f"{rng.choice(last)} Group", f"{rng.choice(single)} United",
                           f"Bank of {rng.choice(places)}"))
        return (made if rng.random() < 0.4 else rng.choice(_names(_ORGANISATIONS, split))).split(), "ORG", "NNP"
    if slot == "NAT":
        return [rng.choice(_names(_NATIONALITIES, split))], "MISC", "JJ"
    if slot == "EVENT":
        return rng.choice(_names(_EVENTS, split)).split(), "MISC", "NNP"
    if slot == "DAY":
        return [rng.choice(_DAYS)], "", "NNP"
    value = {"NUM": lambda: rng.choice(("two", "three", "five", "12", "40", "150")),
             "YEAR": lambda: str(rng.randint(1990, 2024)),
             "SCORE": lambda: f"{rng.randint(0, 4)}-{rng.randint(0, 3)}"}[slot]()
    return [value], "", "CD"


def _ner_sentence(rng: random.Random, split: str) -> tuple:
    """(word, POS, chunk, NER) rows of one filled template."""
    rows = []                                               # (word, POS, entity tag)
    for token in rng.choice(_TEMPLATES).split():
        if token.startswith("{"):
            names, kind, tag = _ner_slot(rng, token[1:-1], split)
            rows += [(name, _NAME_TAGS.get(name, tag), f"{'B' if i == 0 else 'I'}-{kind}" if kind else "O")
                     for i, name in enumerate(names)]
        else:
            word, tag = token.rsplit("/", 1)
            rows.append((word, tag, "O"))
    sentence, previous = [], ("O", "O")                     # (chunk kind, entity tag) of the token before
    for word, tag, entity in rows:
        kind = _CHUNK_KINDS.get(tag, "O")
        new_name = entity.startswith("B-") and previous[1] != "O"
        chunk = "O" if kind == "O" else f"{'B' if kind != previous[0] or kind == 'PP' or new_name else 'I'}-{kind}"
        sentence.append((word, tag, chunk, entity))
        previous = (kind, entity)
    return tuple(sentence)


def _make_ner(rng: random.Random, counts: tuple) -> dict[str, str]:
    splits = _draw(rng, lambda r, split: [_ner_sentence(r, split)], counts, key=lambda s: " ".join(row[0] for row in s))
    return {split: "-DOCSTART- -X- -X- O\n\n" + "\n".join("".join(" ".join(row) + "\n" for row in sentence)
                                                         for sentence in sentences)
            for split, sentences in zip(SPLITS, splits, strict=True)}


# ---------------------------------------------------------------------------------------------------- sentiment

_ASPECTS = ("the film", "this movie", "the plot", "the acting", "the script", "the soundtrack", "the ending",
            "the cast", "the dialogue", "the story", "the camera work", "the lead actor", "the pacing", "the humour")
_GOOD = "good great wonderful brilliant funny charming moving clever fresh gripping beautiful superb".split()
_BAD = "bad awful dull boring weak clumsy tedious bland messy predictable lifeless silly".split()
_INTENSIFIERS = "very really truly incredibly so quite".split()
_ASIDES = ("i saw it on a sunday .", "we went with friends .", "it runs about two hours .", "the cinema was full .",
           "my sister picked it .", "it came out last year .", "we had popcorn .", "i watched it at home .")
_TWINS = ("{a} is {x} at first but {y} in the end .", "{a} is {x} , but {b} is {y} .",
          "although {a} is {x} , {b} is {y} .", "{b} is {y} , although {a} is {x} .",
          "{a} is not {x} , it is {y} .", "{a} is not {x} but {y} .", "i expected {a} to be {x} , but it is {y} .")


def _adjective(rng: random.Random, good: bool, intensify: bool = True) -> str:
    word = rng.choice(_GOOD if good else _BAD)
    return f"{rng.choice(_INTENSIFIERS)} {word}" if intensify and rng.random() < 0.3 else word


def _review(rng: random.Random, good: bool) -> str:
    """One review, its label decided by one adjective, perhaps negated."""
    aspect = rng.choice(_ASPECTS)
    if rng.random() < 0.5:
        text = f"{aspect} is {_adjective(rng, good)} ."
    else:                                                   # not bad -> pos; not (very) good -> neg
        text = rng.choice(("{a} is not {x} .", "{a} is never {x} .", "{a} is not at all {x} .",
                           "i would not call {a} {x} .")).format(a=aspect, x=_adjective(rng, not good, not good))
    return _aside(rng)(text)


def _aside(rng: random.Random) -> Callable[[str], str]:
    """A function that adds the same sentence beside the point (or none) to a review: before it, after it."""
    chance, aside = rng.random(), rng.choice(_ASIDES)
    return lambda text: f"{aside} {text}" if chance < 0.2 else f"{text} {aside}" if chance < 0.4 else text


def _sentiment_unit(rng: random.Random, split: str) -> list[tuple[str, str]]:
    """Two reviews, one pos and one neg: either twins of the same words in two orders (the clause after "but",
    the one without "although", or after "not ... ,": "it is ..." decides), or two independent reviews."""
    if rng.random() < 0.5:
        return [(_review(rng, True), "pos"), (_review(rng, False), "neg")]
    template, (a, b) = rng.choice(_TWINS), rng.sample(_ASPECTS, 2)
    good, bad = _adjective(rng, True), _adjective(rng, False)
    aside = _aside(rng)                                     # the same for both
    return [(aside(template.format(a=a, b=b, x=bad, y=good)), "pos"),
            (aside(template.format(a=a, b=b, x=good, y=bad)), "neg")]


def _make_sentiment(rng: random.Random, counts: tuple) -> dict[str, str]:
    splits = _draw(rng, _sentiment_unit, counts, key=lambda example: example[0])
    texts = {}
    for split, examples in zip(SPLITS, splits, strict=True):
        rng.shuffle(examples)
        texts[split] = "text\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in examples)
    return texts


# ---------------------------------------------------------------------------------------------------- translation
# The toy language: subject object [postpositional phrase] verb, adjectives after the noun, a relative clause
# "das OBJECT VERB" after it, a leading adverb. English: subject verb object [phrase] [adverb], adjectives
# before the noun in mirror order, the preposition first, "that VERB OBJECT".

_TOY_NOUNS = {"hund": "dog", "katze": "cat", "mann": "man", "frau": "woman", "kind": "child", "vogel": "bird",
              "ball": "ball", "haus": "house", "baum": "tree", "auto": "car", "buch": "book", "tisch": "table",
              "garten": "garden", "fluss": "river", "stadt": "city", "lehrer": "teacher", "bauer": "farmer",
              "pferd": "horse", "fisch": "fish", "brief": "letter", "apfel": "apple", "stuhl": "chair",
              "schiff": "ship", "berg": "mountain", "insel": "island", "eule": "owl"}
_TOY_ADJECTIVES = {"rot": "red", "klein": "small", "gross": "big", "alt": "old", "jung": "young", "blau": "blue",
                   "gruen": "green", "schnell": "fast", "muede": "tired", "froh": "happy", "kalt": "cold",
                   "schoen": "beautiful", "eng": "narrow"}
_TOY_TRANSITIVE = {"sieht": "sees", "mag": "likes", "hat": "has", "sucht": "looks for", "malt": "paints",
                   "traegt": "carries", "kauft": "buys", "baut": "builds", "liest": "reads", "isst": "eats",
                   "ruft": "calls", "folgt": "follows", "hoert": "hears", "findet": "finds"}
_TOY_INTRANSITIVE = {"schlaeft": "sleeps", "laeuft": "runs", "singt": "sings", "wartet": "waits", "lacht": "laughs",
                     "schwimmt": "swims"}
_TOY_POSTPOSITIONS = {"nah": "near", "unter": "under", "hinter": "behind", "mit": "with", "auf": "on",
                      "neben": "next to", "ohne": "without"}
_TOY_ADVERBS = {"heute": "today", "gestern": "yesterday", "oft": "often", "wieder": "again", "morgen": "tomorrow"}
_TOY_DETERMINERS = {"der": "the", "ein": "a"}


def _toy_np(rng: random.Random, relative: bool) -> tuple[list[str], list[str]]:
    """A noun phrase in the toy language and in English."""
    determiner, noun = rng.choice(sorted(_TOY_DETERMINERS)), rng.choice(sorted(_TOY_NOUNS))
    adjectives = rng.sample(sorted(_TOY_ADJECTIVES), rng.choice((0, 0, 1, 1, 2) if relative else (0, 0, 1)))
    source = [determiner, noun, *adjectives]
    english = [_TOY_ADJECTIVES[a] for a in reversed(adjectives)] + [_TOY_NOUNS[noun]]
    article = _TOY_DETERMINERS[determiner]
    target = [("an" if article == "a" and english[0][0] in "aeiou" else article), *english]
    if relative and rng.random() < 0.2:                     # der hund das die katze sieht: the dog that sees the cat
        verb = rng.choice(sorted(_TOY_TRANSITIVE))
        inner_source, inner_target = _toy_np(rng, relative=False)
        source += ["das", *inner_source, verb]
        target += ["that", _TOY_TRANSITIVE[verb], *inner_target]
    return source, target


def _toy_pair(rng: random.Random) -> tuple[str, str]:
    while True:
        subject, object_, phrase, adverb = _toy_np(rng, True), None, None, None
        transitive = rng.random() < 0.75
        verbs = _TOY_TRANSITIVE if transitive else _TOY_INTRANSITIVE
        verb = rng.choice(sorted(verbs))
        if transitive:
            object_ = _toy_np(rng, True)
        if rng.random() < 0.35:
            postposition = rng.choice(sorted(_TOY_POSTPOSITIONS))
            inner_source, inner_target = _toy_np(rng, relative=False)
            phrase = ([*inner_source, postposition], [_TOY_POSTPOSITIONS[postposition], *inner_target])
        if rng.random() < 0.2:
            word = rng.choice(sorted(_TOY_ADVERBS))
            adverb = ([word], [_TOY_ADVERBS[word]])
        parts = [p for p in (subject, object_, phrase) if p]
        source = (adverb[0] if adverb else []) + [w for p in parts for w in p[0]] + [verb, "."]
        target = subject[1] + [verbs[verb]] + [w for p in parts[1:] for w in p[1]] + (adverb[1] if adverb else [])
        if len(source) <= 20:
            return " ".join(source), " ".join([*target, "."])


def _make_translation(rng: random.Random, counts: tuple) -> dict[str, str]:
    splits = _draw(rng, lambda r, split: [_toy_pair(r)], counts, key=lambda pair: pair[0])
    texts = {}
    for split, pairs in zip(SPLITS, splits, strict=True):
        texts[f"{split}_src"] = "".join(source + "\n" for source, _ in pairs)
        texts[f"{split}_tgt"] = "".join(target + "\n" for _, target in pairs)
    return texts


# ---------------------------------------------------------------------------------------------------- summarization

_WEEKDAYS = "monday tuesday wednesday thursday friday".split()
_TOPICS = ("the budget", "the new website", "the hiring plan", "the office move", "the product launch",
           "the client visit", "the training schedule", "the sales figures", "the security audit", "the newsletter")
_PEOPLE = "anna john maria peter ahmed yuki carlos olga wei fatima".split()
_PLACES_TO_EAT = ("the cafe", "the italian place", "the canteen", "the sushi bar", "the food market")
_DOCUMENTS = ("draft", "slides", "proposal", "contract", "report", "budget sheet")
_EVENTS_AT_WORK = ("team meeting", "workshop", "training session", "board meeting", "offsite", "town hall")
_DISTRACTIONS = ("i hope you had a good weekend .", "the printer on the second floor is broken again .",
                 "did you see the game on {day} ?", "{person} says hello .", "let me know if you have questions .",
                 "the weather has been lovely .", "i will be out of the office on {day} .",
                 "we should also talk about {topic} at some point .", "the coffee machine is fixed .",
                 "{person} sent the notes about {topic} yesterday .")


# the kinds of request an email makes: the ways of saying it, and its subject line
_REQUESTS = [
    (("could we meet on {day} to talk about {topic} ?", "are you free on {day} ? i would like to discuss {topic} .",
      "let us get together on {day} and go through {topic} ."), "meeting on {day} about {topic}"),
    (("the {document} for {topic} is due on {day} .",
      "please send me your part of the {document} for {topic} by {day} ."), "{document} for {topic} due {day}"),
    (("i am afraid the {event} on {day} has to be cancelled .", "we are calling off the {event} on {day} , sorry ."),
     "{event} on {day} cancelled"),
    (("do you want to have lunch at {place} on {day} ?", "lunch at {place} on {day} ?"), "lunch at {place} on {day}"),
    (("can we move our call from {other} to {day} ?",                # two days: the new one is the subject's
      "our call on {other} does not work for me , can we do {day} instead ?"), "call moved to {day}"),
    (("{person} joins the team on {day} . please make them welcome .",
      "please welcome {person} , who starts with us on {day} ."), "{person} starts on {day}"),
    (("attached is the {document} on {topic} you asked for .", "here is the {document} on {topic} , as promised ."),
     "{document} on {topic}"),
    (("does anyone know who has the {document} for {topic} ?",
      "i cannot find the {document} for {topic} , who has it ?"), "who has the {document} for {topic} ?"),
]


def _request(rng: random.Random) -> tuple[list[str], str]:
    """The sentences that carry an email's point, and its subject line."""
    day, other, topic = *rng.sample(_WEEKDAYS, 2), rng.choice(_TOPICS)
    document, event, person = rng.choice(_DOCUMENTS), rng.choice(_EVENTS_AT_WORK), rng.choice(_PEOPLE)
    sayings, subject = _REQUESTS[rng.randrange(len(_REQUESTS))]
    said = rng.choice(sayings)
    values = {"day": day, "other": other, "topic": topic, "document": document, "event": event,
              "person": person, "place": rng.choice(_PLACES_TO_EAT)}
    return said.format(**values).split(" . "), subject.format(**values)


def _email(rng: random.Random) -> tuple[str, str]:
    said, subject = _request(rng)
    sentences = [s if s.endswith(("?", ".")) else s + " ." for s in said]
    for distraction in rng.sample(_DISTRACTIONS, rng.choice((0, 1, 1, 2, 2, 3))):
        sentences.insert(rng.randint(0, len(sentences)), distraction.format(
            day=rng.choice(_WEEKDAYS), person=rng.choice(_PEOPLE), topic=rng.choice(_TOPICS)))
    greeting = rng.choice(("hi {}", "hello {}", "dear {}")).format(rng.choice(_PEOPLE))
    closing = rng.choice(("thanks , {}", "best , {}", "cheers , {}")).format(rng.choice(_PEOPLE))
    return " ".join([greeting + " ,", *sentences, closing]), subject


def _make_summarization(rng: random.Random, counts: tuple) -> dict[str, str]:
    splits = _draw(rng, lambda r, split: [_email(r)], counts, key=lambda pair: pair[0])
    return {split: "".join(json.dumps({"source": source, "target": target}) + "\n" for source, target in pairs)
            for split, pairs in zip(SPLITS, splits, strict=True)}


# ---------------------------------------------------------------------------------------------------- the tasks

_TASKS = {
    "lm": _Task("lm", {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"},
                {"tiny": (600,), "small": (None,)}, _make_lm,
                "--tokenizer char --arch lstm --embedding-size 64 --hidden-size 256 --layers 1 --seq-len 64 "
                "--batch-size 32 --lr 3e-3 --epochs 2"),
    "pos": _Task("tagger", {option: f"{option}.conllu" for option in SPLITS},
                 {"tiny": (300, 50, 50), "small": (3000, 300, 300)}, _make_pos,
                 "--format conllu --encoder lstm --char-features none --embedding-size 50 --hidden-size 64 "
                 "--epochs 5"),
    "ner": _Task("tagger", {option: f"{option}.conll" for option in SPLITS},
                 {"tiny": (300, 50, 50), "small": (3000, 300, 300)}, _make_ner,
                 "--format conll --encoder lstm --char-features cnn --embedding-size 50 --hidden-size 64 "
                 "--epochs 5"),
    "sentiment": _Task("classifier", {option: f"{option}.tsv" for option in SPLITS},
                       {"tiny": (400, 100, 100), "small": (4000, 400, 400)}, _make_sentiment,
                       "--format tsv --arch gru --bidirectional --embedding-size 64 --hidden-size 64 --dropout 0.2 "
                       "--lr 3e-3 --epochs 5"),
    "translation": _Task("seq2seq", {f"{split}_{side}": f"{split}.{side}" for split in SPLITS
                                     for side in ("src", "tgt")},
                         {"tiny": (400, 50, 50), "small": (5000, 300, 300)}, _make_translation,
                         "--arch gru --attention dot --bidirectional --embedding-size 64 --hidden-size 128 "
                         "--epochs 8"),
    "summarization": _Task("seq2seq", {option: f"{option}.jsonl" for option in SPLITS},
                           {"tiny": (300, 50, 50), "small": (3000, 300, 300)}, _make_summarization,
                           "--format jsonl --arch gru --attention dot --bidirectional --embedding-size 64 "
                           "--hidden-size 128 --epochs 8"),
}
