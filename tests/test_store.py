"""The run files (benchmarks/core/store.py) on their own, without a study or Ray: the keys and digests
that every stored run is named by (pinned: a change would retrain every committed study), the file's
layout, each check of :func:`check_run` with its exact reason and message, and the quarantine."""

from __future__ import annotations

import hashlib
import json
import platform
import re
from importlib import metadata
from pathlib import Path

import pytest

from benchmarks.core import store
from benchmarks.core.store import RunFileError, check_run, load_run, quarantine, save_run

VERSION = {"code": 1, "libraries": {"numpy": "2.0"}}


def test_library_versions_reads_python_and_each_distribution_or_none() -> None:
    got = store.library_versions(("numpy", "no-such-distribution-here"))
    assert got == {"python": platform.python_version(), "numpy": metadata.version("numpy"),
                   "no-such-distribution-here": None}
    assert list(store.library_versions()) == ["python", *store.LIBRARIES]


def test_code_version_is_the_constant_and_the_libraries() -> None:
    given = {"numpy": "1.0"}
    got = store.code_version(given)
    assert got == {"code": store.CODE_VERSION, "libraries": {"numpy": "1.0"}}
    assert got["libraries"] is not given  # a copy: the caller's mapping is not kept
    assert store.code_version() == {"code": store.CODE_VERSION, "libraries": store.library_versions()}


def test_the_digests_that_name_stored_runs_never_change() -> None:
    obj = {"b": 1, "a": [1, 2]}
    assert store.digest(obj) == "3813f9409eb0"
    assert store.digest(obj, 20) == "3813f9409eb0095bf9c8"
    assert store.digest(obj) == hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]
    assert store.run_key("grpo", {"seed": 3, "lr": 0.1}) == "grpo__s3__8a5feaeae0ce"
    assert store.fingerprint("m:f", {"seed": 3}, VERSION) == (
        "a4e48f1115e5c7ebac7d81fbec8392e185bfff6767c56038436c0d3bef61e558")
    assert store.checksum("k", "fp", {"x": [1, 2], "p": "a"}) == (
        "64a67ea50aaf926da8117b0abbf28931e915a7a21b9296f34560b2399eff379c")


def test_the_fingerprint_names_a_moved_function_as_its_stored_runs_do() -> None:
    spec = {"seed": 0}
    for new, old in store.STORED_NAMES.items():
        assert store.fingerprint(new, spec, VERSION) == store.fingerprint(old, spec, VERSION)
        assert store.fingerprint(new, spec, VERSION) != store.fingerprint(new + "x", spec, VERSION)
    assert store.fingerprint("m:f", spec) == store.fingerprint("m:f", spec, store.code_version())
    assert store.fingerprint("m:f", spec, VERSION) != store.fingerprint("m:f", {"seed": 1}, VERSION)
    # the canonical form: compact separators, sorted keys, anything else as str
    payload = {"fn": "m:f", "spec": {"p": Path("a")}, "version": VERSION}
    want = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode())
    assert store.fingerprint("m:f", {"p": Path("a")}, VERSION) == want.hexdigest()


def test_every_moved_run_function_is_found_under_its_new_name() -> None:
    """A :data:`store.STORED_NAMES` key is the ``module:function`` a study names today: it must import."""
    import importlib

    for new in store.STORED_NAMES:
        module, _, name = new.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), new


def test_wrap_stores_the_json_round_trip_and_its_checksum() -> None:
    wrapped = store.wrap("k", "fp", {"pair": (1, 2), "where": Path("x")})
    assert wrapped == {"format": store.STORE_FORMAT, "key": "k", "fingerprint": "fp",
                       "checksum": store.checksum("k", "fp", {"pair": [1, 2], "where": "x"}),
                       "record": {"pair": [1, 2], "where": "x"}}
    assert store.STORE_FORMAT == 3


def test_save_run_writes_the_key_s_file_that_check_run_reads_back(tmp_path: Path) -> None:
    path = save_run(tmp_path / "runs", "k", "fp", {"v": 1.5})
    assert path == tmp_path / "runs" / "k.json"
    assert path.read_text() == json.dumps(store.wrap("k", "fp", {"v": 1.5}), indent=1) + "\n"
    assert check_run(path) == {"v": 1.5}  # key from the stem, fingerprint not compared
    assert check_run(path, "k", "fp") == {"v": 1.5}
    assert load_run(path, "k", "fp") == {"v": 1.5}
    assert load_run(tmp_path / "runs" / "none.json", "none", "fp") is None


