"""Parallel text and the sequence-to-sequence metrics: aligned files, files of pairs, their bad inputs,
and BLEU / chrF / ROUGE checked against the formulas computed by hand."""

import gzip
import math
from collections import Counter

import pytest

from seqlab.errors import SeqlabError
from seqlab.families.seq2seq.parallel import read_aligned, read_paired
from seqlab.metrics import bleu, chrf, rouge


def test_parallel_aligned_files_gzip_and_sources_only(tmp_path):
    (tmp_path / "a.de").write_text("ein mann .\nzwei hunde .\n")
    (tmp_path / "a.en.gz").write_bytes(gzip.compress(b"a man .\ntwo dogs .\n"))
    pairs = read_aligned(tmp_path / "a.de", tmp_path / "a.en.gz")
    assert [(p.source, p.target, p.line) for p in pairs] == [("ein mann .", "a man .", 1),
                                                             ("zwei hunde .", "two dogs .", 2)]
    assert [p.target for p in read_aligned(tmp_path / "a.de", None)] == [None, None]


def test_parallel_bad_inputs_name_both_counts_or_the_line(tmp_path):
    (tmp_path / "s").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "t").write_text("one\ntwo\n")
    with pytest.raises(SeqlabError, match="has 3 lines but .* has 2"):
        read_aligned(tmp_path / "s", tmp_path / "t")
    (tmp_path / "s").write_text("eins\n\ndrei\n")
    (tmp_path / "t").write_text("one\ntwo\nthree\n")
    with pytest.raises(SeqlabError, match="source .*s:2: empty line"):
        read_aligned(tmp_path / "s", tmp_path / "t")


def test_parallel_one_file_of_pairs_tsv_and_jsonl(tmp_path):
    (tmp_path / "p.tsv").write_text("source\ttarget\nein mann\ta man\n")
    assert read_paired(tmp_path / "p.tsv", "tsv")[0].target == "a man"
    (tmp_path / "p.jsonl").write_text('{"email": "Hi Bob,\\nthe meeting moved.", "subject": "meeting"}\n')
    pair = read_paired(tmp_path / "p.jsonl", "jsonl", "email", "subject")[0]
    assert (pair.source, pair.target) == ("Hi Bob,\nthe meeting moved.", "meeting")
    (tmp_path / "bad.jsonl").write_text('{"email": "Hi"}\n')
    with pytest.raises(SeqlabError, match="bad.jsonl:1: no field 'subject'"):
        read_paired(tmp_path / "bad.jsonl", "jsonl", "email", "subject")
    assert read_paired(tmp_path / "bad.jsonl", "jsonl", "email", "subject", with_targets=False)[0].source == "Hi"


def hand_bleu(hypotheses, references):
    """Papineni et al. 2002 on whitespace tokens: clipped n-gram precisions (n = 1..4), their geometric
    mean, and the brevity penalty exp(1 - r / c) when c < r."""
    matches, totals = [0] * 4, [0] * 4
    c = r = 0
    for h, ref in zip(hypotheses, references, strict=True):
        h, ref = h.split(), ref.split()
        c, r = c + len(h), r + len(ref)
        for n in range(1, 5):
            hn = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rn = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
            matches[n - 1] += sum(min(k, rn[g]) for g, k in hn.items())
            totals[n - 1] += max(len(h) - n + 1, 0)
    precision = math.exp(sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / 4)
    return 100 * precision * (1.0 if c >= r else math.exp(1 - r / c))


def test_metrics_bleu_equals_the_formula_on_tokenised_text():
    hypotheses = ["a man is sleeping on a bench .", "two dogs are playing in the snow together ."]
    references = ["a man sleeps on a park bench .", "two dogs are playing in the snow ."]
    assert bleu(hypotheses, references, tokenize="none") == pytest.approx(hand_bleu(hypotheses, references), abs=1e-9)
    assert bleu(references, references) == pytest.approx(100.0)
    assert bleu(["A Man sleeps on a bench."], ["a man sleeps on a bench."], lowercase=True) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu(hypotheses, references[:1])


def test_metrics_chrf_and_rouge():
    assert chrf(["the cat"], ["the cat"]) == pytest.approx(100.0)
    assert 0 < chrf(["the cats"], ["the cat"]) < 100
    scores = rouge(["the cat sat"], ["the cat sat on the mat"], stemmer=False)
    # ROUGE-1: 3 of 3 hypothesis words, 3 of 6 reference words; ROUGE-2: 2 of 2 bigrams, 2 of 5;
    # ROUGE-L: a longest common subsequence of 3
    assert scores["rouge1"] == pytest.approx(100 * 2 * 1 * 0.5 / 1.5)
    assert scores["rouge2"] == pytest.approx(100 * 2 * 1 * 0.4 / 1.4)
    assert scores["rougeL"] == pytest.approx(100 * 2 * 1 * 0.5 / 1.5)
