"""The error reference (reference/errors.md): every message seqlab builds, found in the source by
docs/hooks/error_reference.py, is explained by exactly one entry of docs/hooks/errors_explained.py (its group, cause
and fix), no entry is stale, and no message shows Python code where it names what the user gave."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))

import error_reference  # noqa: E402
import errors_explained  # noqa: E402


def test_error_reference_covers_every_message_by_exactly_one_entry():
    covered, missing, twice = error_reference.coverage()
    assert not missing, "no entry explains: " + "; ".join(f"{m.file}:{m.line} {m.text}" for m in missing[:10])
    assert not twice, "more than one entry explains: " + "; ".join(
        f"{m.file}:{m.line} {m.text} <- {[e.title for e in entries]}" for m, entries in list(twice.items())[:10])
    assert sum(len(v) for v in covered.values()) > 600


def test_error_reference_has_no_stale_entry():
    covered, _, _ = error_reference.coverage()
    stale = [entry.title for entry, covers in covered.items() if not covers]
    assert not stale, f"entries that cover no message any more: {stale}"


def test_error_reference_entries_have_a_group_a_title_a_cause_and_a_fix():
    titles = set()
    for entry in errors_explained.ENTRIES:
        assert entry.group in errors_explained.GROUPS, entry.title
        assert entry.title.strip() and entry.cause.strip() and entry.fix.strip(), entry.title
        assert (entry.group, entry.title) not in titles, f"two entries titled {entry.title!r}"
        titles.add((entry.group, entry.title))
    covered, _, _ = error_reference.coverage()
    assert all(any(e.group == group for e in covered) for group in errors_explained.GROUPS), "a group with no entry"


def test_error_reference_placeholders_are_words_not_python():
    for message in error_reference.messages(errors_explained.NAMES):
        for field in re.findall(r"‹([^›]*)›", message.text):
            assert field.strip() and not re.search(r"[(.\[{]", field), \
                f"{message.file}:{message.line}: the field ‹{field}› reads as code in {message.text!r}"
        assert "{" + "args." not in message.text and "!r}" not in message.text


def test_error_reference_finds_messages_built_in_a_variable_a_helper_or_a_template():
    texts = {m.text for m in error_reference.messages(errors_explained.NAMES)}
    expected = [
        "--resume continues the run in --output and --overwrite replaces it: choose one",   # a module constant
        "‹flag name› applies to ‹flag name› ‹shown› only, not ‹actual›: leave it out",      # a function's return
        "‹place› holds a NUL byte: this looks like a binary file, expected UTF-8 text",     # a helper's SeqlabError
        "--nbest must be between 1 and --beam (‹beam›), got ‹nbest›",                      # an option_error template
        "‹option› expects an integer, got ‹value›",                                         # check_fields' problems
    ]
    for text in expected:
        assert text in texts, text
    assert any("keep its end (--truncate-prompt)" in t for t in texts)                    # an OptionError's flags
    assert not error_reference.unresolved()


def test_error_reference_page_shows_each_message_under_its_group_with_cause_and_fix():
    page = error_reference.page()
    for group in errors_explained.GROUPS:
        assert f"\n## {group}\n" in page
    for message in error_reference.messages(errors_explained.NAMES):
        assert message.text in page, message.text
    assert page.count("**Cause.**") == page.count("**Fix.**") == len(errors_explained.ENTRIES)
    assert "src/seqlab/" not in page


def test_error_reference_names_only_fields_that_exist():
    fields = set()
    for message in error_reference.messages(errors_explained.NAMES):
        for part in message.parts:
            if isinstance(part, error_reference.Field):
                fields |= {part.source, f"{message.file}:{part.source}"}
    stale = [key for key in errors_explained.NAMES if key not in fields]
    assert not stale, f"NAMES for fields no message has any more: {stale}"
