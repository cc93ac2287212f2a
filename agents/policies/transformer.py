"""A small causal transformer over the token context (``observation="tokens"``), for GRPO and for SB3.

The network (:class:`TinyLM`) reads the row a token env observes (:mod:`rlvr_env.token_obs`: the prompt
as digits, then the answer so far) and predicts the next answer token from the hidden state of the
context's last token, as a decoder-only language model does: token + learned position embeddings,
pre-LayerNorm blocks (causal multi-head self-attention, GELU MLP), a final LayerNorm, and a linear head
over the env's actions. Padding (id 0) is never attended to.

Why our own module and not a ``transformers`` config-built tiny Llama: the policy must (1) sample one
token per env step for a whole vector-env batch under grammar masks, with a KV cache, and (2) compute
the log-probs of every answer token of a batch in one teacher-forced pass, in the same precision, so
that the rollout's and the update's log-probs agree to ~1e-6. Both are a few lines over an explicit
attention (``torch.nn.functional.scaled_dot_product_attention``); a Hugging Face model adds its cache
classes, generation plumbing and per-call overhead to a 3-layer, width-128 net whose whole step is a
few hundred microseconds, and brings ``transformers`` into the GRPO agent's dependencies.

:class:`TransformerPolicy` is the GRPO policy (``policy="transformer"``): rollouts go through
:meth:`TransformerPolicy.logits`, which keeps a KV cache of its last call and, when every row of the new
call extends a cached row by one token (a lockstep rollout or evaluation), runs the network on the new
token only; any other batch is computed in full (same result). Updates run one forward pass over the
distinct answers of a batch (teacher forcing) and read every token's log-prob from it.

:func:`sb3_policy_kwargs` / :func:`copy_to_sb3` give SB3 ``PPO`` and sb3-contrib ``MaskablePPO`` the same
network: the features extractor (:func:`sb3_extractor_class`) is the trunk (same architecture,
same initial weights for a seed), ``action_net`` gets the head's weights, and the critic
(``value_net``) is a fresh linear head on the shared trunk.

Why one long module: the network, its KV-cached sampling and the SB3 adapters (``copy_to_sb3`` /
``copy_from_sb3``, ``sb3_policy_kwargs``) must stay in step with each other, weight for weight.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import gymnasium as gym
import numpy as np
from agents.extras import missing_extra

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError as err:  # installed without the torch extra: the tabular policy still works
    raise missing_extra("the transformer policy (agents.policies.transformer)", "torch") from err

from agents.policies.protocol import CriticPolicy
from agents.policies.torch_base import TorchPolicy
from rlvr_env.token_obs import PAD, TokenContextSpace

__all__ = ["DEFAULT_ARCH", "INITS", "TinyLM", "TransformerPolicy", "answer_lengths", "build_network",
           "copy_from_sb3", "copy_to_sb3", "sb3_extractor_class", "sb3_policy_kwargs"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: :class:`TinyLM`'s initialisations (``policy_kwargs`` ``init``).
INITS = ("torch", "gpt2")
#: The default architecture (the R1 recipe's base, chosen with ``python -m benchmarks.r1.base_search``).
DEFAULT_ARCH = {"d_model": 128, "n_layers": 3, "n_heads": 4}
#: The most tokens a row may grow by between two rollout calls and still be served by the KV cache: the
#: action and the tokens the env wrote after it (a calculator's result and its ';').
MAX_EXTENSION = 16
_HASH = np.random.default_rng(20250616).integers(1, 2**62, size=4096, dtype=np.int64)  # row hash weights


def _check_space(space: gym.Space) -> TokenContextSpace:
    if not isinstance(space, TokenContextSpace):
        raise ValueError(
            f"the transformer policy reads the token context; the env observes {space}. Make the env "
            "with observation='tokens' (e.g. env_kwargs={'observation': 'tokens'})"
        )
    return space


def answer_lengths(ids: np.ndarray, prompt_width: int) -> np.ndarray:
    """(n,) answer tokens emitted so far in each context row (n, C): the non-padding answer positions."""
    return (np.asarray(ids)[:, prompt_width:] != PAD).sum(axis=1)


class _Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        shape = (n, t, self.n_heads, d // self.n_heads)
        return tuple(z.reshape(shape).transpose(1, 2) for z in (q, k, v))  # type: ignore[return-value]

    def forward(self, x: torch.Tensor, allowed: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x (n, t, d); allowed (n, 1, t, t_past + t) bool; past: keys, values (n, h, t_past, dh)."""
        q, k, v = self._heads(x)  # (n, h, t, dh)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (n, h, t, dh)
        x = x + self.proj(att.transpose(1, 2).reshape(x.shape))
        x = x + self.ff2(F.gelu(self.ff1(self.ln2(x))))
        return x, (k, v)


