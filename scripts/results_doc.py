"""Assemble ``docs/RESULTS.md`` from a finished ``scripts/reproduce.py`` run.

Examples::

    python scripts/reproduce.py --out results          # the full, paper-protocol run
    python scripts/results_doc.py --results results --doc docs/RESULTS.md

Copies every group's ``table.md`` (ours beside the paper's, with verdicts and sanity checks)
and its PNG figures into ``docs/`` and prefixes a summary with each group's verdict and wall
time. When ``python scripts/readings.py`` has run on the same results root, its
``readings.md`` (every reading of the paper's ambiguous choices side by side, with the
explanations the measurements support) follows the summary. Groups whose ``done.json`` is
missing are listed as not run; a quick or tiny run is refused unless ``--allow-profile``
names it, so the committed report always says which protocol it shows. The pre-registered
rules (``docs/PREREGISTERED.md``, committed before the runs they govern) follow the summary in
both modes, as a section of their own that is replaced, never edited, on every update.

``--only GROUPS`` updates an existing ``--doc`` in place: it replaces (or appends, in registry
order) only the named groups' sections, summary rows and figures, leaving every other group's
text as it was; for a results root that holds some groups only::

    python scripts/reproduce.py --only e8
    python scripts/results_doc.py --only e8 --force

Every run also splits the written ``--doc`` into the documentation site's results pages
(``--pages``, default ``results/`` beside ``--doc``): ``index.md`` (the summary, each group
linked), one page per group (``e1.md`` ... ``e10.md``, with that group's sections under every
training preset), ``readings.md`` and one page per preset. The pages are a function of
``--doc`` alone, so ``--pages-only`` rebuilds them from a committed ``docs/RESULTS.md`` where
no results folder exists::

    python scripts/results_doc.py --pages-only --force
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridplan.experiments import GROUPS, PROFILES  # noqa: E402
from gridplan.experiments.presets import PRESETS  # noqa: E402
from gridplan.experiments.runner import TABLE_FILE  # noqa: E402
from gridplan.util.fragments import read_fragments  # noqa: E402

VERDICT = re.compile(r"\*\*Verdict: (.+?)\*\*")
#: Written by ``scripts/readings.py`` into the results root.
READINGS_FILE = "readings.md"
FIGURE = re.compile(r"!\[([^\]]*)\]\(([^)]+\.png)\)")
#: The first line of the summary table.
SUMMARY_HEADER = "| group | what | verdict | wall time | profile |"
#: The prose around the tables: named fragments with ``${...}`` placeholders.
TEMPLATE = Path(__file__).resolve().parent / "templates" / "results.md"
TEXT = read_fragments(TEMPLATE)
#: The rules that pick every reading and preset, written before the runs.
PREREGISTERED = Path(__file__).resolve().parents[1] / "docs" / "PREREGISTERED.md"
PREREGISTERED_HEADING = "## Pre-registered rules"
#: The site's pages of the results, beside ``--doc`` unless ``--pages`` says otherwise.
PAGES_FOLDER = "results"
HEADING = re.compile(r"^(#+) ")
GROUP_HEADING = re.compile(r"^#+ (E\d+) — ")
PRESET_HEADING = re.compile(r"^## Under the training preset `([^`]+)`")
SUMMARY_ROW = re.compile(r"^\| (e\d+) \|")
READINGS_HEADING = "## Readings of the paper's ambiguous choices"
#: A relative link or image (not a URL, an anchor or an absolute path).
RELATIVE_LINK = re.compile(r"(!?\[[^\]]*\])\((?![a-z]+:|#|/)([^)\s]+)\)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python scripts/results_doc.py", description=__doc__)
    p.add_argument("--results", default="results", help="root folder of a reproduce.py run")
    p.add_argument("--doc", default="docs/RESULTS.md", help="markdown file to write")
    p.add_argument(
        "--allow-profile", default="full", choices=PROFILES, help="profile the run must have used"
    )
    p.add_argument("--force", action="store_true", help="replace an existing --doc file")
    p.add_argument(
        "--only",
        metavar="GROUPS",
        help="comma-separated groups whose sections replace theirs in the existing --doc "
        "(needs --force); the other groups' sections stay as they are",
    )
    p.add_argument(
        "--pages",
        metavar="DIR",
        help="folder of the site's results pages split from --doc (default: results/ beside --doc)",
    )
    p.add_argument(
        "--pages-only",
        action="store_true",
        help="only split the existing --doc into --pages (no results folder is read); "
        "pages that would change need --force",
    )
    p.add_argument(
        "--wall-note",
        default="",
        metavar="TEXT",
        help="a sentence on the machine the run shared, appended to the wall-time paragraph "
        "(e.g. how loaded it was)",
    )
    return p


def group_section(name: str, folder: Path, figures: Path) -> tuple[str, dict]:
    """The group's table.md with figure links moved to ``figures/<name>/``, and done.json."""
    done = json.loads((folder / "done.json").read_text())
    text = (folder / "table.md").read_text()
    target = figures / name
    target.mkdir(parents=True, exist_ok=True)
    for png in folder.glob("*.png"):
        shutil.copy2(png, target / png.name)
    rel = f"{figures.name}/{name}"
    text = FIGURE.sub(lambda m: f"![{m.group(1)}]({rel}/{m.group(2)})", text)
    text = re.sub(r"^# ", "## ", text, flags=re.M) if text.startswith("# ") else text
    if name == "e8":
        # E8's claims were stated before its run: they head its section.
        heading, _, rest = text.partition("\n")
        claims = TEXT["e8-claims"].substitute()
        text = f"{heading}\n\n{claims}\n{rest}"
    return text, done


