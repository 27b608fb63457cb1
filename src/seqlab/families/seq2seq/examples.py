"""Sequence to sequence's example datasets (`seqlab examples`; the driver is `seqlab.examples`):

    translation    a toy subject-object-verb language with adjectives after their noun, postpositions and relative
                   clauses, and its English, as aligned .src / .tgt files (4 to 20 tokens)
    summarization  JSON lines {"source": an email, "target": its subject line}, the subject read off (or composed from)
                   one sentence of the email among distractors that name other days and topics

Why they are built so (the family's simplest model misses something its textbook model learns):
- translation: the English puts the verb second, the adjectives before their noun (in mirror order), the
  postposition before its phrase and a leading adverb last, so the alignment crosses: attention shows it.
- summarization: the subject depends on which sentence holds the request (and, in a moved call, on which of
  two days is the new one), so a model must find it among sentences that mention other days and topics.
"""

from __future__ import annotations

import json
import random

from seqlab.data.examples import SPLITS, ExampleTask, draw

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
    splits = draw(rng, lambda r, split: [_toy_pair(r)], counts, key=lambda pair: pair[0])
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
    splits = draw(rng, lambda r, split: [_email(r)], counts, key=lambda pair: pair[0])
    return {split: "".join(json.dumps({"source": source, "target": target}) + "\n" for source, target in pairs)
            for split, pairs in zip(SPLITS, splits, strict=True)}


# ---------------------------------------------------------------------------------------------------- the datasets

EXAMPLES = {
    "translation": ExampleTask(
        summary="a toy subject-object-verb language and its English, aligned .src/.tgt (seqlab train seq2seq)",
        files={f"{split}_{side}": f"{split}.{side}" for split in SPLITS for side in ("src", "tgt")},
        counts={"tiny": (400, 50, 50), "small": (5000, 300, 300)}, make=_make_translation,
        recipe="--arch gru --attention dot --bidirectional --embedding-size 64 --hidden-size 128 --epochs 8"),
    "summarization": ExampleTask(
        summary="emails and their subject lines, JSON lines source/target (seqlab train seq2seq)",
        files={option: f"{option}.jsonl" for option in SPLITS},
        counts={"tiny": (300, 50, 50), "small": (3000, 300, 300)}, make=_make_summarization,
        recipe="--format jsonl --arch gru --attention dot --bidirectional --embedding-size 64 "
               "--hidden-size 128 --epochs 8"),
}
