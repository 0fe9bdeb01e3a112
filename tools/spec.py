"""``lmspec spec``: the specification the suite checks (docs/SPEC.md), whole
or one item at a time, in the terminal or as a static HTML page whose
anchors are the spec item ids that every report links to.

    lmspec spec                 the whole document
    lmspec spec 2.rope          the part of it that item 2.rope checks
    lmspec spec --list          every item id with its title
    lmspec spec --html spec.html   the document as one page, an anchor per item
"""

import argparse
import html
import re
import sys
from pathlib import Path

from lmspec import ROOT
from lmspec.conformance import profiles

SPEC = ROOT / "docs" / "SPEC.md"


def _items() -> list[profiles.SpecItem]:
    """Every profile's items, in the profiles' order."""
    return [i for p in profiles.all_profiles() for i in p.items]


def _anchors() -> dict[str, str]:
    """Where each item's rule starts in SPEC.md (its record's ``anchor``)."""
    return {i.id: i.anchor for i in _items()}


_SHAPES = "Shapes. "


def text() -> str:
    return SPEC.read_text(encoding="utf-8")


def _level(line: str) -> int | None:
    """Heading depth (1-3), 10 for a top-level bullet, None for other lines."""
    match = re.match(r"^(#+) ", line)
    if match:
        return len(match.group(1))
    return 10 if line.startswith("- ") else None


def section(item_id: str, document: str | None = None) -> str:
    """The lines of SPEC.md that state the rule of ``item_id``."""
    lines = (document if document is not None else text()).splitlines()
    anchor = _anchors()[item_id]
    start = next(i for i, line in enumerate(lines) if line.startswith(anchor))
    level = _level(lines[start]) or 10
    end = start + 1
    while end < len(lines):
        other = _level(lines[end])
        if other is not None and (other <= level if level < 10 else True):
            break
        end += 1
    body = "\n".join(lines[start:end]).rstrip()
    if item_id.startswith("2.") and item_id != "2.accounting":
        body += "\n\n(The shapes every §2 item is scored on: the paragraph 'Shapes.' of §2, `lmspec spec --shapes`.)"
    return body


def shapes(document: str | None = None) -> str:
    lines = (document if document is not None else text()).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(_SHAPES))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("Defaults:"))
    return "\n".join(lines[start:end]).rstrip()


def render_html(document: str | None = None) -> str:
    """The document as one page: its text, with an anchor (``id``) per item
    at the line where the item's rule starts."""
    document = document if document is not None else text()
    starts: dict[str, list[str]] = {}
    for item_id, anchor in _anchors().items():
        starts.setdefault(anchor, []).append(item_id)
    out = []
    for line in document.splitlines():
        ids = next((v for k, v in starts.items() if line.startswith(k)), [])
        for item_id in ids:
            out.append(f'<a id="{item_id}"></a>')
            starts = {k: [i for i in v if i != item_id] for k, v in starts.items()}
        level = _level(line)
        escaped = html.escape(line)
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
        escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
        if level is not None and level < 10:
            out.append(f"<h{level}>{escaped.lstrip('#').strip()}</h{level}>")
        else:
            out.append(escaped + "<br>")
    items = "".join(f'<li><a href="#{i.id}">{i.id}</a> {html.escape(i.title)}</li>' for i in _items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>lmspec specification</title>"
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
        "code{background:#f3f3f3;padding:0 .2em}</style></head><body>"
        f"<nav><p>Spec items:</p><ul>{items}</ul></nav>" + "\n".join(out) + "</body></html>"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmspec spec", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("item", nargs="?", help="a spec item id (lmspec spec --list)")
    parser.add_argument("--list", action="store_true", help="every item id with its title")
    parser.add_argument("--shapes", action="store_true", help="the shapes the §2 items are scored on")
    parser.add_argument("--html", metavar="FILE", help="write the document as a static HTML page")
    args = parser.parse_args(argv)
    if args.list:
        for profile in profiles.all_profiles():
            print(f"profile {profile.name}: {profile.title}")
            for item in profile.items:
                kind = " (extended)" if item.extended else " (SHOULD)" if item.should else ""
                print(f"  {item.id:28s} {item.title}{kind}")
        return 0
    if args.html:
        Path(args.html).write_text(render_html(), encoding="utf-8")
        print(f"wrote {args.html}")
        return 0
    if args.shapes:
        print(shapes())
        return 0
    if args.item:
        try:
            item = profiles.profile_of_item(args.item).item(args.item)
        except KeyError:
            print(f"lmspec spec: unknown item {args.item!r}; see lmspec spec --list", file=sys.stderr)
            return 2
        print(f"{args.item}: {item.title}\n\n{section(args.item)}")
        return 0
    print(text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
