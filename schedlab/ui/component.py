"""The explorer's front-end component, written once: `static/explorer.js` (+ CSS).

Both shells load these files (the Jupyter widget as an anywidget, the Panel app through Panel's
own AnyWidgetComponent, which serves the module itself: no CDN). This module only finds and
reads them; it imports no UI library.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

STATIC = Path(__file__).parent / "static"
ESM_PATH = STATIC / "explorer.js"
CSS_FILES = ("explorer.css", "highlight.css")


@cache
def stylesheet() -> str:
    """The component's CSS: its layout and the syntax-highlighting colours."""
    return "\n".join((STATIC / name).read_text() for name in CSS_FILES)


def ui_import_error(err: ImportError, what: str) -> ImportError:
    """A clear error when the UI extras are missing."""
    return ImportError(
        f"{what} needs the explorer's UI packages ({err.name or err}); install them with "
        "`pip install 'schedlab[ui]'`"
    )
