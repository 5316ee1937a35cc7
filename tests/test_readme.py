"""The README's Python examples run as written."""

import pathlib
import re

README = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


def test_readme_examples_run(capsys):
    for index, block in enumerate(BLOCKS):
        namespace = {"__name__": "__readme__"}
        exec(compile(block, f"README.md[python block {index}]", "exec"), namespace)
    assert "T.prim_func" in capsys.readouterr().out
