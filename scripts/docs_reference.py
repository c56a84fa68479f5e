"""Write the documentation's generated reference pages (docs/reference/commands.md and settings.md) from the
code: run it after changing an option or a setting; tests/test_docs.py fails until the pages match.

    python scripts/docs_reference.py
"""

from pathlib import Path

from rawreact.cli.reference import pages

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    for name, text in pages().items():
        path = ROOT / "docs" / "reference" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
