"""Runnable studies and measurements; results land in files under benchmarks/results.

``core/`` holds what every experiment uses (the executor, the run store, stats, plots, common helpers);
each study is a package on top of it (``compare``, ``countdown``, ``r1``, ``lab``, ...) and imports no
other; ``speed/`` holds the speed measurements behind one CLI and ``tools/`` the maintainer
tools. docs/experiments.md shows the layout and how to add an experiment.
"""
