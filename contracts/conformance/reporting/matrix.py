"""The results matrix: results bundles rendered as one Markdown and one static HTML page.

A row per backend (a bundle's report section) and SGLang release, a column
per level, each cell one of

    pass          every clause of the level ran and passed
    expected      it failed only where an expected failure says so (reason class and link shown)
    fail          a clause failed that no expected failure names
    error         the suite broke judging a clause (no verdict on the backend)
    incomplete    a clause of the level was skipped or not reached (other than "not applicable")
    not claimed   the backend does not claim the level (the reason is the cell's title)

and each cell links the list of its failures. The HTML page opens with an
inline SVG picture of the whole matrix, one coloured square per cell. Both
pages are deterministic functions of the bundles (no clock, no absolute
path), so a test can re-render them and compare.
"""

from __future__ import annotations

import html
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from hicache_contracts.conformance.reporting.bundle import MANIFEST, sections_from_json
from hicache_contracts.conformance.reporting.certify import not_applicable
from hicache_contracts.conformance.reporting.report import ERROR, FAIL, PASS, SKIP

__all__ = ["Cell", "Row", "find_bundles", "load_rows", "render_html", "render_markdown", "render_pages"]

STATES: dict[str, tuple[str, str, str]] = {
    "pass": ("#2e7d32", "✅", "every clause ran and passed"),
    "expected": ("#f9a825", "🟨", "fails only as its expected failures say"),
    "fail": ("#c62828", "❌", "a clause failed that no expected failure names"),
    "error": ("#6a1b9a", "💥", "the suite broke judging a clause"),
    "incomplete": ("#ef6c00", "⚠️", "a clause was skipped or not reached"),
    "not claimed": ("#bdbdbd", "–", "the level is not claimed"),
}
"""Cell state → colour, symbol, meaning."""


@dataclass(frozen=True)
class Finding:
    """One failing (or unjudged, or skipped) clause of a cell."""

    clause_id: str
    status: str
    text: str
    expected: str = ""
    """The expected failure that names it: ``reason, link``; empty when none."""


@dataclass(frozen=True)
class Cell:
    state: str
    passed: int = 0
    total: int = 0
    note: str = ""
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Row:
    backend: str
    release: str
    bundle: str
    """The bundle's folder (absolute)."""
    certified: bool
    problems: int
    cells: dict[str, Cell] = field(default_factory=dict)
    levels: tuple[str, ...] = ()

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.backend} {self.release}".lower()).strip("-")


def find_bundles(directories: Iterable[str]) -> list[Path]:
    """Return every bundle folder under ``directories`` (a bundle itself, or any folder below holding one)."""
    found: list[Path] = []
    for directory in directories:
        folder = Path(directory)
        if not folder.is_dir():
            raise ValueError(f"DIR: must be a folder holding results bundles (got {directory!r})")
        here = [folder] if (folder / MANIFEST).is_file() else []
        below = sorted(path.parent for path in folder.rglob(MANIFEST) if path.parent != folder)
        if not here and not below:
            raise ValueError(f"DIR: holds no results bundle (no {MANIFEST} in or below {directory!r})")
        found += here + below
    return list(dict.fromkeys(path.resolve() for path in found))


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", release)) or (10**9,)


def load_rows(bundles: Iterable[Path]) -> list[Row]:
    """Return a matrix row per report section of each bundle, sorted by backend, then release."""
    rows = []
    for folder in bundles:
        try:
            document = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
            sections = sections_from_json(report)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{folder}: not a readable results bundle ({type(error).__name__}: {error})") from None
        sglang = document.get("sglang") or {}
        release = sglang.get("release") or "contract models"
        entries: dict[str, dict[str, Any]] = {
            str(entry.get("clause") or entry.get("check")): entry
            for entry in document.get("expected_failures", [])
            if isinstance(entry, dict)
        }
        product = document.get("product") or {}
        for section in sections:
            label = product.get("product") or section.subject
            if len(sections) > 1:
                label = f"{label}: {section.subject}"
            cells = {level.level: _cell(section, level, entries, release) for level in section.levels}
            rows.append(
                Row(
                    label,
                    release,
                    str(folder),
                    bool(document.get("certified")),
                    len(document.get("problems") or ()),
                    cells,
                    tuple(level.level for level in section.levels),
                )
            )
    return sorted(rows, key=lambda row: (row.backend, _release_key(row.release), row.bundle))


def _expected_for(verdict: Any, entries: dict[str, dict[str, Any]], release: str) -> Optional[dict[str, Any]]:
    candidates = [entries.get(verdict.clause_id)] + [entries.get(failure.check) for failure in verdict.failures]
    for entry in candidates:
        if not entry:
            continue
        until = entry.get("until")
        if until and release != "contract models" and _release_key(release) > _release_key(str(until)):
            continue
        if entry.get("check") and not all(failure.check == entry["check"] for failure in verdict.failures):
            continue
        return entry
    return None