def summary_row(name: str, text: str, done: dict) -> str:
    """The summary table's row of a finished group."""
    verdict = VERDICT.search(text)
    wall = done.get("wall_time_s")
    wall_text = "—" if wall is None else f"{wall:.0f} s"
    return (
        f"| {name} | {GROUPS[name].title} | {verdict.group(1) if verdict else '—'} | "
        f"{wall_text} | {done.get('profile')} |"
    )


def wall_time_note(results: Path, finished: list[str]) -> str:
    """How the wall times were spent, from the groups' ``done.json`` and the training logs of
    e3 and e7."""
    done = [json.loads((results / n / "done.json").read_text()) for n in finished]
    threads = sorted({d.get("threads") for d in done} - {None})
    pieces = {"e3": "", "e7": "", "e8": ""}
    e3 = results / "e3" / "results.json"
    if "e3" in finished and e3.exists():
        res = json.loads(e3.read_text())
        pieces["e3"] = TEXT["wall-times-e3"].substitute(
            runs=len(res["runs"]), seconds=f"{res['train_wall_seconds']:.0f}"
        )
    e7 = results / "e7" / "results.json"
    if "e7" in finished and e7.exists():
        res = json.loads(e7.read_text())
        seconds = res["train_wall_seconds"]
        pieces["e7"] = TEXT["wall-times-e7"].substitute(
            zoo=len(res["zoo"]),
            replication=len(res["replication"]),
            seconds=" + ".join(f"{s:.0f}" for s in seconds.values()),
        )
    e8 = results / "e8" / "results.json"
    if "e8" in finished and e8.exists():
        res = json.loads(e8.read_text())
        pieces["e8"] = TEXT["wall-times-e8"].substitute(
            models=sum(1 for m in res["models"] if m["family"] == "learned"),
            seconds=f"{res['train_wall_seconds']:.0f}",
            worlds=len(res["worlds"]),
            grid=f"{sum(w['grid_seconds'] for w in res['worlds']):.0f}",
        )
    threads_text = " or ".join(map(str, threads))
    return TEXT["wall-times"].substitute(threads=threads_text, **pieces) + "\n\n"


def _section_start(lines: list[str], name: str) -> int | None:
    """Index of the line that starts group ``name``'s section (``## E8 ...``), or None."""
    head = f"## {name.upper()} "
    return next((k for k, line in enumerate(lines) if line.startswith(head)), None)


def summary_rows(lines: list[str]) -> dict[str, int]:
    """Group name -> line index of its row in the summary table (the first table headed
    ``SUMMARY_HEADER``; other tables, such as the readings', also name groups).

    Raises:
        ValueError: if the document has no summary table.
    """
    try:
        k = lines.index(SUMMARY_HEADER) + 2
    except ValueError:
        raise ValueError(f"no summary table ({SUMMARY_HEADER}) in the document") from None
    rows = {}
    while k < len(lines) and lines[k].startswith("| "):
        rows[lines[k].split(" | ")[0][2:]] = k
        k += 1
    return rows


