"""The README's Python examples run as written, and the API it names in the text exists."""

import json
import pathlib
import re
import subprocess
import sys

README = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
# `schedlab.compile(...)`, `relax.frontend.from_onnx(path)`: dotted names in inline code
NAMES = sorted(set(re.findall(r"`((?:schedlab|relax)\.[A-Za-z_][\w.]*)", README)))


def test_readme_has_examples():
    assert len(BLOCKS) >= 2


def test_every_code_block_is_python_or_shell():
    """A block in another language (or none) would be skipped by the test below unnoticed."""
    fences = re.findall(r"^```(\w*)\n.*?^```$", README, flags=re.S | re.M)
    assert len(fences) == README.count("\n```") // 2
    assert set(fences) <= {"python", "bash"}, fences
    assert fences.count("python") == len(BLOCKS)


def test_readme_examples_run(capsys):
    for index, block in enumerate(BLOCKS):
        namespace = {"__name__": "__readme__"}
        exec(compile(block, f"README.md[python block {index}]", "exec"), namespace)
    out = capsys.readouterr().out
    assert "T.prim_func" in out and "<Bundle gemm for cpu" in out


_RESOLVE = """
import importlib, json, sys
import schedlab
from schedlab import relax

def resolve(dotted):
    # `relax.x.y` as written after `from schedlab import relax` (attributes only); a
    # `schedlab.x` may also be a module to import (`import schedlab.cost`)
    parts = dotted.split(".")
    obj = schedlab if parts[0] == "schedlab" else relax
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            if parts[0] != "schedlab":
                raise
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj

onnx_before = "onnx" in sys.modules
missing = []
for name in json.loads(sys.argv[1]):
    try:
        resolve(name)
    except (AttributeError, ImportError) as err:
        missing.append(f"{name}: {err}")
print(json.dumps({"missing": missing, "onnx_before": onnx_before,
                  "same": relax.frontend.from_onnx is relax.frontend.onnx.from_onnx}))
"""


def test_readme_names_resolve_in_a_fresh_process():
    """Every `schedlab.x` / `relax.x` the text names exists as written (a fresh process, so no
    other test's imports make a lazy attribute appear); the ONNX importer's two TVM paths are
    one function, and `import schedlab` + `from schedlab import relax` leave onnx unloaded."""
    assert {"relax.frontend.from_onnx", "relax.frontend.onnx.from_onnx"} <= set(NAMES)
    out = subprocess.run([sys.executable, "-c", _RESOLVE, json.dumps(NAMES)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    result = json.loads(out.stdout)
    assert result["missing"] == []
    assert result["same"] and not result["onnx_before"]
