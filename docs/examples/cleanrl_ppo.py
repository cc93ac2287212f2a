"""PPO with a critic in one readable file, CleanRL-style, on the rlvr envs and Gymnasium 1.x.

Run it (torch, from the ``torch`` extra, is all it needs besides the package)::

    python docs/examples/cleanrl_ppo.py                              # rlvr/Arithmetic-v0, 60k steps
    python docs/examples/cleanrl_ppo.py --total-timesteps 20000 --num-envs 4

Two things differ from a script written for Gym 0.2x, and both are Gymnasium 1.x's layout:

* **Episode statistics.** The vector wrapper ``gymnasium.wrappers.vector.RecordEpisodeStatistics``
  writes ``infos["episode"]`` (arrays ``"r"``, ``"l"``, ``"t"``, one entry per env) and the mask
  ``infos["_episode"]`` (which envs finished) on the step where an episode ends. There is no
  ``infos["final_info"]`` list of per-env dicts any more; the ended episodes' own infos (here
  ``"correct"``, whether the verifier paid the answer) are one dict of arrays in ``infos["final_info"]``.
* **Autoreset.** The vector env is built with ``autoreset_mode=SameStep``: a finished env starts its next
  episode inside the same ``step``, so the observation returned for it is already the new episode's first
  one and ``done`` marks the boundary, which is what the rollout and GAE below assume. (Gymnasium's
  default, ``NextStep``, spends one extra step per episode whose action is ignored.)

Settings that learn here: an rlvr episode is a few tokens with one reward at its end (a random policy
answers 0.25% of Arithmetic's prompts right), so the rollout is large and re-used for many gradient steps
(10 epochs of 64-sample minibatches, as SB3's PPO defaults do) and there is no discount (``gamma=1``:
the answer's reward belongs to every token of it). With the settings of CleanRL's own ``ppo.py`` (4
epochs of 4 minibatches, ``gamma=0.99``) the same budget stays at the random level.

The env id is any Gymnasium id with a discrete action space and a flat observation; ``module:id`` loads
a user's module first (Gymnasium's form), e.g. ``--env-id my_tasks:me/Sort-v0``.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections import deque
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import nn

import rlvr_env  # noqa: F401  (registers the rlvr/ ids)


@dataclass
class Args:
    env_id: str = "rlvr/Arithmetic-v0"
    """the Gymnasium id to train on (``module:id`` imports the module first)"""
    total_timesteps: int = 60_000
    """env steps in all (summed over the vector env's copies)"""
    seed: int = 0
    """seeds the env's prompts, the network's initialisation and every sampled action"""
    num_envs: int = 8
    """copies of the env stepped together"""
    num_steps: int = 128
    """steps per copy in one rollout (the rollout holds num_envs * num_steps transitions)"""
    learning_rate: float = 1e-3
    """Adam's step size, annealed linearly to 0 over the run"""
    update_epochs: int = 10
    """passes over each rollout"""
    minibatch_size: int = 64
    """transitions per gradient step"""
    gamma: float = 1.0
    """discount; 1 because the answer's only reward is paid at its last token"""
    gae_lambda: float = 0.95
    """GAE's lambda (Schulman et al. 2016)"""
    clip_coef: float = 0.2
    """PPO's clip range epsilon (Schulman et al. 2017, eq. 7)"""
    ent_coef: float = 0.01
    """weight of the entropy bonus"""
    vf_coef: float = 0.5
    """weight of the value loss"""
    max_grad_norm: float = 0.5
    """gradients are clipped to this global norm"""
    hidden: int = 64
    """width of the two hidden layers of the actor and of the critic"""
    vectorization: str = "auto"
    """"sync" (Gymnasium's SyncVectorEnv over single envs), "native" (the env's own vector env, one
    array call per step) or "auto" (native when the id has one)"""
    threads: int = 1
    """torch threads"""


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in vars(Args()).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    args = Args(**vars(parser.parse_args(argv)))
    for name in ("total_timesteps", "num_envs", "num_steps", "update_epochs", "minibatch_size", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)} must be a positive integer")
    if args.total_timesteps < args.num_envs * args.num_steps:
        parser.error(f"--total-timesteps {args.total_timesteps} is less than one rollout "
                     f"(--num-envs x --num-steps = {args.num_envs * args.num_steps})")
    if args.vectorization not in ("auto", "sync", "native"):
        parser.error(f"--vectorization {args.vectorization!r} must be auto, sync or native")
    return args


