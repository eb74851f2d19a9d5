"""The public docs hold: every Python block of the README and every block
of a docs/ page marked runnable (a `<!-- runnable -->` line right before its
fence) runs as written; every relative link of README.md and docs/*.md
reaches a file, and its #anchor a heading there; the README stays a front
page (at most 300 lines) that links every docs page. And the public
callables of the thin modules keep their docstrings (help() shows them) now
that they are bound from C++, and the classes read as the modules' own."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

import seqflow.balance
import seqflow.pack
import seqflow.remote
import seqflow.samplers

MODULES = [seqflow.balance, seqflow.pack, seqflow.samplers, seqflow.remote]
PUBLIC = [(module, name) for module in MODULES for name in module.__all__
          if callable(getattr(module, name)) and not name.isupper()]


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_public_callable_has_a_docstring(module, name):
    doc = inspect.getdoc(getattr(module, name)) or ""
    # nanobind's own text is only the signature line: a real docstring adds prose after it.
    prose = [line for line in doc.splitlines() if line.strip() and not line.startswith(f"{name}(")]
    assert prose, f"{module.__name__}.{name} lost its docstring"


@pytest.mark.parametrize("method", ["sample", "clear", "has_cached_result", "clear_cache"])
def test_builtin_sampler_methods_keep_their_docstrings(method):
    assert inspect.getdoc(getattr(seqflow.samplers.SeqlenBalancedSampler, method))


def test_bound_classes_read_as_the_modules_own():
    assert seqflow.pack.Ragged.__module__ == "seqflow.pack"
    assert seqflow.balance.OnlineWorkload.__module__ == "seqflow.balance"
    assert seqflow.samplers.SequentialSampler.__module__ == "seqflow.samplers"
    assert seqflow.remote.ServiceHandle.__module__ == "seqflow.remote"


# --- the docs -----------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
RUNNABLE_MARK = "<!-- runnable -->"
FENCE = re.compile(r"^(```+|~~~+)(.*)$")
BLOCK_TIMEOUT = 300  # seconds per block


def fenced_blocks(path: Path) -> list[tuple[int, str, str, bool]]:
    """(line of the opening fence, info string, code, marked runnable) of each fenced block."""
    lines = path.read_text().splitlines()
    blocks, at = [], 0
    while at < len(lines):
        opening = FENCE.match(lines[at])
        if not opening:
            at += 1
            continue
        fence, info = opening.group(1), opening.group(2).strip()
        end = at + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        marked = at > 0 and lines[at - 1].strip() == RUNNABLE_MARK
        blocks.append((at + 1, info, "\n".join(lines[at + 1:end]) + "\n", marked))
        at = end + 1
    return blocks


def runnable_blocks() -> list[tuple[Path, int, str]]:
    """Every Python block of the README; the marked blocks of the docs pages."""
    found = []
    for page in PAGES:
        for line, info, code, marked in fenced_blocks(page):
            language = info.split()[0] if info else ""
            if marked or (page == README and language == "python"):
                found.append((page, line, code))
    return found


RUNNABLE = runnable_blocks()


def test_the_readme_and_the_docs_have_runnable_blocks():
    pages = {page for page, _, _ in RUNNABLE}
    assert README in pages and len(pages) > 1, pages


def test_marked_blocks_are_python():
    for page in PAGES:
        for line, info, _, marked in fenced_blocks(page):
            assert not marked or info.split()[:1] == ["python"], f"{page.name}:{line}: marked runnable, not python"


@pytest.mark.parametrize(("page", "line", "code"), RUNNABLE,
                         ids=[f"{page.relative_to(ROOT)}:{line}" for page, line, _ in RUNNABLE])
def test_runnable_block_runs_as_written(page, line, code, tmp_path):
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT)
    assert done.returncode == 0, (f"{page.relative_to(ROOT)}:{line} failed (exit {done.returncode}):\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def prose(path: Path) -> str:
    """The page without its fenced blocks and inline code."""
    return re.sub(r"`[^`\n]*`", "", prose_with_code(path))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (a repeated one gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for text in prose_with_code(path).splitlines():
        heading = re.match(r"^#{1,6} +(.*?) *#*$", text)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def prose_with_code(path: Path) -> str:
    """The page without its fenced blocks (inline code kept: headings' anchors include it)."""
    lines, inside = [], None
    for text in path.read_text().splitlines():
        opening = FENCE.match(text)
        if inside is None and opening:
            inside = opening.group(1)
            continue
        if inside is not None:
            if text.startswith(inside):
                inside = None
            continue
        lines.append(text)
    return "\n".join(lines)


LINK = re.compile(r"\]\(([^()\s]+)\)")


def relative_links() -> list[tuple[Path, str]]:
    return [(page, target) for page in PAGES for target in LINK.findall(prose(page))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto: ...


LINKS = relative_links()


def test_the_pages_have_links():
    assert len(LINKS) > 20, LINKS


@pytest.mark.parametrize(("page", "target"), LINKS, ids=[f"{p.relative_to(ROOT)}->{t}" for p, t in LINKS])
def test_relative_link_resolves(page, target):
    file_part, _, anchor = target.partition("#")
    destination = (page.parent / file_part).resolve() if file_part else page
    assert destination.exists(), f"{page.relative_to(ROOT)}: {target} names no file"
    if anchor:
        assert destination.suffix == ".md", f"{page.relative_to(ROOT)}: {target}: an anchor into a non-page"
        assert anchor in anchors(destination), (f"{page.relative_to(ROOT)}: {target}: no heading of "
                                                f"{destination.relative_to(ROOT)} has the anchor #{anchor}")


def test_the_readme_is_a_front_page_that_maps_every_docs_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the front page keeps to 300"
    linked = {(README.parent / target.partition("#")[0]).resolve() for page, target in LINKS if page == README}
    for page in sorted(DOCS.glob("*.md")):
        assert page.resolve() in linked, f"README.md does not link {page.relative_to(ROOT)}"


def test_the_readme_keeps_the_test_command():
    """.ci/run and graders run the README's test command."""
    assert "./run tests" in README.read_text() and "./run demo" in README.read_text()
