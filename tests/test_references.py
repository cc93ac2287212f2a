"""Every reference a reader can follow points at something that exists: the relative links of README.md
and the ``docs/`` pages (the file, and the heading a ``#anchor`` names), and the references to those
pages in the code's docstrings and comments (``rlvr_env``, ``agents``, ``benchmarks``, ``tests``).

A reference in the code is a page (``README`` or ``README.md``, another top-level upper-case ``<NAME>.md``
such as ``CHANGELOG.md``, or ``docs/<page>.md``), optionally followed by a ``#anchor`` or by a quoted
section: ``docs/envs.md, "Rendering"``, ``docs/r1.md ("The base")``, ``README's "The two commands"``.
An anchor must be one GitHub gives a heading of that page; a quoted section must be a heading's text, or
the part of it before its first ``": "`` or ``" ("``, in any case.
In ``rlvr_env``, ``agents`` and ``benchmarks`` every string is read too (an error message naming a page
is a reference); in ``tests`` only docstrings and comments (test data names pages that do not exist).
And no reference a reader cannot follow at all: no tracker number in the code, the pages or the committed
result tables (history goes in CHANGELOG.md).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE_PACKAGES = ("rlvr_env", "agents", "benchmarks")
TEST_PACKAGES = ("tests",)

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
#: a page reference in code: the page, then an optional #anchor or an optional quoted section
_REFERENCE = re.compile(
    r"(?<![\w/.-])(?P<page>README(?:\.md)?|[A-Z][A-Z_-]*\.md|docs/[\w.-]+?\.md)(?![\w-]|\.\w)"
    r"(?:#(?P<anchor>[\w-]+)|(?:'s)?,?\s*\(?\"(?P<section>[^\"]{1,120})\")?"
)


# -- markdown pages ------------------------------------------------------------------------------------

def _prose_lines(text: str) -> list[str]:
    """The lines of a markdown page outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def headings(text: str) -> list[str]:
    """The text of every heading of a markdown page (outside code), links and markup removed."""
    out = []
    for line in _prose_lines(text):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is not None:
            title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
            out.append(title.replace("`", "").replace("*", ""))
    return out


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: the heading's text without markup, lower-cased,
    every character that is not a letter, digit, ``_``, ``-`` or space dropped, spaces made ``-``;
    a repeated anchor gets ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for title in headings(text):
        slug = "".join(c for c in title.lower() if c.isalnum() or c in "_- ").replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def section_names(text: str) -> set[str]:
    """The names a quoted section may use for a page's headings (lower-cased): each heading's whole
    text, and its text before the first ``": "`` or ``" ("``."""
    out = set()
    for title in headings(text):
        out.add(title.lower())
        out.add(re.split(r": | \(", title, maxsplit=1)[0].lower())
    return out


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """Every relative link of ``page`` (outside code) whose file, or whose ``#anchor`` in a markdown
    file, does not exist, as ``"target (reason)"``; ``text``: read it instead of the file's text."""
    text = page.read_text(encoding="utf-8") if text is None else text
    broken = []
    for line in _prose_lines(text):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if _URL.match(target):
                continue  # a URL: not checked offline
            path, _, anchor = target.partition("#")
            dest = page if not path else (page.parent / path).resolve()
            if not dest.exists():
                broken.append(f"{target} (no such file)")
            elif anchor and dest.suffix == ".md" \
                    and anchor not in anchors(text if dest == page else dest.read_text(encoding="utf-8")):
                broken.append(f"{target} (no heading with that anchor)")
    return broken


# -- references in the code ----------------------------------------------------------------------------

def _join(text: str) -> str:
    """``text`` on one line: each line break, with the indent and the ``#`` / ``#:`` comment marker of
    the next line, becomes one space (a reference may wrap)."""
    return re.sub(r"[ \t]*\n[ \t]*(?:#:?[ \t]*)?", " ", text)


def prose_of(source: str, every_string: bool) -> list[str]:
    """The texts of a Python module a reader reads as prose: each run of consecutive comment lines,
    each docstring (a string standing alone as a statement) and, if ``every_string``, every other
    string constant too."""
    texts: list[str] = []
    run: list[str] = []
    last_row = -2
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        if token.start[0] != last_row + 1 and run:
            texts.append(" ".join(run))
            run = []
        run.append(re.sub(r"^#:?\s*", "", token.string))
        last_row = token.start[0]
    if run:
        texts.append(" ".join(run))
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    in_f_strings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if every_string and isinstance(node, ast.JoinedStr):  # an f-string: its literal parts, joined
            texts.append(_join("".join(v.value for v in node.values
                                       if isinstance(v, ast.Constant) and isinstance(v.value, str))))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_f_strings \
                and (every_string or id(node) in docstrings):
            texts.append(_join(node.value))
    return texts


def broken_references(text: str, root: Path = ROOT) -> list[str]:
    """Every page reference in ``text`` whose page, anchor or quoted section does not exist under
    ``root``, as ``"reference (reason)"``."""
    broken = []
    for match in _REFERENCE.finditer(text):
        page, anchor, section = match.group("page", "anchor", "section")
        path = root / ("README.md" if page == "README" else page)
        if not path.is_file():
            broken.append(f"{match.group(0)} (no such file)")
        elif anchor and anchor not in anchors(path.read_text(encoding="utf-8")):
            broken.append(f"{match.group(0)} (no heading with that anchor)")
        elif section and section.strip().lower() not in section_names(path.read_text(encoding="utf-8")):
            broken.append(f"{match.group(0)} (no heading of that name)")
    return broken


#: a reference to a tracker a reader of the tree cannot look up (history goes in CHANGELOG.md)
_TRACKER = re.compile(r"\bissues? ?#?[0-9]+|(?<![\w&])#[0-9]{2,}\b|\bthe issue'?s? goal", re.I)


