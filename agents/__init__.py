"""Agents that train on rlvr_env (and any Discrete-action Gymnasium env): a generic GRPO agent and the
SB3 PPO baseline factory."""
