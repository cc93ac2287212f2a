"""The base search (benchmarks.r1.base_search): its cells, its seeds (choosing only) and one tiny cell's
record rendered into the table."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks.r1 import base_search as r1_base  # noqa: E402
from benchmarks.core.executor import Run  # noqa: E402

SMALL = {"d_model": 32, "n_layers": 1, "n_heads": 2}


def test_cells_name_their_seeds_and_reported_seeds_are_refused(capsys) -> None:
    assert r1_base._grid("2layers,gpt2:0,3layers:1-2", [0, 1, 2]) == [
        ("2layers", [0, 1, 2]), ("gpt2", [0]), ("3layers", [1, 2])]
    with pytest.raises(ValueError, match="unknown cell 'wide'"):
        r1_base._grid("2layers,wide", [0])
    for argv in (["--seeds", "10-12"], ["--grid", "2layers:11"], ["--grid", "nope"]):
        with pytest.raises(SystemExit):
            r1_base.main(argv)
    err = capsys.readouterr().err
    assert "seeds [10, 11, 12]" in err and "seeds [11]" in err and "unknown cell 'nope'" in err
    assert all(name in r1_base.GRID for name, _ in r1_base._grid(r1_base.DEFAULT_GRID, [0]))
    # a cell changes only what it names
    merged = r1_base._merge(r1_base.GRID["gpt2"])
    assert merged["policy"] == {**r1_base.START["policy"], "init": "gpt2"}
    assert merged["sft"] == r1_base.START["sft"] and merged["threads"] == 1
    # env kwargs only where a cell sets some (the other cells' specs, hence their run keys, unchanged)
    assert "env" not in merged and "env" not in r1_base._merge(r1_base.GRID[r1_base.CHOSEN])
    whole = r1_base._merge(r1_base.GRID["3layers_epochs12_whole"])
    assert whole["env"] == {"number_tokens": "whole"}
    assert {k: v for k, v in whole.items() if k != "env"} == r1_base._merge(r1_base.GRID[r1_base.CHOSEN])
    assert r1_base._describe(whole).endswith(", number_tokens whole")
    with pytest.raises(SystemExit):
        r1_base.main(["--table", "../base"])
    assert "'../base' must be lower-case letters" in capsys.readouterr().err


def test_a_tiny_cell_is_trained_evaluated_and_tabulated() -> None:
    spec = {"seed": 1, "policy": {**SMALL, "init": "torch"},
            "sft": {**r1_base.START["sft"], "n": 300, "epochs": 1}, "threads": 1,
            "eval": {"k": 4, "prompts": 8}}
    record = r1_base.base_cell(spec)
    assert record["torch_threads"] == 1 and len(record["sft_losses"]) == 1
    assert record["sft_seconds"] > 0 and record["sft_cpu_seconds"] > 0
    for split in ("train", "test"):
        scores = record["eval"][split]
        assert set(scores["pass_at"]) == {"1", "2", "4"}
        assert scores["pass_at"]["1"] == pytest.approx(scores["sampled"])
        assert 0.0 <= scores["greedy"] <= 1.0
    task = Run("benchmarks.r1.base_search:base_cell", spec, "tiny__s1", arm="tiny")
    rows = r1_base.summarize([task], {"tiny__s1": record})
    assert rows[0]["test_greedy"] == [record["eval"]["test"]["greedy"]] and rows[0]["k"] == 4
    table = r1_base.markdown({"rows": rows, "seeds": "1", "eval": spec["eval"], "command": "cmd",
                              "machine": {}})
    assert "| tiny | 1 x 32, init torch; 300 x 1 epochs, per-prompt minibatches of 256, lr 0.001 |" in table