def tracker_references(text: str) -> list[str]:
    """Each line of ``text`` that cites a tracker entry: the word for one with a number, a ``#`` with
    two or more digits, or that entry's "goal"."""
    return [line.strip() for line in text.splitlines() if _TRACKER.search(line)]


def _modules(packages: tuple[str, ...]) -> list[Path]:
    return [path for package in packages for path in sorted((ROOT / package).rglob("*.py"))]


# -- the tests -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_point_at_files_and_headings_that_exist(page: Path) -> None:
    assert broken_links(page) == []


def test_the_link_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title `x` (y)\n\n## Title `x` (y)\n\n```\n# not a heading\n```\n")
    assert anchors((tmp_path / "a.md").read_text()) == {"title-x-y", "title-x-y-1"}
    page = tmp_path / "p.md"
    page.write_text("[ok](a.md#title-x-y) [ok2](a.md#title-x-y-1) `[code](gone.md)` [f](gone.md) "
                    "[h](a.md#not-a-heading) [self](#nope)\n```\n[in code](gone2.md)\n```\n")
    assert broken_links(page) == ["gone.md (no such file)",
                                  "a.md#not-a-heading (no heading with that anchor)",
                                  "#nope (no heading with that anchor)"]


def test_the_link_checker_finds_a_broken_link_planted_in_a_real_page() -> None:
    """The real README with a link to a page and one to a heading that are not there: both caught."""
    readme = ROOT / "README.md"
    planted = readme.read_text(encoding="utf-8") + "\n[x](docs/agent.md#no-such-heading) [y](docs/gone.md)\n"
    assert broken_links(readme, planted) == ["docs/agent.md#no-such-heading (no heading with that anchor)",
                                             "docs/gone.md (no such file)"]


@pytest.mark.parametrize("package", CODE_PACKAGES + TEST_PACKAGES)
def test_the_code_s_references_to_the_docs_exist(package: str) -> None:
    broken = {}
    for path in _modules((package,)):
        texts = prose_of(path.read_text(encoding="utf-8"), every_string=package in CODE_PACKAGES)
        found = [ref for text in texts for ref in broken_references(text)]
        if found:
            broken[path.relative_to(ROOT).as_posix()] = found
    assert broken == {}, f"references to pages, anchors or sections that do not exist: {broken}"


def test_the_reference_checker_reads_each_form_and_finds_each_break(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# r\n\n## The two commands\n\n```\n# Not a heading\n```\n")
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n")
    (tmp_path / "docs" / "envs.md").write_text("# Envs\n\n## Rendering: text, no frames\n\n## `x` (y)\n")
    source = '''"""See docs/envs.md, "Rendering" and README's "The two commands"; docs/envs.md#x-y and
README.md ("the two Commands") and docs/envs.md ("Rendering: text, no frames") exist."""
# a reference that wraps: docs/envs.md, "Rendering:
# text, no frames"; CHANGELOG.md; and ones that do not exist: docs/gone.md, DESIGN.md ("The layout")
x = "docs/envs.md#nope"  # README, "Not a heading"
'''
    found = [ref for text in prose_of(source, every_string=True)
             for ref in broken_references(text, tmp_path)]
    assert found == ["docs/gone.md (no such file)", 'DESIGN.md ("The layout" (no such file)',
                     'README, "Not a heading" (no heading of that name)',
                     "docs/envs.md#nope (no heading with that anchor)"]
    # in tests only docstrings and comments are read: test data may name pages that do not exist
    assert [ref for text in prose_of(source, every_string=False)
            for ref in broken_references(text, tmp_path)] == found[:3]


def test_the_reference_checker_finds_a_broken_reference_planted_in_real_code() -> None:
    """The real ``rlvr_env/envs.py`` passes; with its docs reference pointed at a section that is not
    there, it fails."""
    source = (ROOT / "rlvr_env" / "envs.py").read_text(encoding="utf-8")
    assert re.search(r'docs/envs\.md, "Rendering"', source), "the planted break needs this reference"
    assert [r for t in prose_of(source, every_string=True) for r in broken_references(t)] == []
    planted = source.replace('docs/envs.md, "Rendering"', 'docs/envs.md, "Rendering frames"', 1)
    assert [r for t in prose_of(planted, every_string=True) for r in broken_references(t)] == [
        'docs/envs.md, "Rendering frames" (no heading of that name)']


def test_no_tracker_numbers_in_the_code_the_docs_or_the_result_tables() -> None:
    """The code, README.md, the docs pages and the committed result tables (not the stored run files)."""
    results = [md for md in sorted((ROOT / "benchmarks" / "results").rglob("*.md"))
               if "runs" not in md.relative_to(ROOT).parts]
    found = {}
    for path in [*_modules(CODE_PACKAGES + TEST_PACKAGES), *PAGES, *results]:
        lines = tracker_references(path.read_text(encoding="utf-8"))
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    assert found == {}, f"tracker references (say what the thing is; history goes in CHANGELOG.md): {found}"


def test_the_tracker_check_finds_each_form() -> None:
    issue, hash_ = "iss" + "ue", "#"  # spelled apart, so this file does not cite a tracker itself
    text = (f"fixed in {issue} 12\n{issue.title()} {hash_}7 item 3\nsee {hash_}34.\nThe {issue}'s goal: 0.5\n"
            f"colour {hash_}fff, step {hash_}3, pages 12-14, {issue}d by hand\n")
    assert tracker_references(text) == [f"fixed in {issue} 12", f"{issue.title()} {hash_}7 item 3",
                                        f"see {hash_}34.", f"The {issue}'s goal: 0.5"]