class TinyLM(nn.Module):
    """Decoder-only transformer over context ids (n, C): ``trunk`` gives hidden states, ``head`` logits.

    ``init`` chooses the initial weights, every draw from a generator seeded by ``seed`` (one seed gives
    one network, for GRPO and for SB3 alike):

    - ``"torch"`` (the default): PyTorch's own defaults for each module, reproduced with the seeded
      generator (PyTorch draws them from its global generator): a linear layer's weight and bias
      U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (``kaiming_uniform_(a=sqrt(5))`` and its bias rule),
      embeddings N(0, 1), LayerNorms ones and zeros;
    - ``"gpt2"``: as GPT-2 (normal(0, 0.02) weights, zero biases, unit LayerNorms, residual output
      projections scaled by 1/sqrt(2 * layers)). On this small network it trains a much weaker cold
      start (docs/r1.md, "the base").
    """

    def __init__(self, vocab_size: int, context_length: int, n_actions: int, *, seed: int,
                 d_model: int = DEFAULT_ARCH["d_model"], n_layers: int = DEFAULT_ARCH["n_layers"],
                 n_heads: int = DEFAULT_ARCH["n_heads"], d_ff: int | None = None,
                 init: str = "torch") -> None:
        super().__init__()
        if init not in INITS:
            raise ValueError(f"init={init!r} must be one of {INITS}")
        for name, value in (("d_model", d_model), ("n_layers", n_layers), ("n_heads", n_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be a multiple of n_heads={n_heads}")
        d_ff = 2 * d_model if d_ff is None else int(d_ff)
        self.arch = {"d_model": d_model, "n_layers": n_layers, "n_heads": n_heads, "d_ff": d_ff}
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(context_length, d_model)
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_actions)
        self.init = init
        gen = torch.Generator().manual_seed(int(seed))
        with torch.no_grad():
            if init == "gpt2":
                self._init_gpt2(gen, n_layers)
            else:
                self._init_torch(gen)

    def _init_gpt2(self, gen: torch.Generator, n_layers: int) -> None:
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            else:
                std = 0.02 / np.sqrt(2 * n_layers) if name.endswith(("proj.weight", "ff2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std, generator=gen)

    def _init_torch(self, gen: torch.Generator) -> None:
        """PyTorch's default initialisation of each module, module by module in a fixed order, drawn
        from ``gen``."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                fan_in = module.in_features
                # kaiming_uniform_(a=sqrt(5)), computed as PyTorch does (bound = 1/sqrt(fan_in))
                bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 5)) / math.sqrt(fan_in)
                nn.init.uniform_(module.weight, -bound, bound, generator=gen)
                nn.init.uniform_(module.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=gen)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 1.0, generator=gen)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def hidden(self, ids: torch.Tensor
               ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]], int]:
        """Hidden states of context ids (n, t) (left padding allowed), each layer's keys and values (the
        KV cache), and ``start``: both cover columns ``[start, t)`` only, where ``start`` counts the
        leading columns that are padding in every row. Dropping them is exact (padding is never
        attended to and positions keep their own embeddings); it saves work on a batch of short
        prompts."""
        n, t = ids.shape
        start = _leading_padding(ids)
        ids = ids[:, start:]
        w = t - start
        keys = ids != PAD  # (n, w)
        causal = torch.ones(w, w, dtype=torch.bool).tril()
        # A padding query attends to itself only (its output is never read; this keeps softmax finite).
        allowed = (causal[None] & keys[:, None, :]) | torch.eye(w, dtype=torch.bool)[None]
        x = self.tok(ids) + self.pos.weight[start:t]
        cache = []
        for block in self.blocks:
            x, kv = block(x, allowed[:, None], None)
            cache.append(kv)
        return self.ln_f(x), cache, start

    def answer_hidden(self, prompts: torch.Tensor, owner: torch.Tensor, answers: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing with a shared prompt: the hidden state (U, d) of each distinct prompt's last
        token (prompts (U, P), left-padded) and the hidden states (S, T, d) of answers (S, T)
        (right-padded), answer s continuing prompt ``owner[s]``. Each prompt is computed once, however
        many answers share it (GRPO's G answers per prompt), and its keys and values serve them all;
        the result equals :meth:`hidden` on the concatenated rows."""
        hp, cache, start = self.hidden(prompts)
        last = hp[:, -1]  # left-padded: the last column is the prompt's last token
        s, t = answers.shape
        if t == 0:
            return last, hp.new_zeros((0, 0, hp.shape[-1]))
        p = prompts.shape[1]
        keys = (prompts[:, start:] != PAD)[owner]  # (S, P - start)
        causal = torch.ones(t, t, dtype=torch.bool).tril()  # answers are right-padded: causal suffices
        allowed = torch.cat([keys[:, None, :].expand(s, t, -1), causal[None].expand(s, t, t)], dim=2)
        x = self.tok(answers) + self.pos.weight[p:p + t]
        for block, (k, v) in zip(self.blocks, cache):
            x, _ = block(x, allowed[:, None], (k[owner], v[owner]))
        return last, self.ln_f(x)

    def step(self, ids: torch.Tensor, position: int, keys: torch.Tensor,
             cache: list[tuple[torch.Tensor, torch.Tensor]]
             ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Hidden state (n, d) of one new (non-padding) token per row at ``position``, given the cache
        of the positions before it and which of them are real tokens, ``keys`` (n, cached positions)."""
        n = ids.shape[0]
        allowed = torch.cat([keys, torch.ones(n, 1, dtype=torch.bool)], dim=1)[:, None, None, :]
        x = (self.tok(ids) + self.pos.weight[position])[:, None, :]  # (n, 1, d)
        new_cache = []
        for block, past in zip(self.blocks, cache):
            x, kv = block(x, allowed, past)
            new_cache.append(kv)
        return self.ln_f(x[:, 0]), new_cache

    def extend(self, ids: torch.Tensor, positions: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor,
               cache: list[tuple[torch.Tensor, torch.Tensor]]
               ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Hidden states (n, K, d) of up to K new tokens per row, ids and positions (n, K), ``valid``
        (n, K) marking the real ones (left-aligned), given the cache of the tokens before them and which
        of its columns are real tokens, ``keys`` (n, W). The new tokens attend to the cache and, causally,
        to each other; an invalid one (padding) attends to itself only, and its output is not read."""
        n, k = ids.shape
        causal = torch.ones(k, k, dtype=torch.bool).tril()
        own = (causal[None] & valid[:, None, :]) | torch.eye(k, dtype=torch.bool)[None]
        allowed = torch.cat([keys[:, None, :].expand(n, k, -1), own], dim=2)[:, None]  # (n, 1, K, W + K)
        x = self.tok(ids) + self.pos.weight[positions]
        new_cache = []
        for block, past in zip(self.blocks, cache):
            x, kv = block(x, allowed, past)
            new_cache.append(kv)
        return self.ln_f(x), new_cache


def _leading_padding(ids: torch.Tensor) -> int:
    """How many leading columns of ids (n, t) are padding in every row."""
    real = (ids != PAD).any(dim=0)  # (t,)
    return int(real.to(torch.int8).argmax()) if bool(real.any()) else 0


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of (n, w) in a fixed (sorted) order, and each row's index among them (n,)."""
    if len(rows) == 0:
        return rows, np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, inverse.reshape(-1)


def build_network(space: gym.Space, n_actions: int, seed: int, dtype: str = "float32",
                  **arch: Any) -> TinyLM:
    """The :class:`TinyLM` for a token-context observation space (``ValueError`` for any other)."""
    ctx = _check_space(space)
    if dtype not in _DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one of {sorted(_DTYPES)}")
    unknown = set(arch) - {"d_model", "n_layers", "n_heads", "d_ff", "init"}
    if unknown:
        raise ValueError(f"unknown transformer arguments {sorted(unknown)}; "
                         "use d_model, n_layers, n_heads, d_ff, init, dtype")
    net = TinyLM(len(ctx.vocab), ctx.shape[0], n_actions, seed=seed, **arch)
    return net.to(_DTYPES[dtype])


def _row_hash(ids: np.ndarray) -> np.ndarray:
    """(n,) int64 polynomial hash of context rows (wrapping arithmetic); equal rows, equal hashes."""
    return (ids * _HASH[: ids.shape[1]]).sum(axis=1)


class TransformerPolicy(TorchPolicy, CriticPolicy):
    """GRPO's causal-transformer policy over the token context (see the module docstring).

    ``policy_kwargs``: ``d_model`` (128), ``n_layers`` (3), ``n_heads`` (4), ``d_ff`` (2 d_model),
    ``init`` ("torch"; "gpt2", see :class:`TinyLM`), ``dtype`` ("float32"; "float64" for exact
    agreement tests). Adam (eps 1e-5) as the MLP policy.
    """

    kind = "transformer"
    preset = "transformer"
    token_observation = True

    def __init__(self, observation_space: gym.Space, n_actions: int, learning_rate: float, *, seed: int,
                 max_grad_norm: float | None = 0.5, dtype: str = "float32", **arch: Any) -> None:
        space = _check_space(observation_space)
        self.n_actions = n_actions
        self.prompt_width = space.prompt_width
        self.answer_offset = space.answer_offset
        self.context_length = int(space.shape[0])
        self.max_grad_norm = max_grad_norm
        self.dtype = _DTYPES.get(dtype, torch.float32)
        self.net = build_network(space, n_actions, seed, dtype, **arch)
        self.reference = copy.deepcopy(self.net).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=learning_rate, eps=1e-5)
        self._cache: dict[str, Any] | None = None
        self.cache_hits = 0  # calls served by the KV cache (one new token per row), for tests and speed

    # -- rollout: logits with a KV cache --------------------------------------------------------
    def logits(self, obs: np.ndarray) -> np.ndarray:
        ids = np.asarray(obs, dtype=np.int64).reshape(-1, self.context_length)
        # Equal rows (the G answers of a group share the prompt and often their first tokens) are
        # computed once.
        uniq, inverse = _unique_rows(ids)
        t = answer_lengths(uniq, self.prompt_width)
        with torch.inference_mode():
            h = self._cached_step(uniq, t)
            if h is None:
                h = self._full(uniq, t)
            return self.net.head(h).double().numpy()[inverse]

    def _full(self, ids: np.ndarray, t: np.ndarray) -> torch.Tensor:
        p = self.prompt_width
        width = p + int(t.max())
        x = torch.as_tensor(ids[:, :width])
        hidden, cache, start = self.net.hidden(x)
        # keep the keys and values for the next call; "common": the answer length every row shares (a
        # lockstep batch), else None (rows of different lengths, as after tokens the env wrote)
        common = int(t[0]) if (t == t[0]).all() else None
        self._cache = {"ids": ids.copy(), "t": t.copy(), "common": common, "hash": _row_hash(ids),
                       "keys": x[:, start:] != PAD, "kv": cache}
        return hidden[torch.arange(len(ids)), torch.as_tensor(p + t - 1 - start)]

    def _cached_step(self, ids: np.ndarray, t: np.ndarray) -> torch.Tensor | None:
        """The hidden states of the last tokens when every row extends a cached row: by one token at a
        position all rows share (a lockstep rollout), else by up to :data:`MAX_EXTENSION` tokens each
        (the action and the tokens the env wrote after it), or None (compute in full)."""
        c = self._cache
        if c is None:
            return None
        if c["common"] is None or not (t == c["common"] + 1).all():
            return self._extended(ids, t)
        pos = self.prompt_width + c["common"]  # where the new token sits
        parent = ids.copy()
        parent[:, pos] = PAD
        order = np.argsort(c["hash"], kind="stable")
        sorted_hash = c["hash"][order]
        h = _row_hash(parent)
        at = np.minimum(np.searchsorted(sorted_hash, h), len(order) - 1)
        src = order[at]  # (n,) the cached row each new row extends
        if not np.array_equal(c["ids"][src], parent):
            return self._extended(ids, t)
        idx = torch.as_tensor(src)
        kv = [(k[idx], v[idx]) for k, v in c["kv"]]
        keys = c["keys"][idx]
        new = torch.as_tensor(ids[:, pos])
        hidden, cache = self.net.step(new, pos, keys, kv)
        self._cache = {"ids": ids.copy(), "t": t.copy(), "common": c["common"] + 1, "hash": _row_hash(ids),
                       "keys": torch.cat([keys, (new != PAD)[:, None]], dim=1), "kv": cache}
        self.cache_hits += 1
        return hidden

    def _extended(self, ids: np.ndarray, t: np.ndarray) -> torch.Tensor | None:
        """Rows that each extend some cached row by 1 to :data:`MAX_EXTENSION` tokens: the cached keys
        and values serve their prefix, the new tokens go through the network together (their own
        positions, causal among themselves), and the new keys and values join the cache as columns
        (attention does not depend on the order of its keys)."""
        c = self._cache
        assert c is not None
        p, width = self.prompt_width, ids.shape[1]
        n = len(ids)
        order = np.argsort(c["hash"], kind="stable")
        sorted_hash = c["hash"][order]
        prefix_hash = np.cumsum(ids * _HASH[:width], axis=1)  # (n, C): the hash of each prefix
        src = np.full(n, -1, dtype=np.int64)
        grown = np.zeros(n, dtype=np.int64)
        cols = np.arange(width)[None, :]
        for k in range(1, MAX_EXTENSION + 1):
            rows = np.flatnonzero((src < 0) & (t >= k))
            if not len(rows):
                break
            h = prefix_hash[rows, p + t[rows] - k - 1]
            at = np.minimum(np.searchsorted(sorted_hash, h), len(order) - 1)
            cand = order[at]
            hit = (sorted_hash[at] == h) & (c["t"][cand] == t[rows] - k)
            rows, cand = rows[hit], cand[hit]
            parent = np.where(cols < (p + t[rows] - k)[:, None], ids[rows], PAD)
            exact = (c["ids"][cand] == parent).all(axis=1)
            src[rows[exact]], grown[rows[exact]] = cand[exact], k
        if (src < 0).any():
            return None
        span = int(grown.max())
        j = np.arange(span)[None, :]
        valid = j < grown[:, None]  # (n, K)
        positions = np.where(valid, (p + t - grown)[:, None] + j, p + t[:, None] - 1)
        new = np.where(valid, ids[np.arange(n)[:, None], np.minimum(positions, width - 1)], PAD)
        idx = torch.as_tensor(src)
        kv = [(k_[idx], v_[idx]) for k_, v_ in c["kv"]]
        keys = c["keys"][idx]
        valid_t = torch.as_tensor(valid)
        hidden, cache = self.net.extend(torch.as_tensor(new), torch.as_tensor(positions), keys, valid_t, kv)
        self._cache = {"ids": ids.copy(), "t": t.copy(), "common": None, "hash": _row_hash(ids),
                       "keys": torch.cat([keys, valid_t], dim=1), "kv": cache}
        self.cache_hits += 1
        return hidden[torch.arange(n), torch.as_tensor(grown - 1)]

    # -- training: every token's log-prob from one teacher-forced pass --------------------------
    def _chains(self, ids: np.ndarray, actions: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Group token rows into answers: row j+1 continues row j when it is row j's context with row
        j's action appended (and, after it, any tokens the env wrote). Returns (each row's answer index (T,), each answer's last row (S,))."""
        n = len(ids)
        cont = np.zeros(n, dtype=bool)
        if n > 1:
            # Row j+1 continues row j when it holds row j's context, then row j's action, then perhaps
            # tokens the env wrote after it (a tool's output, never actions): t grows by one or more.
            p, tj = self.prompt_width, t[:-1]
            room = p + tj < self.context_length
            at = np.minimum(p + tj, self.context_length - 1)
            before = np.arange(ids.shape[1])[None, :] < (p + tj)[:, None]
            same = ((ids[1:] == ids[:-1]) | ~before).all(axis=1)
            acted = ids[1:][np.arange(n - 1), at] == self.answer_offset + actions[:-1]
            cont[1:] = room & (t[1:] >= tj + 1) & same & acted
        chain = np.cumsum(~cont) - 1  # (T,)
        last = np.flatnonzero(np.append(~cont[1:], True))  # (S,) the last row of each answer
        return chain, last

    def network_logits(self, net: nn.Module, obs: np.ndarray, actions: np.ndarray | None) -> torch.Tensor:
        """(T, V) logits of token rows (contexts ``obs`` (T, C)) in one teacher-forced pass (``actions``
        chain the rows of one answer; without them each row is its own answer): each distinct answer is
        computed once, and each distinct prompt once for all its answers (:meth:`TinyLM.answer_hidden`).
        Rollouts use :meth:`logits` instead, which keeps a KV cache."""
        assert isinstance(net, TinyLM)
        ids = np.asarray(obs, dtype=np.int64).reshape(-1, self.context_length)
        t = answer_lengths(ids, self.prompt_width)
        if actions is None:  # nothing chains the rows: each is its own answer
            chain = last = np.arange(len(ids))
        else:
            chain, last = self._chains(ids, np.asarray(actions, dtype=np.int64).reshape(-1), t)
        p = self.prompt_width
        width = p + int(t.max())
        answers, answer_of = _unique_rows(ids[last, :width])  # (A, W), (S,)
        prompts, owner = _unique_rows(answers[:, :p])  # (U, P), (A,)
        last_h, answer_h = net.answer_hidden(torch.as_tensor(prompts), torch.as_tensor(owner),
                                             torch.as_tensor(answers[:, p:]))
        a = answer_of[chain]  # (T,) each row's distinct answer
        span = width - p
        # A row with no answer token yet reads its prompt's last state; others their answer's.
        index = np.where(t == 0, owner[a], len(prompts) + a * span + t - 1)
        flat = torch.cat([last_h, answer_h.reshape(-1, last_h.shape[-1])])
        return net.head(flat[torch.as_tensor(index)])

    # -- the critic of advantage="gae" (agents.policies.torch_base) -------------------------------
    def _value_network(self) -> TinyLM:
        critic = copy.deepcopy(self.net)
        critic.head = nn.Linear(critic.arch["d_model"], 1).to(self.dtype)
        nn.init.zeros_(critic.head.weight)
        nn.init.zeros_(critic.head.bias)
        return critic

    def _drop_caches(self) -> None:
        self._cache = None


# -- the same network for Stable-Baselines3 -------------------------------------------------------
def sb3_extractor_class() -> type:
    """The SB3 features-extractor class over the token context (SB3 is imported here, lazily)."""
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor  # lazy: SB3

    class _Extractor(BaseFeaturesExtractor):
        """SB3 features extractor: the :class:`TinyLM` trunk's hidden state at the context's last token."""

        def __init__(self, observation_space: gym.Space, n_actions: int, seed: int, **arch: Any) -> None:
            net = build_network(observation_space, n_actions, seed, "float32", **arch)
            super().__init__(observation_space, features_dim=net.arch["d_model"])
            space = _check_space(observation_space)
            self.prompt_width = space.prompt_width
            self.lm = net  # its head is unused here: copy_to_sb3 puts it into action_net

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            ids = observations.long()  # SB3 casts Box observations to float; ids are small integers
            t = (ids[:, self.prompt_width:] != PAD).sum(dim=1)
            width = self.prompt_width + int(t.max())
            hidden, _, start = self.lm.hidden(ids[:, :width])
            return hidden[torch.arange(len(ids)), self.prompt_width + t - 1 - start]

    return _Extractor


def sb3_policy_kwargs(n_actions: int, seed: int, *, share_features_extractor: bool = True,
                      **arch: Any) -> dict[str, Any]:
    """``policy_kwargs`` for SB3 ``PPO("MlpPolicy", ...)`` / ``MaskablePPO("MlpPolicy", ...)`` that make
    the actor this module's transformer: the trunk as features extractor (shared with the critic, SB3's
    default, or with ``share_features_extractor=False`` a second trunk of the same architecture for the
    critic, so the value loss cannot move the actor's pretrained trunk), no extra MLP layers
    (``net_arch=[]``), and no orthogonal re-initialisation (``ortho_init=False``), so the trunks keep the
    seeded initial weights. Call :func:`copy_to_sb3` after construction to give ``action_net`` the head's
    weights (the same start as GRPO's policy for that seed, or its SFT)."""
    return {
        "features_extractor_class": sb3_extractor_class(),
        "features_extractor_kwargs": {"n_actions": n_actions, "seed": seed, **arch},
        "net_arch": [],
        "ortho_init": False,
        "share_features_extractor": bool(share_features_extractor),
    }


def copy_to_sb3(source: TinyLM | TransformerPolicy, sb3_model: Any) -> None:
    """Copy a transformer (a :class:`TransformerPolicy`'s network, e.g. after the cold start, or a
    :class:`TinyLM`) into an SB3 model built with :func:`sb3_policy_kwargs`: trunk into the features
    extractor, head into ``action_net``; a separate critic trunk (``share_features_extractor=False``)
    gets the same trunk weights, as PPO for language models starts its value model from the policy's.
    The critic's ``value_net`` stays fresh. ``ValueError`` when the architectures differ."""
    net = source.net if isinstance(source, TransformerPolicy) else source
    policy = sb3_model.policy
    extractor = getattr(policy, "features_extractor", None)
    lm = getattr(extractor, "lm", None)
    if not isinstance(lm, TinyLM):
        raise ValueError("the SB3 model was not built with sb3_policy_kwargs(): no transformer extractor")
    src, dst = net.state_dict(), lm.state_dict()
    if {k: tuple(v.shape) for k, v in src.items()} != {k: tuple(v.shape) for k, v in dst.items()}:
        raise ValueError(f"transformer architectures differ: {net.arch} vs {lm.arch}")
    critic = getattr(getattr(policy, "vf_features_extractor", None), "lm", None)
    with torch.no_grad():
        for trunk in (lm,) if critic is None or critic is lm else (lm, critic):
            trunk.load_state_dict({k: v.to(dst[k].dtype) for k, v in src.items()})
        policy.action_net.weight.copy_(net.head.weight.to(policy.action_net.weight.dtype))
        policy.action_net.bias.copy_(net.head.bias.to(policy.action_net.bias.dtype))


def copy_from_sb3(sb3_model: Any, target: TinyLM | TransformerPolicy) -> None:
    """The inverse of :func:`copy_to_sb3`: an SB3 actor built with :func:`sb3_policy_kwargs` (features
    extractor trunk + ``action_net``) into a transformer, which then gives exactly the SB3 actor's
    logits; so an SB3-trained transformer is evaluated by the same KV-cached decoder as GRPO's (the
    critic is dropped). ``ValueError`` when the architectures differ."""
    policy = sb3_model.policy
    lm = getattr(getattr(policy, "features_extractor", None), "lm", None)
    if not isinstance(lm, TinyLM):
        raise ValueError("the SB3 model was not built with sb3_policy_kwargs(): no transformer extractor")
    net = target.net if isinstance(target, TransformerPolicy) else target
    src, dst = lm.state_dict(), net.state_dict()
    trunk = {k: v for k, v in dst.items() if not k.startswith("head.")}
    if {k: tuple(v.shape) for k, v in src.items() if not k.startswith("head.")} != {
            k: tuple(v.shape) for k, v in trunk.items()}:
        raise ValueError(f"transformer architectures differ: {lm.arch} vs {net.arch}")
    with torch.no_grad():
        net.load_state_dict({**{k: src[k].to(v.dtype) for k, v in trunk.items()},
                             "head.weight": policy.action_net.weight.detach().to(dst["head.weight"].dtype),
                             "head.bias": policy.action_net.bias.detach().to(dst["head.bias"].dtype)})
    if isinstance(target, TransformerPolicy):
        target._drop_caches()
