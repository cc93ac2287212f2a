"""What every experiment uses, and what two experiments share (an experiment imports no other one).

``executor`` (a study's runs on Ray: :class:`~benchmarks.core.executor.Run`, ``run_all``), ``cluster``
(connecting to Ray), ``store`` (run files, the one run-key hasher), ``common`` (output folders, the seed
syntax, CLI helpers), ``stats`` (IQM, bootstrap intervals, paired differences, verdicts), ``plots``,
``baselines`` (SB3's models and the single-number floor), ``bases`` (the cold-started base RL starts
from), ``weights`` (network weights as text).
"""
