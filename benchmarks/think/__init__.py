"""Measurements of the thinking env (``rlvr/CountdownThink-v0``); see docs/think.md."""