def _file(tmp_path: Path, content: str | bytes, name: str = "k.json") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def _good(**changes: object) -> str:
    data = store.wrap("k", "fp", {"v": 1})
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize("content, reason, detail", [
    (b"\xff\xfe", "binary", "is not UTF-8 text (binary garbage?)"),
    ('{"format": 3', "corrupt", "is not valid JSON (truncated?): Expecting ',' delimiter at 12"),
    ("[1, 2]", "schema", "holds a JSON list, not a run file object"),
    ('{"format": 2}', "format", "has format 2, not this code's run-file format 3"),
    ("{}", "format", "has format None, not this code's run-file format 3"),
    ('{"format": 3, "key": "k", "record": {}}', "schema", "lacks ['fingerprint', 'checksum']"),
    (_good(record=[1]), "schema", "lacks ['a record object']"),
    (_good(checksum="0" * 64), "checksum", "fails its checksum (its content was edited)"),
    (json.dumps(store.wrap("other", "fp", {"v": 1})), "key",
     "holds the run 'other', not 'k' (copied under another name?)"),
    (json.dumps(store.wrap("k", "fp2", {"v": 1})), "fingerprint",
     "was made from another spec or code version (settings, library versions or CODE_VERSION changed)"),
])
def test_check_run_names_what_is_wrong(content: str | bytes, reason: str, detail: str,
                                       tmp_path: Path) -> None:
    path = _file(tmp_path, content)
    with pytest.raises(RunFileError) as err:
        check_run(path, "k", "fp")
    assert (err.value.reason, err.value.detail, err.value.path) == (reason, detail, path)
    assert str(err.value) == f"{path}: {detail}" and isinstance(err.value, ValueError)


def test_check_run_compares_the_fingerprint_only_when_given_and_the_key_against_the_stem(
        tmp_path: Path) -> None:
    path = _file(tmp_path, json.dumps(store.wrap("k", "fp2", {"v": 1})))
    assert check_run(path) == {"v": 1} and check_run(path, "k") == {"v": 1}
    with pytest.raises(RunFileError, match=r"holds the run 'k', not 'j'") as err:
        check_run(_file(tmp_path, path.read_text(), "j.json"))
    assert err.value.reason == "key"


def test_a_folder_at_the_run_file_s_name_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "k.json").mkdir()
    with pytest.raises(RunFileError, match=r"k\.json: cannot be read \(Is a directory\)$") as err:
        check_run(tmp_path / "k.json")
    assert err.value.reason == "unreadable"


def test_quarantine_moves_the_file_with_a_counter_and_warns_once(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs" / "k.json"
    path.parent.mkdir()
    targets = []
    for i in range(3):
        path.write_text(f"copy {i}")
        targets.append(quarantine(RunFileError(path, "corrupt", "is broken"), warn=i != 1))
        assert not path.exists()
    folder = tmp_path / "runs" / "quarantine"
    assert targets == [folder / "k.json.corrupt", folder / "k.json.corrupt.1", folder / "k.json.corrupt.2"]
    assert [t.read_text() for t in targets] == ["copy 0", "copy 1", "copy 2"]
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: run file {path} is broken; moved to {t}, training the run again"
                   for t in (targets[0], targets[2])]


def test_quarantine_counts_past_a_dangling_link(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text("x")
    (tmp_path / "quarantine").mkdir()
    (tmp_path / "quarantine" / "k.json.key").symlink_to(tmp_path / "nowhere")
    target = quarantine(RunFileError(path, "key", "is elsewhere"), warn=False)
    assert target == tmp_path / "quarantine" / "k.json.key.1" and target.read_text() == "x"


def test_load_run_quarantines_a_bad_file_and_says_so(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, _good(checksum="0" * 64))
    assert load_run(path, "k", "fp") is None
    assert not path.exists() and (tmp_path / "quarantine" / "k.json.checksum").is_file()
    line = capsys.readouterr().err.strip()
    assert re.fullmatch(rf"warning: run file {re.escape(str(path))} fails its checksum \(its content was "
                        rf"edited\); moved to .*k\.json\.checksum, training the run again", line)


def test_a_given_key_is_checked_instead_of_the_stem_and_load_run_checks_key_and_fingerprint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, json.dumps(store.wrap("j", "fp", {"v": 1})))  # k.json holding run j
    assert check_run(path, "j", "fp") == {"v": 1}
    assert load_run(path, "j", "fp") == {"v": 1}
    assert load_run(path, "j", "fp2") is None  # another spec: quarantined, trained again
    assert (tmp_path / "quarantine" / "k.json.fingerprint").is_file()
    path = _file(tmp_path, json.dumps(store.wrap("j", "fp", {"v": 1})))
    assert load_run(path, "k", "fp") is None
    assert (tmp_path / "quarantine" / "k.json.key").is_file()
    assert capsys.readouterr().err.count("warning: run file") == 2