def preregistered_section(source: Path = PREREGISTERED) -> list[str]:
    """``source`` as one section of the results page: its title becomes
    ``PREREGISTERED_HEADING`` and every heading below it goes one level down.

    Raises:
        ValueError: if ``source`` does not start with a level-1 title.
    """
    lines = source.read_text().rstrip().splitlines()
    if not lines or not lines[0].startswith("# "):
        raise ValueError(f"{source} must start with a '# ' title")
    body = [f"#{line}" if line.startswith("#") else line for line in lines[1:]]
    return [f"{PREREGISTERED_HEADING} (`docs/PREREGISTERED.md`)", *body]


def demoted(text: str, levels: int = 1) -> list[str]:
    """``text``'s lines with every markdown heading ``levels`` levels down and figure lines
    left out (a preset's figures stay in its results folder)."""
    out = []
    for line in text.rstrip().splitlines():
        if FIGURE.search(line):
            continue
        out.append("#" * levels + line if line.startswith("#") else line)
    return out


def preset_sections(results: Path, profile: str, repo: Path = PREREGISTERED.parents[1]) -> str:
    """One section per training preset (``gridplan.experiments.presets``) with finished groups
    under ``results/<preset>/``: the rule that chose it, its selection table and each group's
    ``table.md`` (verdicts included), headings one level down; empty if none ran."""
    parts = []
    for name, preset in PRESETS.items():
        folders = [results / name / g for g in preset.groups]
        done = [f for f in folders if (f / "done.json").exists()]
        done = [
            f for f in done if json.loads((f / "done.json").read_text()).get("profile") == profile
        ]
        if not done:
            continue
        lines = [
            f"## Under the training preset `{name}` ({preset.rule})",
            "",
            TEXT["preset"].substitute(name=name, groups=", ".join(f.name for f in done)),
        ]
        if preset.selection is not None:
            selection = (repo / preset.selection).read_text().splitlines()
            lines += ["", *demoted("\n".join(selection[1:]))]
        for folder in done:
            # A group's table starts at level 1; under the preset's section it is level 3.
            lines += ["", *demoted((folder / TABLE_FILE).read_text(), 2)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + ("\n" if parts else "")


def place_preregistered(lines: list[str], section: list[str]) -> list[str]:
    """``lines`` with the pre-registered section replaced, or inserted before the first
    level-2 heading after the summary table."""
    heading = [k for k, line in enumerate(lines) if line.startswith(PREREGISTERED_HEADING)]
    if heading:
        start = heading[0]
        later = [k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")]
        end = later[0] if later else len(lines)
        return [*lines[:start], *section, "", *lines[end:]]
    after = lines.index(SUMMARY_HEADER) if SUMMARY_HEADER in lines else 0
    nexts = [k for k in range(after, len(lines)) if lines[k].startswith("## ")]
    at = nexts[0] if nexts else len(lines)
    return [*lines[:at], *section, "", *lines[at:]]


def update_sections(doc: Path, results: Path, names: list[str], figures: Path) -> None:
    """Replace (or insert, in registry order) the named groups' sections and summary rows of
    ``doc``, from their finished folders under ``results``; every other line stays."""
    lines = doc.read_text().splitlines()
    order = list(GROUPS)
    for name in names:
        text, done = group_section(name, results / name, figures)
        rows = summary_rows(lines)
        if name in rows:
            lines[rows[name]] = summary_row(name, text, done)
        else:
            rank = {g: i for i, g in enumerate(order)}
            before = [k for g, k in rows.items() if rank.get(g, len(order)) < rank[name]]
            at = max(before) + 1 if before else lines.index(SUMMARY_HEADER) + 2
            lines.insert(at, summary_row(name, text, done))
        starts = {g: k for g in order if (k := _section_start(lines, g)) is not None}
        start = starts.get(name)
        later = sorted(k for g, k in starts.items() if order.index(g) > order.index(name))
        end = later[0] if later else len(lines)
        if start is None:
            start = end
        else:
            # A section ends at the next level-2 heading, a group's or not (the presets'
            # sections sit between groups' sections).
            end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("## ")), end)
        block = text.rstrip().splitlines()
        tail = end < len(lines)
        lines[start:end] = [*block, ""] if tail else ["", *block] if start == len(lines) else block
    lines = place_preregistered(lines, preregistered_section())
    doc.write_text("\n".join(lines).rstrip() + "\n")


