"""A model card (`seqlab.cards.card`) as Markdown: MODEL_CARD.md, the sections of Mitchell et al. (2019) in
their order, the training data section after Gebru et al.'s datasheets."""

from __future__ import annotations

import json
from typing import Any


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _number(value: object, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def _duration(seconds: object) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{seconds:.1f} s"


def _wall_time(details: dict[str, Any]) -> str:
    """`5 min 12 s, of which start-up 41.0 s` (a card of an earlier seqlab: the duration alone)."""
    startup = details.get("startup_s")
    return _duration(details["wall_time_s"]) + (f", of which start-up {_duration(startup)}"
                                                if isinstance(startup, (int, float)) else "")


def to_markdown(card: dict[str, Any]) -> str:
    """The card as Markdown, the sections of Mitchell et al. (2019) in their order."""
    details, data, evaluation = card["model_details"], card["training_data"], card["evaluation"]
    use, ethics = card["intended_use"], card["ethical_considerations"]
    out = [f"# Model card: {card['run_dir']}", "",
           f"_{details['title'].capitalize()} trained by seqlab {details['seqlab_version']}; this card was written "
           f"{card['written']} by seqlab {details['card_seqlab_version']} from the run directory's own files "
           "(sections after Mitchell et al. 2019, \"Model Cards for Model Reporting\"; the training data section "
           "after Gebru et al., \"Datasheets for Datasets\")._", "", "## Model details", "",
           _row("", ""), _row("---", "---")]
    sizes = ", ".join(f"{k} {_number(v)}" for k, v in details["model"].items() if k != "arch")
    rows = [("task", f"{details['task']} ({details['title']})"), ("architecture", details["architecture"] or "-"),
            ("sizes and options", sizes), ("parameters", _number(details["parameters"])),
            ("vocabulary", ", ".join(f"{k} {_number(v)}" for k, v in details["vocabulary"].items()) or "-"),
            ("trained", details["trained"] or "-"), ("device", details["device"] or "- (not recorded)"),
            ("precision", details.get("precision") or "- (not recorded)"),
            ("wall time", _wall_time(details)), ("steps", _number(details["steps"])),
            ("epochs", _number(details["epochs"])), ("tokens seen", _number(details["tokens_seen"])),
            ("tokens / s", _number(details["tokens_per_s"], 3)),
            ("best weights", f"{details['best']['metric'] or '-'} at step {_number(details['best']['step'])}")]
    fixed = details.get("time_schedule")
    if fixed:
        rows.append(("schedule", f"{_number(fixed['total_steps'])} steps, fixed at step {fixed['at_step']} from "
                                 f"--max-time {fixed['max_time']:g} s: {fixed['seconds_per_step']:g} s a step and "
                                 f"{fixed['seconds_per_evaluation']:g} s an evaluation, measured once"))
    out += [_row(k, str(v).replace("|", "\\|")) for k, v in rows]
    out += ["", "Trains again with:", "", "```", details["command"], "```", "",
            "<details><summary>The resolved configuration (config.json)</summary>", "", "```json",
            json.dumps(details["config"], indent=2), "```", "", "</details>", ""]
    out += ["## Training data", ""]
    if data.get("bundled"):
        out += [f"Trained on {data['bundled']}.", ""]
    if data.get("sources"):            # a prepared folder, or files too big to read whole: what the manifest says
        out += [_row("source", "path", "bytes", "SHA-256"), _row("---", "---", "---:", "---")]
        out += [_row(name, f"`{f.get('path', f.get('name', '?'))}`", _number(f.get("bytes", 0)),
                     f"`{f.get('sha256', '-')}`") for name, f in data["sources"].items()]
    if data["files"]:
        out += [_row("file", "path", "bytes", "lines", "units", "tokens", "types", "duplicate lines"),
                _row(*["---"] * 2, *["---:"] * 6)]
        for name, f in data["files"].items():
            dup = f["duplicates"]
            out.append(_row(name, f"`{f['path']}`", _number(f["bytes"]), _number(f["lines"]),
                            f"{_number(f['units'])} {f['unit']}", _number(f["tokens"]), _number(f["types"]),
                            f"{_number(dup['count'])} ({dup['share']:.2%})"))
        out += ["", "SHA-256 of each file:", ""] + [f"- {name}: `{f['sha256']}`" for name, f in data["files"].items()]
        out += ["", "Character set (characters by class; most frequent non-ASCII):", ""]
        for name, f in data["files"].items():
            classes = ", ".join(f"{k.replace('_', ' ')} {_number(v)}" for k, v in f["charset"]["classes"].items())
            top = " ".join(f"`{e['char']}` ({_number(e['count'])})" for e in f["charset"]["top_non_ascii"][:5])
            out.append(f"- {name}: {classes}" + (f"; {top}" if top else ""))
    out += ["", f"Splits, as the task reads them ({data['unit']}); duplicates are exact repeats within the split "
            "(after whitespace normalisation):", "",
            _row("split", data["unit"], "duplicates", "labels (most frequent)"),
            _row("---", "---:", "---:", "---")]
    for name, split in data["splits"].items():
        dups = "; ".join(f"{'' if side == 'text' else side + ' '}{_number(d['count'])} ({d['share']:.2%})"
                         for side, d in split["duplicates"].items())
        labels = split.get("labels", {})
        total = sum(labels.values()) or 1
        shown = ", ".join(f"{k} {v / total:.1%}" for k, v in list(labels.items())[:8])
        more = f" (+{len(labels) - 8} more)" if len(labels) > 8 else ""
        out.append(_row(name, _number(split["units"]), dups, (shown + more) or "-"))
    if data["contamination"]:
        out += ["", "Contamination of each evaluation split by train (Brown et al. 2020, app. C: a unit is "
                "contaminated when it shares an n-gram of 13 words, or 50 characters for character models, with "
                "the training split; units shorter than n count only when verbatim):", "",
                _row("split", "units", "shorter than n", "verbatim in train", "n-gram overlap",
                     "n-gram overlap, units >= n", "unseen tokens (chars)"),
                _row("---", *["---:"] * 6)]
        for name, check in data["contamination"].items():
            oov = data["oov"].get(name, {})
            out.append(_row(name, _number(check["eval_lines"]), _number(check["short_lines"]),
                            f"{_number(check['verbatim'])} ({check['verbatim_share']:.2%})",
                            f"{_number(check['ngram'])} ({check['ngram_share']:.2%}) [{check['n']}-{check['unit']}]",
                            f"{_number(check['long_ngram'])} ({check['long_ngram_share']:.2%})",
                            f"{oov.get('token_rate', 0):.2%}"))
    found = data.get("canaries")
    if found:
        out += ["", f"**Canaries**: {found.get('secrets', '?')} random secrets of the template "
                f"`{found.get('template')}` were inserted into the training data, repeated "
                f"{', '.join(map(str, found.get('repeats', [])))} times (their values are kept in canaries.json, "
                "not here)."]
    out += ["", "## Evaluation", ""]
    if not evaluation["final"]:
        out += ["No final evaluation recorded (training did not finish).", ""]
    else:
        resamples = evaluation.get("resamples") or 0
        out += ["The best weights' figures on each split the run scored"
                + (f", with percentile bootstrap 95% intervals ({resamples:,} resamples of the split's "
                   f"{(data or {}).get('unit') or 'items'})." if evaluation["intervals"] else "."), "",
                _row("split", "metric", "value", "95% interval"), _row("---", "---", "---:", "---")]
        for split, figures in evaluation["final"].items():
            intervals = evaluation["intervals"].get(split, {})
            for metric, value in figures.items():
                interval = intervals.get(metric)
                shown = f"[{_number(interval['low'])}, {_number(interval['high'])}]" if interval else ""
                out.append(_row(split, metric, _number(value), shown))
            for metric, interval in intervals.items():
                if metric not in figures:
                    out.append(_row(split, metric, _number(interval["value"]),
                                    f"[{_number(interval['low'])}, {_number(interval['high'])}]"))
        out.append("")
    out += ["## Intended use", "", use["intended"], "", "## Out-of-scope use", "", use["out_of_scope"], ""]
    if use["notes"]:
        out += ["## Notes from the model's authors", "", use["notes"], ""]
    out += ["## Ethical considerations", "", "Harms of language technology that apply here (SLP 9.5):", ""]
    out += [f"- {risk}" for risk in ethics["risks"]]
    if ethics["audits"]:
        out += ["", "Audits run on this model:", "", _row("audit", "figures", "command"), _row("---", "---", "---")]
        for name, audit in ethics["audits"].items():
            figures = ", ".join(f"{k} {_number(v)}" for k, v in audit["figures"].items()
                                if not isinstance(v, (dict, list))) or "see " + audit["file"]
            out.append(_row(name, figures, f"`{audit['command']}`" if audit["command"] else "-"))
    if ethics["audits_not_run"]:
        out += ["", "Audits not run on this model yet:", ""] + [f"- `{c}`" for c in ethics["audits_not_run"]]
    out += ["", "## Caveats and recommendations", ""] + [f"- {c}" for c in card["caveats"]] + [""]
    return "\n".join(out)
