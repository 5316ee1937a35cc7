"""`ExplorerPage`: the explorer driven as a user drives it, clicks and key strokes in a real
browser (async Playwright), for the browser tests and `schedlab bench-explorer`.

Every action waits until the page has rendered the state answering it: the component stamps
the last rendered action number on its root (`data-seq`) and how long that click took to come
back rendered (`data-roundtrip-ms`, measured in the page with performance.now()).
"""

from __future__ import annotations

import re

ROOT = '[data-testid="explorer"]'
# JS: `el`, the element matching `sel`, looked for through shadow roots (Panel renders the
# component inside one)
_FIND_ROOT = """
const find = (root) => {
  const hit = root.querySelector(sel);
  if (hit) return hit;
  for (const el of root.querySelectorAll("*")) {
    if (el.shadowRoot) { const f = find(el.shadowRoot); if (f) return f; }
  }
  return null;
};
const el = find(document);
"""


# JS: resolves once the page has sent an action after the one numbered `sent` (its root's
# data-sent) and rendered the answer to the last one it sent (data-seq >= data-sent), with
# [data-roundtrip-ms, the message's text, data-sent]; rejects after `timeout` ms
_WAIT_FOR_ANSWER = f"""([sel, sent, timeout]) => new Promise((resolve, reject) => {{
  const lookup = () => {{ {_FIND_ROOT} return el; }};
  let watched = null, observer = null, timer = null, poll = null;
  const finish = (error, el) => {{
    observer?.disconnect(); clearTimeout(timer); clearInterval(poll);
    if (error) return reject(error);
    const message = el.querySelector('[data-testid="message"]');
    resolve([el.dataset.roundtripMs, message ? message.innerText : null, el.dataset.sent]);
  }};
  const check = () => {{
    const el = lookup();
    const last = Number(el?.dataset.sent || 0);
    if (el && last > sent && Number(el.dataset.seq || 0) >= last) return finish(null, el);
    if (el && el !== watched) {{
      observer?.disconnect();
      observer = new MutationObserver(check);
      observer.observe(el, {{ attributes: true, attributeFilter: ["data-seq", "data-sent"] }});
      watched = el;
    }}
  }};
  timer = setTimeout(() => finish(new Error(
    `the action after seq ${{sent}} got no rendered answer within ${{timeout}} ms`)), timeout);
  poll = setInterval(check, 500);
  check();
}})"""


