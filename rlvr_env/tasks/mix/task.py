"""A task mix: one policy, one vocabulary, several tasks (DeepSeek-R1's stages 3-4 train one policy on
reasoning and general prompts together; Guo et al. 2025, sections 2.3.3-2.3.4).

Each prompt is drawn from one member task by weight and scored by that member's own verifier; the members
share one answer vocabulary and one token context (:mod:`rlvr_env.tasks.mix.vocab` has the rules), so one
policy reads and writes all of them and every member is evaluated with the same spaces by weights alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlvr_env.rewards import BASE_PARTS, RewardWeights, Verdict
from rlvr_env.scoring import PromptBatch, batch_length
from rlvr_env.tasks.base import ContextTokens, Task, check_split
from rlvr_env.tasks.mix.draw import MemberDraw, MixPrompt, parse_weights
from rlvr_env.tasks.mix.vocab import AnswerMap, ContextMap, answer_vocabulary, context_vocabulary
from rlvr_env.tasks.registry import TASKS

__all__ = ["MixTask"]

_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")


def _members(members: object) -> dict[str, Task[Any]]:
    if not isinstance(members, Mapping):
        raise ValueError(f"members={members!r:.120} must be a mapping of member names to tasks (or to the "
                         "keywords of a registered task)")
    if len(members) < 2:
        raise ValueError(f"members={list(members)!r} has {len(members)} member(s); a mix needs at least 2")
    out: dict[str, Task[Any]] = {}
    for name, member in members.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"member name {name!r} must be a non-empty string of letters, digits, '_', '.' "
                             "or '-' (it names the member's context tag and metrics)")
        if isinstance(member, Mapping):  # a registered task by its name, with its keywords
            cls = TASKS.get(name)
            if cls is None:
                raise ValueError(f"member {name!r} is not a registered task name; registered: "
                                 f"{sorted(TASKS)}")
            if issubclass(cls, MixTask):
                raise ValueError(f"member {name!r} is itself a mix; a mix's members must be plain tasks")
            member = cls(**member)
        if isinstance(member, MixTask):
            raise ValueError(f"member {name!r} is itself a mix; a mix's members must be plain tasks")
        if not isinstance(member, Task):
            raise ValueError(f"member {name!r}={member!r:.80} must be an rlvr_env.Task or the keywords of a "
                             "registered task")
        out[name] = member
    return out


class MixTask(Task[MixPrompt]):
    """
    ## Description

    Several tasks as one (the members), for one policy: each episode's prompt is drawn from one member by
    weight, answered in one shared vocabulary and paid by that member's own verifier. Ids
    ``rlvr/Mix-v0`` (members by registered name), ``rlvr/CountdownMix-v0`` and
    ``rlvr/CountdownThinkMix-v0``; docs/mix.md is the overview.

    ## Action Space

    ``Discrete(V)``: the union of the members' vocabularies by token string, in member order, then one
    ``"<eos>"``, to which every member's own end of answer maps (:mod:`rlvr_env.tasks.mix.vocab`).

    ## Observation Space

    ``observation="features"``: a one-hot of the member (``"task"``), then each member's prompt features
    in its own segment (``"<name>/<segment>"``, zeros for the other members), then the answer one-hot.
    ``observation="tokens"`` (when every member offers it): ``<task:name>`` and the member's prompt
    tokens (remapped to the shared context vocabulary), left-padded, then the answer's tokens.

    ## Rewards

    The member's: its ``score`` on the answer mapped back to its own ids, with the env's weights. The
    mix's ``reward_parts`` are the members' parts, in member order.

    ## Verifier

    The member's. An answer holding a token the drawn member does not have (a *foreign* token) is
    malformed and paid nothing (0 accuracy, 0 format); so is an answer of a fixed-length member
    (``eos_id is None``, e.g. Arithmetic's 5 tokens) that does not end with ``<eos>`` right after its
    ``max_length`` tokens. An answer of an EOS member longer than the member's own ``max_length`` is
    scored as the member scores a truncated one (nothing is paid).

    ## Starting State

    ``reset`` draws a member by weight with ``np_random``, then that member's prompt of the split with the
    same generator; ``info["prompt"]`` is a :class:`MixPrompt` (``.task``, the member's name, and
    ``.prompt``, its prompt). ``reset(options={"prompt": MixPrompt(...)})`` or a ``(name, prompt)``
    pair replays one; a member with weight 0 is never drawn but its prompts can be replayed.

    ## Episode End

    Terminated at ``<eos>``; truncated after ``max_length`` tokens without it, the most any member needs
    (its ``max_length``, plus one for a fixed-length member's ``<eos>``). The grammar mask offers only
    the drawn member's tokens (its own mask, mapped) and only ``<eos>`` once the member's answer is
    complete (or lost to a foreign token).

    ## Splits

    The member's own: :meth:`split_of` delegates, so ``split="test"`` draws each member's held-out prompts.

    ## Per-task reporting

    The final ``info["prompt"].task`` names the member (single and vector env), and ``info["stats"]``
    holds ``task/<name>`` (1.0 for the drawn member, 0.0 for the others) and the member's own stats as
    ``<name>/<stat>``. GRPO logs ``rollout/<name>/solve_rate`` and ``rollout/<name>/reward_mean`` from them.

    ## Arguments

    >>> import gymnasium as gym
    >>> import rlvr_env
    >>> env = gym.make("rlvr/CountdownMix-v0", observation="tokens")
    >>> obs, info = env.reset(seed=3)
    >>> info["prompt"], info["split"]
    (MixPrompt(task='countdown', prompt=Prompt(numbers=(5, 7, 5), target=40)), 'train')
    >>> task = env.unwrapped.task
    >>> for token in task.solution(info["prompt"]):
    ...     obs, reward, terminated, truncated, info = env.step(token)
    >>> reward, terminated, info["stats"]["task/countdown"]
    (1.1, True, 1.0)
    >>> digits_only = gym.make("rlvr/CountdownMix-v0", observation="tokens",
    ...                        weights={"countdown": 0.0, "digits": 1.0, "arithmetic": 0.0})
    >>> digits_only.observation_space == env.observation_space, digits_only.reset(seed=0)[1]["prompt"].task
    (True, 'digits')

    | Parameter | Type                        | Default | Description                                  |
    |-----------|-----------------------------|---------|----------------------------------------------|
    | members   | mapping name -> Task / dict | -       | at least 2 plain tasks (no mix); a dict is a |
    |           |                             |         | registered task's keywords (``TASKS[name]``) |
    | weights   | mapping name -> float       | equal   | every member named, finite, >= 0, not all 0  |

    ## Version History

    * v0: initial version.
    """

    name = "mix"

    def __init__(self, members: Mapping[str, Task[Any] | Mapping[str, Any]],
                 weights: Mapping[str, float] | None = None) -> None:
        self.members: dict[str, Task[Any]] = _members(members)
        self.names: tuple[str, ...] = tuple(self.members)
        self.weights: dict[str, float] = parse_weights(weights, self.names)
        self._draw = MemberDraw([self.weights[n] for n in self.names])
        self.answers: AnswerMap = answer_vocabulary(self.members)
        self.vocab = self.answers.vocab
        self.eos_id = self.answers.eos_id
        self.max_length = max(m.max_length + int(m.eos_id is None) for m in self.members.values())
        self.reward_parts = tuple(dict.fromkeys(p for m in self.members.values() for p in m.reward_parts))
        self.reply_after = frozenset(int(self.answers.forward[n][t]) for n, m in self.members.items()
                                     for t in m.reply_after)
        self._masked = any(m.grammar_masked or m.eos_id is None or m.max_length != self.max_length
                           or len(m.vocab) < len(self.vocab) for m in self.members.values())
        offsets, start = {}, len(self.names)
        for n, m in self.members.items():
            offsets[n], start = start, start + m.prompt_dim
        self._offsets: dict[str, int] = offsets
        self._context: ContextMap | None | bool = False  # built on first use (False: not yet)

    # -- prompts ---------------------------------------------------------------------------------
    def sample_prompt(self, rng: np.random.Generator, split: str) -> MixPrompt:
        """A member by weight (one ``rng.random()``), then its prompt of ``split`` with the same ``rng``."""
        check_split(split)
        name = self.names[int(self._draw.pick(np.array([rng.random()]))[0])]
        return MixPrompt(name, self.members[name].sample_prompt(rng, split))

    def sample_prompts(self, rng: np.random.Generator, split: str, k: int) -> list[MixPrompt]:
        """``k`` members by weight, then each member's prompts in one ``sample_prompts`` call (in member
        order), in the order the members were drawn."""
        check_split(split)
        picks = self._draw.pick(rng.random(k))
        out: list[MixPrompt | None] = [None] * k
        for i, name in enumerate(self.names):
            rows = np.flatnonzero(picks == i)
            if len(rows):
                drawn = self.members[name].sample_prompts(rng, split, len(rows))
                for r, p in zip(rows.tolist(), drawn):
                    out[r] = MixPrompt(name, p)
        return out  # type: ignore[return-value]

    def prompts(self, split: str) -> None:
        """None: a mix is always sampled. A listed pool would be drawn uniformly by the envs (which would
        ignore the weights) and would refuse replays of prompts it does not list."""
        check_split(split)
        return None

    def validate_prompt(self, prompt: object) -> MixPrompt:
        """A :class:`MixPrompt` or a ``(name, prompt)`` pair; the member validates its prompt."""
        if isinstance(prompt, MixPrompt):
            name, inner = prompt.task, prompt.prompt
        elif isinstance(prompt, (tuple, list)) and len(prompt) == 2 and isinstance(prompt[0], str):
            name, inner = prompt
        else:
            raise ValueError(f"prompt {prompt!r:.80} must be a MixPrompt or a (task, prompt) pair whose task "
                             f"is one of the members {list(self.names)}")
        if name not in self.members:
            raise ValueError(f"prompt task {name!r} is not a member of the mix {list(self.names)}")
        return MixPrompt(name, self.members[name].validate_prompt(inner))

    def split_of(self, prompt: MixPrompt) -> str:
        return self.members[prompt.task].split_of(prompt.prompt)

    def render_prompt(self, prompt: MixPrompt) -> str:
        return f"[{prompt.task}] {self.members[prompt.task].render_prompt(prompt.prompt)}"

    # -- the "features" observation ----------------------------------------------------------------
    @property
    def prompt_layout(self) -> dict[str, slice]:
        """``"task"`` (a one-hot of the member), then ``"<name>/<segment>"`` for each member's segments."""
        layout = {"task": slice(0, len(self.names))}
        for name, member in self.members.items():
            at = self._offsets[name]
            for seg, s in member.prompt_layout.items():
                layout[f"{name}/{seg}"] = slice(at + s.start, at + s.stop)
        return layout

    @property
    def prompt_dim(self) -> int:
        return len(self.names) + sum(m.prompt_dim for m in self.members.values())

    def encode_prompt(self, prompt: MixPrompt) -> np.ndarray:
        return self.encode_batch(self.prompt_batch([prompt]))[0]

    def _by_member(self, batch: PromptBatch) -> list[tuple[int, str, np.ndarray, list[Any]]]:
        """(member index, name, rows, the member's prompts) of each member present in ``batch``."""
        column = batch["prompt"]
        names = np.array([p.task for p in column], dtype=object)
        out = []
        for i, name in enumerate(self.names):
            rows = np.flatnonzero(names == name)
            if len(rows):
                out.append((i, name, rows, [column[r].prompt for r in rows.tolist()]))
        return out

    def encode_batch(self, batch: PromptBatch) -> np.ndarray:
        out = np.zeros((batch_length(batch), self.prompt_dim), dtype=np.float32)
        for i, name, rows, prompts in self._by_member(batch):
            member = self.members[name]
            at = self._offsets[name]
            out[rows, i] = 1.0
            out[rows, at: at + member.prompt_dim] = member.encode_batch(member.prompt_batch(prompts))
        return out

    # -- the token observation --------------------------------------------------------------------
    def _context_map(self) -> ContextMap | None:
        if self._context is False:
            self._context = context_vocabulary(self.members, self.answers)
        return self._context  # type: ignore[return-value]

    def context_tokens(self) -> ContextTokens | None:
        """``<pad>``, a tag per member, then the members' context tokens (None when a member offers none)."""
        ctx = self._context_map()
        return None if ctx is None else ctx.tokens

    def encode_context(self, prompt: MixPrompt) -> np.ndarray:
        return self.context_batch(self.prompt_batch([prompt]))[0]

    def context_batch(self, batch: PromptBatch) -> np.ndarray:
        ctx = self._context_map()
        if ctx is None:
            raise NotImplementedError("a member of this mix offers no token observation")
        out = np.zeros((batch_length(batch), ctx.tokens.width), dtype=np.int64)
        for _, name, rows, prompts in self._by_member(batch):
            member = self.members[name]
            out[rows] = ctx.encode(name, member.context_batch(member.prompt_batch(prompts)))
        return out

    # -- answers: mapped to the member and back ----------------------------------------------------
    def member_tokens(self, name: str, token_ids: Sequence[int]) -> list[int] | None:
        """``token_ids`` (mix ids) as member ``name``'s ids (a trailing ``<eos>`` dropped for a fixed-length
        member), or None when one of them is foreign to the member."""
        ids = [int(t) for t in token_ids]
        member = self.members[name]
        if member.eos_id is None and ids and ids[-1] == self.eos_id:
            ids = ids[:-1]
        back = self.answers.inverse[name][ids] if ids else np.zeros(0, dtype=np.int64)
        return None if (back < 0).any() else back.tolist()

    def mix_tokens(self, name: str, member_ids: Sequence[int]) -> tuple[int, ...]:
        """Member ``name``'s ``member_ids`` as mix ids."""
        fwd = self.answers.forward[name]
        return tuple(int(fwd[t]) for t in member_ids)

    def _member_answer(self, name: str, token_ids: Sequence[int],
                       truncated: bool) -> tuple[list[int], bool, str | None]:
        """(the answer in the member's ids, whether the member scores it as truncated, None) or
        ``([], False, why it is malformed)`` (see the class docstring, Verifier)."""
        member = self.members[name]
        ids = [int(t) for t in token_ids]
        inv = self.answers.inverse[name]
        if member.eos_id is None:
            if truncated:
                return [], False, f"no {self.vocab[self.eos_id]} within {self.max_length} tokens (truncated)"
            if not ids or ids[-1] != self.eos_id:
                return [], False, f"a {name} answer ends with {self.vocab[self.eos_id]}"
            ids = ids[:-1]
        foreign = [i for i, t in enumerate(ids) if inv[t] < 0]
        if foreign:
            i = foreign[0]
            return [], False, f"token {self.vocab[ids[i]]!r} at position {i} is not in {name}'s vocabulary"
        back = inv[ids].tolist() if ids else []
        if member.eos_id is None:
            if len(back) != member.max_length:
                return [], False, (f"a {name} answer has exactly {member.max_length} tokens before "
                                   f"{self.vocab[self.eos_id]}; this one has {len(back)}")
            return back, False, None
        if truncated or len(back) > member.max_length:
            return back[: member.max_length], True, None
        return back, False, None

    def _unpaid(self, name: str, reason: str, token_ids: Sequence[int], weights: RewardWeights) -> Verdict:
        parts = {p: 0.0 for p in self.members[name].reward_parts if p in BASE_PARTS or p in weights}
        text = "".join(self.vocab[int(t)] for t in token_ids if int(t) != self.eos_id)
        return Verdict(0.0, False, False, None, reason, text, parts)

    def score(self, prompt: MixPrompt, token_ids: Sequence[int], weights: RewardWeights, *,
              truncated: bool = False) -> Verdict:
        """The member's verdict on the answer in its own ids, or nothing paid (class docstring, Verifier)."""
        back, cut, fault = self._member_answer(prompt.task, token_ids, truncated)
        if fault is not None:
            return self._unpaid(prompt.task, fault, token_ids, weights)
        return self.members[prompt.task].score(prompt.prompt, back, weights, truncated=cut)

    def score_batch(self, prompts: Sequence[MixPrompt], answers: Sequence[Sequence[int]],
                    weights: RewardWeights, truncated: Sequence[bool]) -> list[Verdict]:
        """:meth:`score` per answer, with one ``score_batch`` call per member."""
        out: list[Verdict | None] = [None] * len(prompts)
        rows: dict[str, list[tuple[int, Any, list[int], bool]]] = {}
        for i, (p, a, t) in enumerate(zip(prompts, answers, truncated)):
            back, cut, fault = self._member_answer(p.task, a, bool(t))
            if fault is not None:
                out[i] = self._unpaid(p.task, fault, a, weights)
            else:
                rows.setdefault(p.task, []).append((i, p.prompt, back, cut))
        for name, items in rows.items():
            verdicts = self.members[name].score_batch([x[1] for x in items], [x[2] for x in items], weights,
                                                      [x[3] for x in items])
            for (i, *_), v in zip(items, verdicts):
                out[i] = v
        return out  # type: ignore[return-value]

    def best_reward(self, weights: RewardWeights) -> float:
        """The most an answer of a member that can be drawn earns (the largest over those members)."""
        return max(m.best_reward(weights) for n, m in self.members.items() if self.weights[n] > 0)

    def decode(self, token_ids: Sequence[int], prompt: MixPrompt) -> str:
        """The member's text of the answer up to ``<eos>``; with a foreign token, the tokens' strings."""
        ids = [int(t) for t in token_ids]
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        back = self.member_tokens(prompt.task, ids)
        if back is None:
            return "".join(self.vocab[t] for t in ids)
        return self.members[prompt.task].decode(back, prompt.prompt)

    def episode_stats(self, prompt: MixPrompt, tokens: Sequence[int]) -> dict[str, float]:
        """``task/<name>`` for every member (1.0 for this episode's, else 0.0) and this member's own
        stats as ``<member>/<stat>`` (none when the answer holds a foreign token)."""
        out = {f"task/{n}": float(n == prompt.task) for n in self.names}
        member = self.members[prompt.task]
        if member.has_episode_stats:
            back = self.member_tokens(prompt.task, tokens)
            if back is not None:
                stats = member.episode_stats(prompt.prompt, tuple(back))
                out.update({f"{prompt.task}/{k}": float(v) for k, v in stats.items()})
        return out

    # -- what the env writes: the member's tool ---------------------------------------------------
    def reply(self, prompt: MixPrompt, tokens: Sequence[int]) -> tuple[int, ...]:
        """The member's reply (mapped), cut to the room left in the member's own ``max_length``."""
        member = self.members[prompt.task]
        if not member.reply_after or not tokens:
            return ()
        back = self.member_tokens(prompt.task, tokens)
        if back is None or back[-1] not in member.reply_after:
            return ()
        room = max(member.max_length - len(back), 0)
        return self.mix_tokens(prompt.task, member.reply(prompt.prompt, tuple(back))[:room])

    # -- masks --------------------------------------------------------------------------------------
    @property
    def grammar_masked(self) -> bool:
        """True when the mask can forbid a token: a member has a grammar mask, a token the mix has and a
        member lacks (foreign), a fixed length, or a cap below the mix's."""
        return self._masked

    def action_mask(self, prompt: MixPrompt, prefix: Sequence[int]) -> np.ndarray:
        row = np.zeros((1, self.max_length), dtype=np.int64)
        row[0, : len(prefix)] = prefix
        return self.action_masks_batch([prompt], row, np.array([len(prefix)]))[0]

    def action_masks_batch(self, prompts: Sequence[MixPrompt], tokens: np.ndarray,
                           lengths: np.ndarray) -> np.ndarray:
        """(B, V): each row's member mask mapped into the mix's vocabulary (False for foreign tokens);
        only ``<eos>`` once the member's answer is complete (its ``max_length`` tokens) or holds a
        foreign token (the answer is lost: a legal token ends it). One call per member."""
        b = len(prompts)
        out = np.zeros((b, len(self.vocab)), dtype=bool)
        out[:, self.eos_id] = True
        tokens = np.asarray(tokens, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64).reshape(b)
        names = np.array([p.task for p in prompts], dtype=object)
        for name, member in self.members.items():
            rows = np.flatnonzero(names == name)
            if not len(rows):
                continue
            width = member.max_length
            lens = lengths[rows]
            sub = np.zeros((len(rows), width), dtype=np.int64)
            take = min(width, tokens.shape[1])
            sub[:, :take] = tokens[rows, :take]
            back = self.answers.inverse[name][sub]  # (k, width)
            written = np.arange(width)[None, :] < lens[:, None]
            lost = ((back < 0) & written).any(axis=1) | (lens >= width)
            ok = rows[~lost]
            if not len(ok):
                continue
            masks = member.action_masks_batch([prompts[r].prompt for r in ok.tolist()],
                                              np.where(written, back, 0)[~lost], lens[~lost])
            out[ok, self.eos_id] = False
            out[ok[:, None], self.answers.forward[name][None, :]] = masks
        return out

    # -- a cold start -------------------------------------------------------------------------------
    def solution(self, prompt: MixPrompt) -> tuple[int, ...] | None:
        """The member's solution in mix ids (``<eos>`` appended for a fixed-length member)."""
        member = self.members[prompt.task]
        found = member.solution(prompt.prompt)
        if found is None:
            return None
        ids = self.mix_tokens(prompt.task, found)
        return (*ids, self.eos_id) if member.eos_id is None else ids

    @property
    def has_solutions(self) -> bool:
        """Whether every member that can be drawn (weight > 0) has solutions: a cold start draws prompts
        by weight, so it never asks a member of weight 0 for one."""
        return all(m.has_solutions for n, m in self.members.items() if self.weights[n] > 0)

    # -- text: the member's -------------------------------------------------------------------------
    def prompt_text(self, prompt: MixPrompt, instruction: str) -> str:
        return self.members[prompt.task].prompt_text(prompt.prompt, instruction)

    def parse_answer(self, prompt: MixPrompt, text: str) -> list[int] | None:
        ids = self.members[prompt.task].parse_answer(prompt.prompt, text)
        return None if ids is None else list(self.mix_tokens(prompt.task, ids))

    def score_text(self, prompt: MixPrompt, text: str, weights: RewardWeights) -> Verdict:
        return self.members[prompt.task].score_text(prompt.prompt, text, weights)

    def keywords(self) -> dict[str, Any]:
        """``{"members": {name: the member's keywords}, "weights": ...}``: ``TASKS["mix"]`` rebuilds the mix
        when each member's name is its registered task name."""
        for name, member in self.members.items():
            if TASKS.get(name) is not type(member):
                raise NotImplementedError(f"member {name!r} ({type(member).__name__}) is not the task "
                                          f"registered as {name!r}, so a row cannot rebuild it by name")
        return {"members": {n: m.keywords() for n, m in self.members.items()}, "weights": dict(self.weights)}

    def prompt_record(self, prompt: MixPrompt) -> dict[str, Any]:
        return {"task": prompt.task, "record": self.members[prompt.task].prompt_record(prompt.prompt)}

    def prompt_from_record(self, record: dict[str, Any]) -> MixPrompt:
        if not isinstance(record, dict) or set(record) != {"task", "record"}:
            raise ValueError(f"record {record!r:.80} must be a dict with keys 'task' and 'record'")
        name = record["task"]
        if name not in self.members:
            raise ValueError(f"record task {name!r} is not a member of the mix {list(self.names)}")
        return MixPrompt(name, self.members[name].prompt_from_record(record["record"]))

    def check_vocab(self) -> None:
        """Each member's own check, and the shared vocabulary's (distinct strings without whitespace)."""
        for member in self.members.values():
            member.check_vocab()
        super().check_vocab()
