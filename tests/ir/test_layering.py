"""The IR sits at the bottom of schedlab's layers: nothing in schedlab/ir imports another part
of schedlab (the printer registers itself on the IR instead), and printing works as soon as
schedlab is imported."""

import ast
import subprocess
import sys
from pathlib import Path

IR = Path(__file__).resolve().parents[2] / "schedlab" / "ir"
ALLOWED = {"schedlab.errors"}


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):  # function-level imports too
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1:
                found.add("." * node.level + (node.module or ""))
            elif node.level == 0 and node.module:
                found.add(node.module)
    return found


def test_the_ir_imports_no_other_part_of_schedlab():
    outside = {
        path.name: sorted(m for m in _imported_modules(path)
                          if (m.startswith("schedlab") and not m.startswith("schedlab.ir")
                              and m not in ALLOWED) or m.startswith(".."))
        for path in IR.glob("*.py")
    }  # fmt: skip
    assert {name: mods for name, mods in outside.items() if mods} == {}


def test_nodes_print_right_after_import_schedlab():
    code = (
        "import schedlab\n"
        "from schedlab.ir import Var\n"
        "x = Var('x')\n"
        "assert repr(x + 1) == 'x + 1', repr(x + 1)\n"
        "assert 'T.prim_func' in schedlab.workloads.get('gemm', M=2, N=2, K=2)[0].script()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
