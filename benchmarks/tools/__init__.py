"""Maintainer tools, not experiments: copy result tables into the docs (``update_readme``), rewrite old run
files into the store's format (``migrate_runs``), time the README's main command on a fresh clone
(``fresh_install``), score the tests by mutation (``mutation``), and measure a refactor before and after:
the modules one GRPO iteration crosses (``iteration_walk``) and two clones' env speed (``ab_speed``). Each
runs as ``python -m benchmarks.tools.<name>``."""