def _cell(section: Any, level: Any, entries: dict[str, dict[str, Any]], release: str) -> Cell:
    if not level.claimed:
        return Cell("not claimed", note=level.reason or "")
    verdicts = section.level_clauses(level.level)
    findings = []
    states = set()
    for verdict in verdicts:
        if verdict.status == FAIL:
            entry = _expected_for(verdict, entries, release)
            first = verdict.failures[0] if verdict.failures else None
            text = f"{first.check}: {first.message}" if first else "failed"
            expected = f"{entry['reason']}, {entry['link']}" if entry else ""
            findings.append(Finding(verdict.clause_id, FAIL, _one_line(text), expected))
            states.add("expected" if entry else "fail")
        elif verdict.status == ERROR:
            findings.append(Finding(verdict.clause_id, ERROR, _one_line(verdict.reason or "the suite broke")))
            states.add("error")
        elif verdict.status == SKIP and not not_applicable(section, (verdict.clause_id,), verdict.reason):
            findings.append(Finding(verdict.clause_id, SKIP, _one_line(verdict.reason or "skipped")))
            states.add("incomplete")
    state = next((name for name in ("fail", "error", "incomplete", "expected") if name in states), "pass")
    passed = sum(1 for verdict in verdicts if verdict.status == PASS)
    return Cell(state, passed, len(verdicts), level.reason or "", tuple(findings))


def _one_line(text: str, limit: int = 240) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _levels(rows: list[Row]) -> list[str]:
    """The columns: the levels of the row with the most, in its order, then any other in the order first seen."""
    widest = max(rows, key=lambda row: len(row.levels), default=None)
    first = list(widest.levels) if widest is not None else []
    return list(dict.fromkeys(first + [level for row in rows for level in row.levels]))


def _link(bundle: str, base: Path, name: str = "report.md") -> str:
    return Path(os.path.relpath(Path(bundle) / name, base)).as_posix()


def _counts(cell: Cell) -> str:
    return f"{cell.passed}/{cell.total}" if cell.state != "not claimed" else ""


def render_markdown(rows: list[Row], title: str, base: Path) -> str:
    """Return the Markdown page; links to bundles are relative to ``base`` (the page's folder)."""
    levels = _levels(rows)
    lines = [f"# {title}", "", "<!-- Generated by `hicache-conform matrix`; do not edit by hand. -->", ""]
    lines.append(
        "Legend: " + "; ".join(f"{symbol} {name} ({meaning})" for name, (_, symbol, meaning) in STATES.items())
    )
    lines.append("Each cell shows the clauses that passed of the level's clauses and links the cell's findings.")
    lines += ["", "| backend | release | certified | " + " | ".join(levels) + " |"]
    lines.append("|---|---|---|" + "---|" * len(levels))
    for row in rows:
        cells = []
        for level in levels:
            cell = row.cells.get(level)
            if cell is None:
                cells.append(" ")
                continue
            symbol = STATES[cell.state][1]
            text = f"{symbol} {_counts(cell)}".strip()
            cells.append(f"[{text}](#{row.anchor}-{level})" if cell.findings else text)
        certified = "yes" if row.certified else f"no ({row.problems})"
        bundle = f"[{row.release}]({_link(row.bundle, base)})"
        lines.append(f"| {row.backend} | {bundle} | {certified} | " + " | ".join(cells) + " |")
    lines += ["", "## Findings", ""]
    for row in rows:
        flagged = [(level, row.cells[level]) for level in row.levels if row.cells[level].findings]
        if not flagged:
            continue
        lines += [f"### {row.backend} on {row.release}", ""]
        for level, cell in flagged:
            lines.append(f'<a id="{row.anchor}-{level}"></a>**{level}** ({cell.state})')
            lines.append("")
            for finding in cell.findings:
                expected = f" — expected: {finding.expected}" if finding.expected else ""
                lines.append(f"- {finding.clause_id} {finding.status}: {_escape_md(finding.text)}{expected}")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #212121; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #e0e0e0; padding: 4px 8px; text-align: center; font-size: 14px; }
