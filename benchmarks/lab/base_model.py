"""The lab's base-model regime (``--regime r1``): every arm starts from the R1 recipe's base.

Per seed, the base is the R1 study's (:func:`benchmarks.core.bases.base_run`: the causal transformer
cold-started by :func:`agents.sft.cold_start` on 100k train-split Countdown-3 solutions), built by the
R1 study's own stage-1 runs (:func:`benchmarks.core.bases.base_runs`), so the run files of its cache
(``benchmark-runs/r1/bases/``, shared with ``python -m benchmarks.r1``) are found and never retrained: a
base is trained once per seed and shared by every arm of every claim. Each arm's config is the
``transformer`` preset plus the arm's overrides (:func:`benchmarks.lab.base.arm_config`), on
``rlvr/Countdown-v0`` with ``observation="tokens"`` and the grammar masks.

A run (:func:`run_from_base`, the executor's ``"benchmarks.lab.base_model:run_from_base"``) loads its
base's weights from its spec (they travel in it, as the R1 study's stage 2 does, so a cluster needs no
shared filesystem), makes them the KL reference, trains for the budget under the lab's
:class:`~benchmarks.lab.runner.GroupObserver`, and records the digest of the network that sampled the
first iteration (so a test can check that RL started from the base) and the held-out scores: greedy,
sampled mean@k and unbiased pass@j for j = 1..k (:meth:`agents.evaluation.SuccessReport.pass_at`), k
being the claim's ``eval_k``. An arm with ``rl=False`` is its base alone (0 RL steps), scored the same way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.core.bases import EVAL, RECIPE_SFT, base_runs
from benchmarks.core.executor import Run
from benchmarks.core.weights import load_weights, state_digest, unpack_weights
from benchmarks.lab.base import EVAL_PROMPTS, KEY_TAG, Arm, arm_config
from benchmarks.lab.runner import GroupObserver, run_name

__all__ = ["BASE_ENV_KWARGS", "ENV_KWARGS", "POLICY", "PRESET", "r1_base_runs", "net_digest", "run_from_base",
           "stored_without_bases", "run_for_base", "weights_digest"]

#: The R1 study's Countdown setting (its base tasks' env kwargs) and the token context the policy reads.
BASE_ENV_KWARGS: dict[str, Any] = {"n_numbers": 3}
ENV_KWARGS: dict[str, Any] = {**BASE_ENV_KWARGS, "observation": "tokens"}
POLICY, PRESET = "transformer", "transformer"


def r1_base_runs(seeds: Sequence[int], sft: Mapping[str, Any] | None = None,
                 evaluation: Mapping[str, Any] | None = None) -> list[Run]:
    """The R1 study's stage-1 run of each seed (its recipe's cold start unless ``sft`` says otherwise;
    its evaluation unless ``evaluation`` does): the same keys and fingerprints as
    ``python -m benchmarks.r1``'s, so its cached bases are reused. The masked base only (the lab has no
    unmasked PPO arm)."""
    return base_runs(list(seeds), {**RECIPE_SFT, **(sft or {})}, env_kwargs=dict(BASE_ENV_KWARGS),
                     evaluation={**EVAL, **(evaluation or {})})


def weights_digest(blob: str) -> str:
    """:func:`~benchmarks.core.weights.state_digest` of a base's packed weights."""
    return state_digest(unpack_weights(blob))


def net_digest(net: Any) -> str:
    """:func:`~benchmarks.core.weights.state_digest` of a network's state dict."""
    return state_digest({k: v.detach().cpu().numpy() for k, v in net.state_dict().items()})


def run_key(arm: Arm, seed: int, budget: int, base: Run, weights: str, eval_k: int) -> dict[str, Any]:
    """Everything that determines a run from a base: the base's task key and ``weights``' digest
    (:func:`weights_digest`) included, so a retrained base makes its arms train again."""
    config = arm_config(dict(_preset()), arm.overrides, POLICY)
    return {
        "format": KEY_TAG,
        "regime": "r1",
        "seed": seed,
        "budget": budget if arm.rl else 0,
        "env_id": "rlvr/Countdown-v0",
        "env_kwargs": ENV_KWARGS,
        "policy": POLICY,
        "policy_kwargs": dict(base.spec["policy_kwargs"]),
        "config": config.to_dict(),
        "base": {"run": base.key, "sft": dict(base.spec["sft"]), "weights": weights},
        "eval": {"prompts": EVAL_PROMPTS, "k": eval_k},
    }