def _cut(lines: list[str], level: int) -> list[list[str]]:
    """``lines`` cut before every heading of exactly ``level``; the first piece holds what
    comes before the first such heading (possibly nothing)."""
    prefix = "#" * level + " "
    cuts = [k for k, line in enumerate(lines) if line.startswith(prefix)]
    bounds = [0, *cuts, len(lines)]
    return [lines[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _moved(lines: list[str], top: int) -> list[str]:
    """``lines`` as a page one folder below ``--doc``: headings shifted so the shallowest is
    level ``top``, relative links and images one folder up."""
    levels = [len(m.group(1)) for line in lines if (m := HEADING.match(line))]
    shift = top - min(levels) if levels else 0
    out = []
    for line in lines:
        m = HEADING.match(line)
        if m:
            line = "#" * (len(m.group(1)) + shift) + line[len(m.group(1)) :]
        out.append(RELATIVE_LINK.sub(lambda r: f"{r.group(1)}(../{r.group(2)})", line))
    return out


def _page(lines: list[str]) -> str:
    return "\n".join(lines).strip() + "\n"


def _append(pages: dict[str, list[str]], name: str, lines: list[str]) -> None:
    """Add ``lines`` to page ``name``, one blank line after what it holds."""
    page = pages.setdefault(name, [])
    while page and not page[-1].strip():
        page.pop()
    page += ["", *lines] if page else lines


def split_pages(text: str, preregistered: str = "../PREREGISTERED.md") -> dict[str, str]:
    """The site's results pages of a results document (``main`` writes one): file name ->
    Markdown, for a folder one level below the document.

    ``index.md`` keeps the title, the introduction, the summary (each group with a page linked)
    and the wall times, then lists the other pages; each ``## E<n> — ...`` section becomes
    ``e<n>.md`` (its title level 1), followed by that group's section under every training
    preset; the readings become ``readings.md`` and each preset's own text ``<preset>.md``.
    The pre-registered rules are replaced by a link to ``preregistered`` (their page); any
    other section stays on the index.
    """
    head, *sections = _cut(text.rstrip().splitlines(), 2)
    pages: dict[str, list[str]] = {}
    presets: dict[str, list[str]] = {}
    rest: list[str] = []
    for section in sections:
        first = section[0]
        group, preset = GROUP_HEADING.match(first), PRESET_HEADING.match(first)
        if group:
            _append(pages, f"{group.group(1).lower()}.md", _moved(section, 1))
        elif preset:
            own, *parts = _cut(section, 3)
            name = f"{preset.group(1)}.md"
            presets[name] = _moved(own, 1)
            for part in parts:
                match = GROUP_HEADING.match(part[0])
                if match is None:
                    _append(presets, name, _moved(part, 2))
                    continue
                link = TEXT["page-preset"].substitute(name=preset.group(1), page=name)
                heading = f"## Under the training preset `{preset.group(1)}`"
                body = [heading, "", link, "", *_moved(part[1:], 3)]
                while len(body) > 4 and not body[4].strip():
                    del body[4]
                _append(pages, f"{match.group(1).lower()}.md", body)
        elif first.startswith(READINGS_HEADING):
            pages["readings.md"] = _moved(section, 1)
        elif not first.startswith(PREREGISTERED_HEADING):
            rest += ["", *_moved(section, 2)]
    linked = {name[:-3] for name in pages if re.fullmatch(r"e\d+\.md", name)}
    index: dict[str, list[str]] = {"index.md": []}
    for line in _moved(head, 1):
        row = SUMMARY_ROW.match(line)
        if row and row.group(1) in linked:
            line = f"| [{row.group(1)}]({row.group(1)}.md) |{line[row.end() :]}"
        index["index.md"].append(line)
    others = [
        f"- [{page[0].lstrip('# ')}]({name})"
        for name, page in {**pages, **presets}.items()
        if name[:-3] not in linked
    ]
    others.append(f"- [Pre-registered rules]({preregistered})")
    _append(index, "index.md", [TEXT["pages-index"].substitute(), "", *others, *rest])
    return {n: _page(p) for n, p in {**index, **pages, **presets}.items()}


def write_pages(doc: Path, folder: Path, force: bool = True) -> list[Path]:
    """Write ``split_pages`` of ``doc`` into ``folder``; the pages written.

    Raises:
        FileExistsError: if ``force`` is false and a page exists with other content (nothing
            is written).
    """
    pages = split_pages(doc.read_text())
    changed = [
        folder / n
        for n, t in pages.items()
        if (folder / n).exists() and (folder / n).read_text() != t
    ]
    if changed and not force:
        names = ", ".join(str(p) for p in changed)
        raise FileExistsError(f"{names} would change; pass --force to replace them")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (folder / name).write_text(text)
    return [folder / n for n in pages]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    results, doc = Path(args.results), Path(args.doc)
    pages = Path(args.pages) if args.pages else doc.parent / PAGES_FOLDER
    if args.pages_only:
        if not doc.exists():
            print(f"error: --pages-only splits an existing {doc}; none there", file=sys.stderr)
            return 2
        try:
            write_pages(doc, pages, args.force)
        except FileExistsError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"wrote the pages of {doc} into {pages}/")
        return 0
    if doc.exists() and not args.force:
        print(f"error: {doc} exists; pass --force to replace it", file=sys.stderr)
        return 2
    figures = doc.parent / "figures"
    if args.only is not None:
        names = [n.strip().lower() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in GROUPS]
        if not names or unknown:
            valid = ", ".join(GROUPS)
            print(f"error: --only {args.only!r}; valid groups: {valid}", file=sys.stderr)
            return 2
        if not doc.exists():
            print(f"error: --only updates an existing {doc}; none there", file=sys.stderr)
            return 2
        for name in names:
            done_path = results / name / "done.json"
            if not done_path.exists():
                print(f"error: {name} has not finished under {results}", file=sys.stderr)
                return 2
            profile = json.loads(done_path.read_text()).get("profile")
            if profile != args.allow_profile:
                print(
                    f"error: {name} was run with profile {profile!r}, not {args.allow_profile!r}",
                    file=sys.stderr,
                )
                return 2
        try:
            update_sections(doc, results, names, figures)
        except ValueError as err:
            print(f"error: {doc}: {err}", file=sys.stderr)
            return 2
        write_pages(doc, pages)
        print(f"updated {', '.join(names)} in {doc}, {figures}/ and {pages}/")
        return 0
    summary = [SUMMARY_HEADER, "| --- | --- | --- | --- | --- |"]
    sections = []
    finished = [n for n in GROUPS if (results / n / "done.json").exists()]
    if not finished:
        print(f"error: no finished group under {results}", file=sys.stderr)
        return 2
    for name in finished:
        profile = json.loads((results / name / "done.json").read_text()).get("profile")
        if profile != args.allow_profile:
            print(
                f"error: {name} was run with profile {profile!r}, not {args.allow_profile!r}",
                file=sys.stderr,
            )
            return 2
    for name, group in GROUPS.items():
        folder = results / name
        if name not in finished:
            summary.append(f"| {name} | {group.title} | not run | — | — |")
            continue
        text, done = group_section(name, folder, figures)
        summary.append(summary_row(name, text, done))
        sections.append(text.rstrip() + "\n")
    readings = results / READINGS_FILE
    readings_text = ""
    if readings.exists():
        readings_text = readings.read_text()
        if f"Profile `{args.allow_profile}`" not in readings_text:
            print(
                f"error: {readings} was not computed with profile {args.allow_profile!r}",
                file=sys.stderr,
            )
            return 2
        readings_text = readings_text.rstrip() + "\n\n"
    intro = TEXT["header"].substitute(
        profile=args.allow_profile,
        readings=TEXT["header-readings"].substitute() if readings_text else "",
    )
    header = f"# Results: the DRPE paper reproduced\n\n{intro}\n\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(
        header
        + "\n".join(summary)
        + "\n\n"
        + wall_time_note(results, finished).rstrip()
        + (f" {args.wall_note.strip()}" if args.wall_note.strip() else "")
        + "\n\n"
        + "\n".join(preregistered_section())
        + "\n\n"
        + readings_text
        + "\n".join(sections)
        + ("\n" + presets if (presets := preset_sections(results, args.allow_profile)) else "")
    )
    write_pages(doc, pages)
    print(f"wrote {doc}, {figures}/ and {pages}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
