"""Maintainer tools, not experiments: copy result tables into the docs (``update_readme``), rewrite old run
files into the store's format (``migrate_runs``), time the README's main command on a fresh clone
(``fresh_install``). Each runs as ``python -m benchmarks.tools.<name>``."""