def _preset() -> dict[str, Any]:
    from agents.grpo import PRESETS

    return PRESETS[PRESET]


def run_for_base(arm: Arm, seed: int, budget: int, base: Run, weights: str, eval_k: int) -> Run:
    """The executor task of ``arm`` on ``seed`` from the base ``base`` (its stage-1 task) whose packed
    weights are ``weights``; they ride in the spec, not in the key."""
    key = run_key(arm, seed, budget, base, weights_digest(weights), eval_k)
    return Run("benchmarks.lab.base_model:run_from_base", {"key": key, "base_weights": weights},
               run_name(key), arm=arm.name, label=f"{arm.name} s{seed}")


def run_from_base(spec: dict[str, Any]) -> dict[str, Any]:
    """One arm on one seed from its base: load the weights, GRPO for the budget (none for an ``rl=False``
    arm), score on held-out prompts. Returns the lab's record (no weights)."""
    from benchmarks.core.common import limit_threads

    limit_threads(1, import_torch=True)
    import rlvr_env  # noqa: F401  (registers the env ids)
    from agents import GRPO, GRPOConfig

    key = spec["key"]
    cfg = GRPOConfig.from_dict(key["config"])
    start = time.perf_counter()
    model = GRPO(key["env_id"], cfg, policy=key["policy"], seed=int(key["seed"]),
                 env_kwargs=key["env_kwargs"],
                 policy_kwargs=key["policy_kwargs"])
    policy: Any = model.policy  # the transformer policy (its network, its KL reference)
    load_weights(spec["base_weights"], policy.net)
    policy.restart_from_current()  # the base is the KL reference and RL's start
    loaded = net_digest(policy.net)
    first: dict[str, str] = {}

    def first_policy(event: Any) -> None:  # called before iteration 1's update: the policy that sampled it
        if event.iteration == 1:
            first["policy"] = net_digest(policy.net)
            first["reference"] = net_digest(policy.reference)

    model.add_group_hook(first_policy)
    observer = GroupObserver(model, cfg)
    if key["budget"] > 0:
        model.learn(int(key["budget"]), callback=observer.callback)
    train_seconds = time.perf_counter() - start
    k = int(key["eval"]["k"])
    report = model.success("test", k=k, n_prompts=int(key["eval"]["prompts"]))
    final = {**report.as_dict(), "pass_at": {str(j): v for j, v in report.pass_at(range(1, k + 1)).items()}}
    return {
        "key": key,
        **observer.record(),
        "final": final,
        "start_digest": {"loaded": loaded, **first, "end": net_digest(policy.net)},
        "num_timesteps": model.num_timesteps,
        "seconds": train_seconds,
        "eval_seconds": time.perf_counter() - start - train_seconds,
    }


def stored_without_bases(arms: Sequence[Arm], seeds: Sequence[int], budget: int, eval_k: int,
                         bases: Sequence[Run], folder: Any) -> dict[str, list[dict[str, Any]]] | None:
    """The run files in ``folder/runs`` of ``arms`` on ``seeds``, read without the bases' weights (for
    analysis only, e.g. of the committed runs on a clone without the base cache): a record is an arm's
    when its key is the arm's with every field but the base's weight digest, and all runs of one seed
    must name the same digest. Checksums are checked, fingerprints (which cover the weights) are not.
    None unless every arm x seed has exactly one record."""
    from pathlib import Path

    from benchmarks.core.store import RunFileError, check_run

    index = []
    for path in sorted((Path(folder) / "runs").glob("*.json")):
        try:
            index.append(check_run(path))
        except RunFileError:
            continue
    by_seed = {t.spec["seed"]: t for t in bases}
    out: dict[str, list[dict[str, Any]]] = {}
    for seed in seeds:
        digests = set()
        for arm in arms:
            want = run_key(arm, seed, budget, by_seed[seed], "", eval_k)
            found = [r for r in index if isinstance(r.get("key"), dict)
                     and isinstance(r["key"].get("base"), dict)
                     and {**r["key"], "base": {**r["key"]["base"], "weights": ""}} == want]
            if len(found) != 1:
                return None
            digests.add(found[0]["key"]["base"]["weights"])
            out.setdefault(arm.name, []).append(found[0])
        if len(digests) != 1:
            return None
    return out
