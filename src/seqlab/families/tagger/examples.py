"""The tagger's example datasets (`seqlab examples`; the driver is `seqlab.examples`):

    pos            CoNLL-U sentences of a small English grammar (UPOS in column 4) whose commonest words are ambiguous:
                   "can" AUX / NOUN / VERB, "saw", "flies", "that" DET / SCONJ / PRON, "like" VERB / ADP, "to" PART /
                   ADP, "has" AUX / VERB, plural nouns that are also verbs ("ducks")
    ner            CoNLL-2003 columns (word POS chunk NER, IOB2 PER / LOC / ORG / MISC) of news-like templates filled
                   with names of one to four tokens; "Jordan" and "Washington" are people and places

Why they are built so (the family's simplest model misses something its textbook model learns):
- pos: a tagger that reads each word alone (the most frequent tag of each form) is wrong on every ambiguous
  form used in its rarer role; a BiLSTM reads the context (SLP 9.2.4 / 13.3.1).
- ner: a quarter of the names (people, places, organisations, MISC) never appear in training, and "Jordan" and
  "Washington" are both people and places: the entity comes from the context and the characters of the tokens,
  not from memory (a tagger that memorises each word's tag reaches about 62 F1 on the test split).
"""

from __future__ import annotations

import random

from seqlab.data.examples import SPLITS, ExampleTask, draw

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
    splits = draw(rng, lambda r, split: [_pos_sentence(r)], counts, key=lambda s: " ".join(w[0] for w in s))
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
    splits = draw(rng, lambda r, split: [_ner_sentence(r, split)], counts, key=lambda s: " ".join(row[0] for row in s))
    return {split: "-DOCSTART- -X- -X- O\n\n" + "\n".join("".join(" ".join(row) + "\n" for row in sentence)
                                                         for sentence in sentences)
            for split, sentences in zip(SPLITS, splits, strict=True)}


# ---------------------------------------------------------------------------------------------------- the datasets

EXAMPLES = {
    "pos": ExampleTask(
        summary="part-of-speech tags (CoNLL-U) of a toy English grammar full of ambiguous words (seqlab train "
                "tagger)",
        files={option: f"{option}.conllu" for option in SPLITS},
        counts={"tiny": (300, 50, 50), "small": (3000, 300, 300)}, make=_make_pos,
        recipe="--format conllu --encoder lstm --char-features none --embedding-size 50 --hidden-size 64 "
               "--epochs 5"),
    "ner": ExampleTask(
        summary="named entities PER/LOC/ORG/MISC in CoNLL-2003 columns, from news-like templates (seqlab train "
                "tagger)",
        files={option: f"{option}.conll" for option in SPLITS},
        counts={"tiny": (300, 50, 50), "small": (3000, 300, 300)}, make=_make_ner,
        recipe="--format conll --encoder lstm --char-features cnn --embedding-size 50 --hidden-size 64 "
               "--epochs 5"),
}