def _css_string(text: str) -> str:
    """`text` inside a CSS "..." string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def testid(name: str) -> str:
    return f'[data-testid="{name}"]'


class ExplorerPage:
    def __init__(self, page, timeout_ms: float = 60_000):
        self.page = page
        self.timeout_ms = timeout_ms
        self.root = page.locator(ROOT)
        self.message: str | None = None  # the message's text when the last action's answer
        # was rendered (None: no message element)
        self._sent: int | None = None  # the page's data-sent when its last answer was rendered
        self._controls: dict = {}  # (primitive, field) -> (tag, type) of its form control

    async def open(self, url: str) -> ExplorerPage:
        self._sent = None  # a new page counts its actions from 0
        await self.page.goto(url, wait_until="networkidle", timeout=self.timeout_ms)
        await self.root.wait_for(state="visible", timeout=self.timeout_ms)
        await self.by("tree").locator(".sl-node").first.wait_for(timeout=self.timeout_ms)
        return self

    def by(self, name: str):
        return self.page.locator(testid(name))

    async def seq(self) -> int:
        return int(await self.root.get_attribute("data-seq") or 0)

    async def roundtrip_ms(self) -> float:
        return float(await self.root.get_attribute("data-roundtrip-ms") or "nan")

    async def act(self, click) -> float:
        """Run `click`, wait for the answer to be rendered; its click-to-render time in ms.

        The page wakes the wait when its root's data-seq or data-sent changes (a
        MutationObserver) and looks the root up again twice a second in case it was replaced;
        polling every 50 ms made ten pages waiting at once cost the machine CPU that the pages
        being timed needed. The wait answers with the time, the message (`self.message`) and
        the number of the action sent, which the next wait starts from: every call to the
        browser costs its CPU, which pages timed beside it need."""
        if self._sent is None:
            self._sent = int(await self.root.get_attribute("data-sent") or 0)
        await click()
        ms, self.message, sent = await self.page.evaluate(
            _WAIT_FOR_ANSWER, [ROOT, self._sent, self.timeout_ms]
        )
        self._sent = int(sent)
        return float(ms or "nan")

    # -- what a user does ------------------------------------------------------------------------
    def tree_node(self, name: str, kind: str = "loop"):
        # by the node's data-name: a plain CSS match, where a text filter made the page read
        # every node's text for each of the several look-ups one click makes
        return self.by("tree").locator(f'.sl-node.sl-{kind}[data-name="{_css_string(name)}"]').first

    async def select_loop(self, name: str) -> float:
        return await self.act(lambda: self.tree_node(name).click())

    async def select_block(self, name: str) -> float:
        return await self.act(lambda: self.tree_node(name, "block").click())

    async def open_primitive(self, name: str, wait: bool = True) -> None:
        """Open primitive `name`'s form (unless it is open); with `wait`, until it is shown
        (filling a field or clicking Apply waits for its control anyway)."""
        form = self.by("primitive-form")
        if any(f"{name} on" in text for text in await form.all_inner_texts()):
            return
        await self.by(f"prim-{name}").click()
        if wait:
            await form.wait_for(timeout=self.timeout_ms)

    async def apply(self, name: str, **fields) -> float:
        """Open primitive `name`, fill its form (text fields by value, selects by label, a
        loops field by a list of loop names in order), click Apply; returns the
        click-to-rendered time in ms."""
        await self.open_primitive(name, wait=False)
        for field, value in fields.items():
            control = self.by(f"arg-{field}")
            known = self._controls.get((name, field))  # a primitive's form is always the same
            if known is None:
                known = await control.evaluate("el => [el.tagName, el.getAttribute('type')]")
                self._controls[(name, field)] = known
            tag, kind = known
            if tag == "SELECT":
                await control.select_option(label=str(value))
            elif kind == "checkbox":
                await control.set_checked(bool(value))
            elif isinstance(value, (list, tuple)):  # a loops field: tick them in this order
                for loop in value:
                    label = control.locator("label").filter(
                        has_text=re.compile(rf"^\d*{re.escape(loop)}$")
                    )
                    await label.locator("input").check()
            else:
                await control.fill(str(value))
        return await self.act(lambda: self.by("apply").click())

    async def click(self, name: str) -> float:
        """Click a control that sends an action; wait for its answer to be rendered."""
        return await self.act(lambda: self.by(name).click())

    async def show_tab(self, name: str) -> None:
        """Switch the right-hand tabs (a view change; the Diff tab may ask for the diff of
        the current step by itself: this waits until that is answered)."""
        await self.by(f"tab-{name}").click()
        await self.settled()

    async def settled(self) -> None:
        """Wait until no action the page sent is waiting for its answer."""
        await self.page.wait_for_function(
            f"""(sel) => {{
                 {_FIND_ROOT}
                 return el && !el.classList.contains("sl-busy");
               }}""",
            arg=ROOT,
            timeout=self.timeout_ms,
            polling=50,
        )

    async def load_workload(self, name: str, sizes: str) -> float:
        await self.by("workload-select").select_option(name)
        await self.by("workload-sizes").fill(sizes)
        return await self.act(lambda: self.by("load-workload").click())

    async def upload(self, name: str, path) -> float:
        return await self.act(lambda: self.by(name).set_input_files(str(path)))

    # -- what a user sees ------------------------------------------------------------------------
    async def text(self, name: str) -> str:
        return await self.by(name).inner_text()

    async def loop_names(self) -> list[str]:
        names = self.by("tree").locator(".sl-node.sl-loop .sl-name")
        return [n.strip() for n in await names.all_inner_texts()]

    async def steps(self) -> list[str]:
        return [s.strip() for s in await self.by("steps").locator("li").all_inner_texts()]
