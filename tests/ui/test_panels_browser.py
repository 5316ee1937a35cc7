"""Extensions' explorer tabs (state field `panels`, schedlab/ui/panels.py) in the ESM component,
in a real browser on the component harness: a tab per panel after the built-in ones, its text
shown as text (never HTML), its error above it, tabs following the state."""

from __future__ import annotations

from . import test_component_js as js
from .component_harness import gemm_state

pytestmark = js.pytestmark
expect = js.expect
# the harness fixtures of the component tests: page, browser, served harness
chromium_browser, harness_url, explorer = js.chromium_browser, js.harness_url, js.explorer

PANELS = [
    {"name": "cpu-presets", "title": "CPU presets", "text": "haswell  1.2 ms\n<b>zen2</b>",
     "error": ""},
    {"name": "broken", "title": "Broken", "text": "", "error": "panel 'broken' failed: boom"},
]  # fmt: skip


def test_extension_panels_are_tabs_that_follow_the_state(explorer):
    explorer.mount(gemm_state(panels=PANELS))
    tab = explorer.testid("tab-panel-cpu-presets")
    expect(tab).to_have_text("CPU presets")
    expect(explorer.testid("panel-cpu-presets")).to_be_hidden()
    tab.click()
    pane = explorer.testid("panel-cpu-presets")
    expect(pane).to_be_visible()
    expect(pane.locator("pre.sl-code")).to_have_text("haswell  1.2 ms\n<b>zen2</b>")
    expect(pane.locator("b")).to_have_count(0)  # text, not markup
    expect(explorer.testid("code")).to_be_hidden()
    explorer.testid("tab-panel-broken").click()
    expect(explorer.testid("panel-broken").locator(".sl-pane-error")).to_have_text(
        "panel 'broken' failed: boom"
    )
    # new text in place; a panel gone from the state loses its tab (its pane showed: code now)
    explorer.push(gemm_state(seq=1, panels=[{**PANELS[0], "text": "zen2  0.9 ms"}]))
    expect(explorer.testid("tab-panel-broken")).to_have_count(0)
    expect(explorer.testid("code")).to_be_visible()
    explorer.testid("tab-panel-cpu-presets").click()
    expect(explorer.testid("panel-cpu-presets").locator("pre.sl-code")).to_have_text("zen2  0.9 ms")
    explorer.push(gemm_state(seq=2, panels=[]))
    expect(explorer.testid("tab-panel-cpu-presets")).to_have_count(0)
    expect(explorer.testid("code")).to_be_visible()
