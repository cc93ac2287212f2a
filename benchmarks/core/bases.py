"""The cold-started base that RL starts from: the R1 recipe's stage 1, shared by the studies that use it.

A base is a causal transformer on ``rlvr/Countdown-v0`` (``observation="tokens"``, grammar masks unless
its ``sft`` says ``masked: False``) after the supervised cold start (:func:`agents.sft.cold_start`,
train-split solutions only), evaluated alone. :func:`base_run` is its executor run function; it returns
the base's record with its weights packed as text (:mod:`benchmarks.core.weights`), so the runs that
start from it carry them in their specs. The R1 study (:mod:`benchmarks.r1`) trains its arms from these
bases and the lab's ``r1`` regime (:mod:`benchmarks.lab.base_model`) its claims' arms: both make the
same runs (:func:`base_runs`), so one cache of bases serves both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.core.common import limit_threads
from benchmarks.core.executor import Run
from benchmarks.core.store import run_key
from benchmarks.core.weights import pack_weights

__all__ = ["DEFAULT_ENV_KWARGS", "ENV_ID", "EVAL", "KS", "RECIPE_SFT", "SB3_SETTINGS", "base_name",
           "base_run", "base_runs", "evaluate", "make_model"]

ENV_ID = "rlvr/Countdown-v0"
DEFAULT_ENV_KWARGS = {"n_numbers": 3}
#: pass@k is reported at these k (all from the same 64 samples per prompt).
KS = (1, 2, 4, 8, 16, 32, 64)
#: The recipe's cold start: the CLI's ``--sft 100000`` with its defaults (agents.grpo.config.COLD_START),
#: for the transformer's default architecture (3 layers, width 128, PyTorch's default init). Chosen on
#: seeds 0-2 by ``python -m benchmarks.r1.base_search`` (benchmarks/results/r1/base_search.md): PyTorch's
#: init instead of GPT-2's N(0, 0.02) moved held-out greedy most, then a third layer, then 12 epochs
#: instead of 8.
RECIPE_SFT = {"n": 100_000, "epochs": 12, "learning_rate": 1e-3, "batch_size": 256, "minibatch": "prompts",
              "warmup": 0.0}
#: SB3 PPO / MaskablePPO per update, collected from the native vector env (256 rows x 8 steps = one
#: 2,048-step rollout, about 300 answers, as GRPO's 16 x 16 group batch), minibatches of 512 x 2 epochs
#: (8 gradient steps per rollout), GRPO's step size; SB3's other defaults (clip 0.2, gamma 0.99, GAE
#: 0.95, value coefficient 0.5). Chosen on seed 0 (never reported) at 60k steps from its base among five
#: settings, GRPO's preset's search budget (the R1 study's `--sb3`, held-out sampled success): this one
#: 0.422; one epoch of 2,048 0.370 (lr 3e-4: 0.388; gamma = lambda = 1, as LLM PPO: 0.365); 4 epochs of
#: 1,024 0.417 at 0.4x the speed. The R1 study and the speed measurement read it.
SB3_SETTINGS = {"n_envs": 256, "n_steps": 8, "batch_size": 512, "n_epochs": 2, "learning_rate": 1e-4}
#: A base's evaluation: pass@k from ``k`` samples on ``prompts`` prompts per split, and the start of the
#: learning curve (held-out sampled success from ``curve_k`` samples on ``curve_prompts`` prompts).
EVAL = {"k": 64, "prompts": 256, "curve_k": 8, "curve_prompts": 200}


def base_name(sft: Mapping[str, Any]) -> str:
    """A base's arm name: ``base_<n>``, or ``base_<n>_nomask`` for a cold start without the grammar masks
    (the unmasked PPO arm's base: under the masks the cross-entropy never teaches the base to avoid
    off-grammar tokens, so a masked base decodes garbage without them)."""
    return f"base_{sft['n']}" + ("" if sft.get("masked", True) else "_nomask")


def make_model(spec: Mapping[str, Any], masks: bool = True) -> Any:
    """The seeded GRPO transformer of a run's ``spec`` (its ``seed``, ``env_kwargs``, ``policy_kwargs`` and
    optional ``grpo`` config fields over the ``transformer`` preset)."""
    import rlvr_env  # noqa: F401 - registers the envs
    from agents.grpo import GRPO, GRPOConfig

    config = GRPOConfig.preset("transformer", action_masks=masks, **spec.get("grpo", {}))
    return GRPO(ENV_ID, config, policy="transformer", seed=spec["seed"],
                env_kwargs={**spec["env_kwargs"], "observation": "tokens"},
                policy_kwargs=spec["policy_kwargs"])


def evaluate(model: Any, k: int, prompts: int, splits: tuple[str, ...] = ("train", "test")
             ) -> dict[str, Any]:
    """Greedy, sampled and pass@k (at :data:`KS` up to ``k``) success per split, ``k`` samples each."""
    out: dict[str, Any] = {}
    for split in splits:
        rep = model.success(split, k=k, n_prompts=prompts)
        out[split] = {"greedy": rep.greedy, "sampled": rep.sampled,
                      "pass_at": {str(j): v for j, v in rep.pass_at([j for j in KS if j <= k]).items()}}
    return out


def base_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Stage 1: the cold start on ``spec["sft"]["n"]`` train-split solutions, evaluated alone. The base
    decodes with the grammar masks unless ``sft["masked"]`` is False; its cross-entropy is fitted under
    the masks it decodes with unless ``sft["fit_masks"]`` is False (over every token)."""
    from agents.sft import cold_start

    threads = limit_threads(1, import_torch=True)
    sft = spec["sft"]
    model = make_model(spec, masks=sft.get("masked", True))  # unmasked: the unmasked PPO arm's own base
    info = cold_start(model, sft["n"], epochs=sft["epochs"], batch_size=sft["batch_size"],
                      learning_rate=sft["learning_rate"], minibatch=sft["minibatch"], warmup=sft["warmup"],
                      masked=sft.get("fit_masks"))  # None: as the base decodes
    ev = spec["eval"]
    return {"seed": spec["seed"], "sft": sft, "sft_seconds": info["sft_seconds"],
            "sft_losses": info["sft_losses"],
            "sft_tokens": info["sft_tokens"], "eval": evaluate(model, ev["k"], ev["prompts"]),
            "curve_start": evaluate(model, ev["curve_k"], ev["curve_prompts"], ("test",))["test"]["sampled"],
            "weights": pack_weights(model.policy.net), "parameters": model.num_parameters(),
            "torch_threads": threads}


def base_runs(seeds: Sequence[int], recipe: Mapping[str, Any], *, sft_budgets: Sequence[int] = (),
              env_kwargs: Mapping[str, Any] = DEFAULT_ENV_KWARGS, evaluation: Mapping[str, Any] = EVAL,
              unmasked: bool = False) -> list[Run]:
    """The base runs of ``seeds``: the ``recipe``'s cold start and one per smaller ``sft_budgets`` entry,
    plus the unmasked base with ``unmasked`` (the unmasked PPO arm's)."""
    runs = []
    for seed in seeds:
        sfts = [{**recipe, "n": n} for n in sorted({recipe["n"], *sft_budgets})]
        if unmasked:
            sfts.append({**recipe, "masked": False})
        for sft in sfts:
            spec = {"seed": seed, "env_kwargs": env_kwargs, "policy_kwargs": {}, "eval": evaluation,
                    "sft": sft}
            name = base_name(sft)
            runs.append(Run("benchmarks.core.bases:base_run", spec, run_key(name, spec), arm=name,
                            label=f"{name} s{seed}"))
    return runs
