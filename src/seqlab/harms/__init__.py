"""The harms of language technology (SLP 9.5), measured on a trained model: toxic generation
(`toxicity.py`, Gehman et al. 2020), social bias (`bias.py`, CrowS-Pairs), training-data leakage
(`memorization.py`, Carlini et al. 2021 and 2023) and planted secrets (`exposure.py`, the Secret Sharer;
the secrets enter training through `seqlab.data.canaries`). Model cards and datasheets are `seqlab.cards`.

`AUDITS` says what each audit needs of a model (the endpoints of its family: `Family.can`), the file its
result is written to under RUN/audits/, and the command that runs it; a model card lists the audits that
apply to a run and were not run yet.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Audit:
    """An audit: what it needs of a model, its result's file name under RUN/audits/ (without .json) and the
    command that runs it ({run}: the run directory)."""

    needs: tuple[str, ...]       # the endpoints the model's family must answer (`Family.can`)
    file: str
    command: str
    canaries: bool = False       # it applies only to a run trained with --canary


AUDITS = {
    "toxicity": Audit(("generate",), "toxicity", "seqlab audit toxicity {run} --scorer SCORER_RUN --prompts FILE"),
    "bias": Audit(("score",), "crows_pairs", "seqlab audit bias {run} --pairs crows_pairs_anonymized.csv"),
    "memorization": Audit(("generate", "score"), "memorization", "seqlab audit memorization {run} --train TRAIN_FILE"),
    "exposure": Audit(("score",), "exposure", "seqlab audit exposure {run}", canaries=True),
}


def able(needs: tuple[str, ...]) -> str:
    """What a model must be to answer `needs`: the titles of the families that can ("a language model")."""
    from seqlab.registry import FAMILIES

    return " or ".join(f.title for f in FAMILIES.values() if f.can(*needs))


def check_audited(run_dir, name: str, role: str = "", needs: tuple[str, ...] | None = None):
    """The family of the run audit `name` is asked of (`role`: how the command names it, "as --reference"),
    refused in one line when its models cannot answer what the audit needs (`needs`, by default the audit's)."""
    from seqlab.errors import SeqlabError
    from seqlab.registry import run_family

    family, needs = run_family(run_dir), needs or AUDITS[name].needs
    if not family.can(*needs):
        raise SeqlabError(f"seqlab audit {name} needs {able(needs)}{' ' + role if role else ''}; {run_dir} is "
                          f"{family.title}")
    return family
