"""The lab's regimes (``--regime``): where every arm of a claim starts and which policy trains.

* ``mlp`` (the default): the MLP policy from its seeded initial network, the ``countdown`` preset and the
  richest feature observation (:mod:`benchmarks.lab.base`); results in ``benchmarks/results/lab/``.
* ``r1``: the causal transformer from the R1 recipe's base of each seed, the
  ``transformer`` preset, ``observation="tokens"`` (:mod:`benchmarks.lab.base_model`); the length and
  entropy claims rerun at 300k env steps per arm, and Yue et al.'s pass@k claim
  (:mod:`benchmarks.lab.yue`); results in ``benchmarks/results/lab/r1/``.

A regime is data: its claims (the same claim modules, with the regime's budget and analysis settings),
its default seeds, its subfolder, how it makes an arm's task, and the sentences of its table's note.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.core.executor import Run, run_all
from benchmarks.core.store import RunFileError, check_run
from benchmarks.lab.base import BASE, BASE_PRESET, ENV_ID, ENV_KWARGS, Arm, Claim
from benchmarks.lab.claims import CLAIMS
from benchmarks.lab.runner import run_for

__all__ = ["MLP", "R1", "REGIMES", "Regime", "regime_named"]

#: What a regime needs to build its tasks: per seed, the base's stage-1 task and its record (r1 only).
Bases = Mapping[int, tuple[Run, dict[str, Any]]]


@dataclass(frozen=True)
class Regime:
    name: str
    claims: dict[str, Claim]
    seeds: str  #: the default ``--seeds``
    subfolder: str  #: under the lab's output folder ("" = the folder itself)
    env_kwargs: dict[str, Any]  #: the env's (for the single-answer floor and the note)
    policy: str
    preset: str
    preset_values: dict[str, Any]
    seeds_note: str  #: the note's first sentence: which seeds, what was chosen on which
    start_note: str  #: where every arm starts
    reads_earlier: bool = False  #: run files of an earlier code version are read (benchmarks.lab.legacy)
    #: r1: the base's cold start and evaluation (None: the R1 study's); tests make them tiny.
    sft: dict[str, Any] | None = None
    base_eval: dict[str, Any] | None = None
    extra_notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def needs_bases(self) -> bool:
        return self.name != "mlp"

    def base_runs(self, seeds: Sequence[int]) -> list[Run]:
        from benchmarks.lab.base_model import r1_base_runs

        return r1_base_runs(seeds, self.sft, self.base_eval)

    def bases(self, seeds: Sequence[int], cache: Path, *, train: bool,
              **executor: Any) -> dict[int, Any] | None:
        """Per seed, the base's task and record: trained (or found) in ``cache`` through the executor
        when ``train``, else read from it (None if one is missing). Empty for a regime without bases."""
        if not self.needs_bases:
            return {}
        tasks = self.base_runs(seeds)
        if train:
            got = run_all(tasks, cache, desc="bases", **executor)
            if got.failures:
                raise RuntimeError(f"{len(got.failures)} base(s) failed:\n" + "\n".join(got.failures))
            return {t.spec["seed"]: (t, got.records[t.key]) for t in tasks}
        out = {}
        for t in tasks:
            try:
                record = check_run(Path(cache) / "runs" / f"{t.key}.json", t.key, t.fingerprint)
            except RunFileError:
                return None
            out[t.spec["seed"]] = (t, record)
        return out

    def task(self, claim: Claim, arm: Arm, seed: int, budget: int, bases: Bases) -> Run:
        """The executor task of ``arm`` of ``claim`` on ``seed`` for ``budget`` env steps."""
        if not self.needs_bases:
            if not arm.rl:
                raise ValueError(f"arm {arm.name!r} has rl=False, which needs a base: use --regime r1")
            return run_for(arm, seed, budget)
        from benchmarks.lab.base_model import run_for_base

        base, record = bases[seed]
        return run_for_base(arm, seed, budget, base, record["weights"], claim.eval_k)

    def floor(self) -> float:
        from benchmarks.lab.base import single_answer_floor

        return single_answer_floor(json.dumps(self.env_kwargs, sort_keys=True))

    def setting_note(self, seeds: Sequence[int]) -> str:
        seeds_text = ", ".join(map(str, seeds))
        return (f"{self.seeds_note.format(seeds=seeds_text)} Env `{ENV_ID}` with "
                f"`{json.dumps(self.env_kwargs)}`, grammar masks on, "
                f"`policy=\"{self.policy}\"`; {self.start_note} the `{self.preset}` preset "
                f"(`{json.dumps(self.preset_values, sort_keys=True)}`) and changes what its claim names."
                + "".join(f" {n}" for n in self.extra_notes))


MLP = Regime("mlp", CLAIMS, "100-107", "", ENV_KWARGS, "mlp", BASE_PRESET, BASE,
             "Seeds {seeds} (settings chosen on seeds 0-1; seeds 0-9 are reserved for choosing).",
             "every arm starts from", reads_earlier=True)


def _r1_regime() -> Regime:
    from agents.grpo import PRESETS
    from benchmarks.core.bases import RECIPE_SFT
    from benchmarks.lab import dapo, dr_grpo, kimi, yue
    from benchmarks.lab.base_model import ENV_KWARGS as R1_ENV_KWARGS

    budget = 300_000
    claims = {
        "dr_grpo": dataclasses.replace(dr_grpo.CLAIM, budget=budget),
        # DAPO's "a given success": the base's rollout solve rate is already ~0.34 (its train sampled
        # success), so the MLP lab's 0.3 is met at once; the R1 study's "base + 0.1" instead, set before
        # any run of this regime.
        # mu = 4 epochs per batch in every DAPO arm (the MLP lab's, whose preset leaves mu to the paper
        # preset's 4): the transformer preset's earlier mu = 1 took one full-batch step per batch, where
        # the ratio is 1 and no clip ever binds (clip fraction 0.000 in every run; symmetric and clip-higher
        # then train bit for bit alike), so the claim could not be tested.
        "dapo": dataclasses.replace(dapo.CLAIM, budget=budget, params={"threshold": 0.45},
                                    arms=tuple(dataclasses.replace(a, overrides={**a.overrides, "epochs": 4})
                                               for a in dapo.CLAIM.arms)),
        "kimi": dataclasses.replace(kimi.CLAIM, budget=budget),
        "yue": yue.CLAIM,
    }
    sft = RECIPE_SFT
    return Regime(
        "r1", claims, "10-14", "r1", R1_ENV_KWARGS, "transformer", "transformer",
        dict(PRESETS["transformer"]),
        "Seeds {seeds} (the R1 study's reported seeds; nothing was tuned here: the preset is the R1 study's, "
        "the arms are the MLP lab's claims').",
        f"every arm starts from its seed's R1 base (the transformer cold-started on {sft['n']:,} train-split "
        f"solutions, {sft['epochs']} epochs: `benchmarks.core.bases:base_run`, the R1 study's cached run) "
        "with",
        extra_notes=(
            "The preset's `length_weight=0` is what Dr. GRPO's and DAPO's arms keep (their claims are about "
            "the loss aggregation and the clip, and the R1 recipe pays no length term); Kimi's arms set it "
            "explicitly (0 and 0.1); DAPO's arms set `beta=0` (DAPO drops the KL term; the preset's is "
            "0.01). "
            "DAPO's arms set `epochs=4` (mu, the MLP lab's), with the preset's 4 minibatches per batch: at "
            "the earlier preset's mu = 1 (one full-batch step) every step was on-policy, the ratio 1, and "
            "no clip ever bound (clip fraction 0 in every run of seeds 10-12, symmetric and clip-higher "
            "identical). DAPO's \"given success\" is rollout "
            "solve rate 0.45 (the base's ~0.34 + 0.1; the MLP lab's 0.3 is met at the first iteration).",
            "Yue et al.'s base arm is the base alone (0 RL steps); its GRPO arm is the preset unchanged."),
    )


R1 = _r1_regime()
REGIMES: dict[str, Regime] = {r.name: r for r in (MLP, R1)}


def regime_named(name: str) -> Regime:
    """The regime called ``name``, else ``ValueError`` naming it and the choices."""
    if name not in REGIMES:
        raise ValueError(f"--regime {name!r}: unknown regime; choose from {list(REGIMES)}")
    return REGIMES[name]


def budget_of(regime: Regime, name: str, scale: float) -> int:
    return max(1, int(round(regime.claims[name].budget * scale)))
