"""The README's pictures of the HTML report, taken in headless Chromium from a page `rawreact report --html`
wrote (the README's own commands make the runs and the page):

    python scripts/report_screenshots.py report.html --question ID --out docs

writes docs/report.png (the top of the page, down to the charts) and docs/sidebyside.png (the question
ID in the runs' question-by-question view, the two transcripts open side by side). It drives Chromium
with the tests' DevTools client (tests/browser.py), so it runs from a checkout with Chromium installed.
"""

import argparse
import base64
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from browser import Browser, find_chromium  # noqa: E402

WIDTH = 1280


def _clip(browser: Browser, selector: str, below: str | None = None, height: int | None = None) -> dict:
    """The page area from the top of `selector` down to the top of `below`, or `height` pixels."""
    box = browser.evaluate(
        f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect(); "
        "return [r.top + window.scrollY, r.bottom + window.scrollY]; })()"
    )
    end = box[1]
    if below is not None:
        end = browser.evaluate(f"document.querySelector({below!r}).getBoundingClientRect().top + window.scrollY")
    elif height is not None:
        end = box[0] + height
    return {"x": 0, "y": max(0, box[0] - 12), "width": WIDTH, "height": end - box[0] + 24, "scale": 1}


def _shoot(browser: Browser, clip: dict, out: Path) -> None:
    data = browser.call("Page.captureScreenshot", session=True, format="png", clip=clip, captureBeyondViewport=True)
    out.write_bytes(base64.b64decode(data["data"]))
    print(f"{out}: {int(clip['width'])}x{int(clip['height'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="the report page (rawreact report ... --html FILE)")
    parser.add_argument("--question", required=True, help="the id of the question to open side by side")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder of the pictures (default: docs)")
    args = parser.parse_args()
    binary = find_chromium()
    if binary is None:
        print("no Chromium: install Debian's chromium package", file=sys.stderr)
        return 2
    browser = Browser(binary, width=WIDTH, height=1000)
    try:
        height = 4000  # tall enough that nothing above the charts is cut, then clipped
        browser.call("Emulation.setDeviceMetricsOverride", session=True, width=WIDTH, height=height,
                     deviceScaleFactor=1, mobile=False)  # fmt: skip
        browser.open(args.page)
        _shoot(browser, _clip(browser, "h1", below="div.charts figure:nth-of-type(5)"), args.out / "report.png")
        browser.evaluate(f"document.getElementById({'pair/' + args.question!r}).click()")
        row = f"#pairs tr[id={('pair/' + args.question)!r}]"
        top = _clip(browser, row)
        bottom = browser.evaluate(
            f"document.querySelector({row!r}).nextElementSibling.getBoundingClientRect().bottom + window.scrollY"
        )
        head = browser.evaluate("document.querySelector('#pairs thead').getBoundingClientRect().top + window.scrollY")
        start = browser.evaluate("document.querySelector('#p-controls').getBoundingClientRect().top + window.scrollY")
        start = min(start, head)
        clip = {**top, "y": start - 12, "height": bottom - start + 24}
        _shoot(browser, clip, args.out / "sidebyside.png")
    finally:
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
