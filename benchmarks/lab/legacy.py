"""Run files of an earlier code version, read for analysis only (never reused to skip a run).

The committed lab runs of the first five claims were made before ``GRPOConfig`` gained the fields
``seq_mean_rows``, ``top_entropy_quantile`` and ``sapo_tau_pos`` / ``sapo_tau_neg``, and before
``kl_cov_coef``'s default moved from 1.0 to 0.1; ``benchmarks.tools.migrate_runs`` wrapped them with an
"unrecorded" library version. So no current run key names them, and the executor would train them
again. Their records are still exactly the runs the arms describe: every field they record equals the
arm's current setting, each field added since is at its default (the defaults switch the new variants
off, reproducing the old code's behaviour), and the one changed default is read only by a policy loss
no such arm uses. :func:`earlier_records` finds an arm's record by that rule, so the old claims are
re-analysed from their committed records (figures, verdicts, the "no signal" rule) without retraining.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.core.store import RunFileError, check_run
from benchmarks.lab.base import Arm, run_key

__all__ = ["earlier_records", "matches_earlier"]

#: Config fields whose default changed since the earlier runs, with the policy losses that read them:
#: a stored value that differs is harmless when the arm's loss is not one of these (``kl_cov_coef`` moved
#: from 1.0 to verl's 0.1; only KL-Cov reads it).
CHANGED_DEFAULTS: dict[str, tuple[str, ...]] = {"kl_cov_coef": ("kl_cov",)}


@functools.cache
def _defaults() -> dict[str, Any]:
    from agents import GRPOConfig
    from agents.grpo import UNSET

    # A field left UNSET (clip_eps_high) resolves to None on the mlp policy, which is what a record
    # made before the field existed ran with.
    return {f.name: None if f.default is UNSET else f.default for f in dataclasses.fields(GRPOConfig)}


def matches_earlier(stored: dict[str, Any], key: dict[str, Any]) -> bool:
    """True when the run key ``stored`` (of an earlier code version) describes the run ``key`` (this
    code's) asks for: every non-config field equal, every config field ``stored`` has equal (or a
    changed default the run does not read), every config field it lacks at its default here."""
    if set(stored) != set(key) or any(stored[f] != key[f] for f in key if f != "config"):
        return False
    old, new = stored["config"], key["config"]
    if set(old) - set(new):
        return False  # a field this code no longer has: another code base
    for name, value in new.items():
        if name not in old:
            if value != _defaults().get(name, object()):
                return False
        elif old[name] != value:
            readers = CHANGED_DEFAULTS.get(name)
            if readers is None or new["policy_loss"] in readers:
                return False
    return True


def _index(folder: Path) -> list[dict[str, Any]]:
    """Every lab record in ``folder/runs`` that passes its checksum and name checks (fingerprint not
    compared: that is what differs); a file that fails is left where it is."""
    records = []
    for path in sorted((Path(folder) / "runs").glob("*.json")):
        try:
            rec = check_run(path)
        except RunFileError:
            continue
        if isinstance(rec.get("key"), dict) and "iterations" in rec:
            records.append(rec)
    return records


def earlier_records(arms: Sequence[Arm], seeds: Sequence[int], budget: int, folder: Path
                    ) -> dict[str, list[dict[str, Any]]] | None:
    """The records of ``arms`` on ``seeds`` among ``folder``'s run files of an earlier code version
    (:func:`matches_earlier`), by arm, the earlier file of an arm x seed taking precedence where the
    folder also has this code's (they record the same run; the lab's tests check that they are equal);
    None unless every arm x seed has exactly one."""
    index = _index(folder)
    out: dict[str, list[dict[str, Any]]] = {}
    for arm in arms:
        for seed in seeds:
            key = run_key(arm, seed, budget)
            found = [r for r in index if matches_earlier(r["key"], key)]
            # Where files of several code versions record the run, the earliest (the fewest config fields)
            # is read, so a claim's figures (its timings included) stay those it was first analysed from.
            fewest = min((len(r["key"]["config"]) for r in found), default=0)
            found = [r for r in found if len(r["key"]["config"]) == fewest]
            if len(found) != 1:
                return None
            out.setdefault(arm.name, []).append(found[0])
    return out