def make_envs(args: Args) -> gym.vector.VectorEnv:
    """The vector env with same-step autoreset, wrapped to record episode statistics."""
    module, _, env_id = args.env_id.rpartition(":")
    if module:  # Gymnasium's "module:id" form: the module registers the id when imported
        importlib.import_module(module)
    spec = gym.spec(env_id)
    has_native = spec.vector_entry_point is not None
    native = args.vectorization == "native" or (args.vectorization == "auto" and has_native)
    if native:  # the env's own vector env takes the mode as a keyword
        envs = gym.make_vec(spec, num_envs=args.num_envs, vectorization_mode="vector_entry_point",
                            autoreset_mode=AutoresetMode.SAME_STEP)
    else:
        envs = gym.make_vec(spec, num_envs=args.num_envs, vectorization_mode="sync",
                            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete actions"
    return envs


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with orthogonal weights and zero bias (the PPO implementation details)."""
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    """Separate actor and critic MLPs over the flat observation."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                    layer(hidden, 1, std=1.0))
        self.actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                                   layer(hidden, n_actions, std=0.01))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B,)

    def log_probs(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.actor(obs), dim=-1)  # (B, A)


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor,
        gamma: float, lam: float) -> torch.Tensor:
    """Advantages (T, N). ``dones[t]`` says the episode ended at step t (same-step autoreset: the
    observation after it starts a new episode), so nothing is bootstrapped across it."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(last_value)
    for t in reversed(range(len(rewards))):
        next_value = last_value if t == len(rewards) - 1 else values[t + 1]
        alive = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * alive - values[t]
        running = delta + gamma * lam * alive * running
        advantages[t] = running
    return advantages


def train(args: Args) -> dict[str, float]:
    """Train and print one line per rollout; returns the first and the last rollouts' success rates."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)  # every sampled action and minibatch order
    envs = make_envs(args)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(obs_dim, int(envs.single_action_space.n), args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    T, N = args.num_steps, args.num_envs
    obs_buf = torch.zeros((T, N, obs_dim))
    actions_buf = torch.zeros((T, N), dtype=torch.long)
    logp_buf, rewards_buf, dones_buf, values_buf = (torch.zeros((T, N)) for _ in range(4))

    n_updates = args.total_timesteps // (T * N)
    obs_np, _ = envs.reset(seed=args.seed)
    obs = torch.as_tensor(obs_np, dtype=torch.float32).reshape(N, -1)
    recent: deque[float] = deque(maxlen=200)  # success of the last episodes, for the printed line
    first_success = last_success = float("nan")
    episodes, global_step, start = 0, 0, time.perf_counter()
    for update in range(1, n_updates + 1):
        for group in optimizer.param_groups:  # linear annealing of the step size
            group["lr"] = args.learning_rate * (1.0 - (update - 1) / n_updates)

        # -- rollout ---------------------------------------------------------------------------------
        ended_correct: list[float] = []
        ended_returns: list[float] = []
        for t in range(T):
            obs_buf[t] = obs
            with torch.no_grad():
                logp_all = agent.log_probs(obs)
                action = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
                values_buf[t] = agent.value(obs)
            actions_buf[t], logp_buf[t] = action, logp_all.gather(-1, action[:, None]).squeeze(-1)
            obs_np, reward, terminated, truncated, infos = envs.step(action.numpy())
            global_step += N
            rewards_buf[t] = torch.as_tensor(reward, dtype=torch.float32)
            dones_buf[t] = torch.as_tensor(np.logical_or(terminated, truncated), dtype=torch.float32)
            obs = torch.as_tensor(obs_np, dtype=torch.float32).reshape(N, -1)
            # Gymnasium 1.x: the statistics of the episodes that ended at this step, as arrays + mask.
            if "_episode" in infos:
                ended = infos["_episode"]
                episodes += int(ended.sum())
                ended_returns += infos["episode"]["r"][ended].tolist()
                final = infos.get("final_info", {})  # the ended episodes' own infos (same-step autoreset)
                if "correct" in final:
                    ended_correct += final["correct"][ended].astype(float).tolist()
                else:  # an env without a verdict: count a positive return as a success
                    ended_correct += (infos["episode"]["r"][ended] > 0).astype(float).tolist()

        # -- advantages ------------------------------------------------------------------------------
        with torch.no_grad():
            advantages = gae(rewards_buf, values_buf, dones_buf, agent.value(obs), args.gamma,
                             args.gae_lambda)
            returns = advantages + values_buf

        # -- PPO update ------------------------------------------------------------------------------
        b_obs, b_actions = obs_buf.reshape(T * N, obs_dim), actions_buf.reshape(-1)
        b_logp, b_adv, b_ret = logp_buf.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
        clip_fracs: list[float] = []
        for _ in range(args.update_epochs):
            order = torch.randperm(T * N, generator=generator)
            for lo in range(0, T * N, args.minibatch_size):
                mb = order[lo:lo + args.minibatch_size]
                logp_all = agent.log_probs(b_obs[mb])
                logp = logp_all.gather(-1, b_actions[mb, None]).squeeze(-1)
                ratio = (logp - b_logp[mb]).exp()
                adv = b_adv[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                policy_loss = torch.max(-adv * ratio,
                                        -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                value_loss = 0.5 * (agent.value(b_obs[mb]) - b_ret[mb]).pow(2).mean()
                entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
                loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * entropy
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                clip_fracs.append(float(((ratio - 1).abs() > args.clip_coef).float().mean()))

        # -- log -------------------------------------------------------------------------------------
        recent.extend(ended_correct)
        success = float(np.mean(ended_correct)) if ended_correct else float("nan")
        if update == 1:
            first_success = success
        last_success = success
        mean_return = float(np.mean(ended_returns)) if ended_returns else float("nan")
        recent_mean = float(np.mean(recent)) if recent else float("nan")
        print(f"step {global_step:>7}  episodes {episodes:>6}  return {mean_return:.3f}  "
              f"success {success:.3f} (last {len(recent)}: {recent_mean:.3f})  "
              f"clip_frac {np.mean(clip_fracs):.3f}  sps {global_step / (time.perf_counter() - start):.0f}",
              flush=True)
    envs.close()
    summary = {"episodes": float(episodes), "first_success": first_success, "final_success": last_success,
               "recent_success": float(np.mean(recent)) if recent else float("nan")}
    print("final: " + "  ".join(f"{k} {v:.3f}" if k != "episodes" else f"{k} {int(v)}"
                                for k, v in summary.items()), flush=True)
    return summary


if __name__ == "__main__":
    train(parse_args())
