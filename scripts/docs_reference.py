"""Write the documentation's generated reference pages (docs/reference/commands.md, settings.md and python.md)
from the code, and docs/reference/collections.md from envs/README.md (the collection layout, on the site): run it
after changing an option, a setting or that README; tests/test_docs.py fails until the pages match.

    python scripts/docs_reference.py
"""

from pathlib import Path

from rawreact.cli.reference import pages

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS_HEAD = "<!-- generated from envs/README.md by scripts/docs_reference.py: edit that file -->\n"


def collections_page() -> str:
    """envs/README.md as a page of the site; its links to files beside it point into the repository instead."""
    return COLLECTIONS_HEAD + (ROOT / "envs" / "README.md").read_text(encoding="utf-8")


if __name__ == "__main__":
    for name, text in {**pages(), "collections.md": collections_page()}.items():
        path = ROOT / "docs" / "reference" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
