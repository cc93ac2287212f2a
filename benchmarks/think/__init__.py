"""Measurements of the thinking env (``rlvr/CountdownThink-v0``); see docs/think.md.

``python -m benchmarks.think`` is the study (:mod:`benchmarks.think.__main__`, where its run function
lives); ``python -m benchmarks.think.solver`` measures the solver's transcripts."""

from __future__ import annotations

import argparse


def build_parser() -> argparse.ArgumentParser:
    """The study's argument parser (its module is the package's ``__main__``)."""
    from benchmarks.think.__main__ import build_parser as study_parser

    return study_parser()


def main(argv: list[str] | None = None) -> int:
    """The study's command."""
    from benchmarks.think.__main__ import main as study_main

    return study_main(argv)
