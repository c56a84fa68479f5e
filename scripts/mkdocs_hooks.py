"""A hook of the docs build (mkdocs.yml's `hooks`): each line of a code block becomes a span that knows its
indentation, so that a line too long for the page wraps under its own text, not at column 0.

The site wraps long code lines rather than hiding their ends (docs/stylesheets/code.css); a continuation of an
indented line (a Python call's argument, a TOML value) would otherwise start at the block's left edge, where it
reads as a new line. Each line is `<span class="line" style="--indent:N">` with N its leading spaces; the newline
stays between the spans, so the text a reader selects or the copy button copies is the block's text unchanged.
"""

import re

_BLOCK = re.compile(r"(<pre[^>]*><code[^>]*>)(.*?)(</code></pre>)", re.DOTALL)


def lines_as_spans(html: str) -> str:
    """Every `<pre><code>` block's lines wrapped in spans that carry their indentation (code without markup only:
    the site's blocks are not highlighted, so a block's text holds no tags)."""

    def block(match: re.Match) -> str:
        start, text, end = match.groups()
        if "<" in text:  # markup inside (a highlighter's spans): leave the block as it is
            return match.group(0)
        spans = [
            f'<span class="line" style="--indent:{len(line) - len(line.lstrip(" "))}">{line}</span>' if line else ""
            for line in text.split("\n")
        ]
        return start + "\n".join(spans) + end

    return _BLOCK.sub(block, html)


def on_page_content(html: str, **_) -> str:
    return lines_as_spans(html)