td.label { text-align: left; }
td a { color: inherit; text-decoration: none; display: block; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; border-radius: 3px; color: #fff; }
li { margin: 2px 0; }
code { background: #f5f5f5; padding: 0 3px; }
""".strip()


def render_html(rows: list[Row], title: str, base: Path) -> str:
    """Return the static HTML page (an SVG picture, the table, the findings); links relative to ``base``."""
    levels = _levels(rows)
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title>",
        "<!-- Generated by `hicache-conform matrix`; do not edit by hand. -->",
        f"<style>\n{_CSS}\n</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        '<p class="legend">'
        + "".join(
            f'<span style="background:{colour}" title="{esc(meaning)}">{esc(name)}</span>'
            for name, (colour, _, meaning) in STATES.items()
        )
        + "</p>",
        _svg(rows, levels),
        "<table><thead><tr><th>backend</th><th>release</th><th>certified</th>"
        + "".join(f"<th>{esc(level)}</th>" for level in levels)
        + "</tr></thead><tbody>",
    ]
    for row in rows:
        cells = []
        for level in levels:
            cell = row.cells.get(level)
            if cell is None:
                cells.append("<td></td>")
                continue
            colour = STATES[cell.state][0]
            text = esc(f"{cell.state} {_counts(cell)}".strip())
            tip = esc(cell.note or STATES[cell.state][2])
            inner = f'<a href="#{row.anchor}-{level}">{text}</a>' if cell.findings else text
            cells.append(f'<td style="background:{colour};color:#fff" title="{tip}">{inner}</td>')
        certified = "yes" if row.certified else f"no ({row.problems} problems)"
        parts.append(
            f'<tr><td class="label">{esc(row.backend)}</td>'
            f'<td><a href="{esc(_link(row.bundle, base))}">{esc(row.release)}</a></td>'
            f"<td>{esc(certified)}</td>" + "".join(cells) + "</tr>"
        )
    parts += ["</tbody></table>", "<h2>Findings</h2>"]
    for row in rows:
        flagged = [(level, row.cells[level]) for level in row.levels if row.cells[level].findings]
        if not flagged:
            continue
        parts.append(f"<h3>{esc(row.backend)} on {esc(row.release)}</h3>")
        for level, cell in flagged:
            parts.append(f'<h4 id="{row.anchor}-{level}">{esc(level)} ({esc(cell.state)})</h4><ul>')
            for finding in cell.findings:
                expected = f" <em>expected: {_linked(finding.expected)}</em>" if finding.expected else ""
                parts.append(
                    f"<li><code>{esc(finding.clause_id)}</code> {esc(finding.status)}: {esc(finding.text)}{expected}</li>"
                )
            parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _linked(expected: str) -> str:
    reason, _, link = expected.partition(", ")
    if re.match(r"^[a-z]+://", link):
        return f'{html.escape(reason)}, <a href="{html.escape(link)}">{html.escape(link)}</a>'
    return html.escape(expected)


def _svg(rows: list[Row], levels: list[str]) -> str:
    """An at-a-glance picture: a square per cell, coloured by state, each linking its findings."""
    size, gap, left, top = 18, 3, 260, 90
    width = left + len(levels) * (size + gap) + 10
    height = top + len(rows) * (size + gap) + 10
    esc = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="results matrix: {len(rows)} rows, {len(levels)} levels">'
    ]
    for index, level in enumerate(levels):
        x = left + index * (size + gap) + size // 2
        out.append(
            f'<text x="{x}" y="{top - 6}" font-size="11" transform="rotate(-45 {x} {top - 6})">{esc(level)}</text>'
        )
    for number, row in enumerate(rows):
        y = top + number * (size + gap)
        out.append(
            f'<text x="{left - 8}" y="{y + size - 5}" font-size="11" text-anchor="end">'
            f"{esc(row.backend)} · {esc(row.release)}</text>"
        )
        for index, level in enumerate(levels):
            cell = row.cells.get(level)
            if cell is None:
                continue
            x = left + index * (size + gap)
            colour = STATES[cell.state][0]
            rect = (
                f'<rect x="{x}" y="{y}" width="{size}" height="{size}" fill="{colour}">'
                f"<title>{esc(row.backend)} {esc(row.release)} {esc(level)}: {esc(cell.state)} "
                f"{esc(_counts(cell))}</title></rect>"
            )
            out.append(f'<a href="#{row.anchor}-{level}">{rect}</a>' if cell.findings else rect)
    out.append("</svg>")
    return "\n".join(out)


IN_TREE_TITLE = "SGLang's in-tree backends through the vendor suite"


def render_pages(bundles: Path, docs: Path, title: str = IN_TREE_TITLE) -> dict[Path, str]:
    """Return ``docs/matrix.md`` and ``docs/matrix.html`` rendered from the bundles under ``bundles``."""
    rows = load_rows(find_bundles([str(bundles)]))
    base = docs.resolve()
    return {
        docs / "matrix.md": render_markdown(rows, title, base),
        docs / "matrix.html": render_html(rows, title, base),
    }
