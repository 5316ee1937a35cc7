"""The extensions under extensions/ plug in through schedlab's entry points and work end to end:
schedlab_pool (workloads, interpreted and compiled against numpy), schedlab_presets (target
presets, a default-schedule rule for them, an explorer tab), schedlab_npz (a model frontend).
The plug-in points no package here uses (primitives, intrinsics) are tested with a package
made on the fly."""

import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import pytest

import schedlab
from schedlab import dlight, plugins, relax, target, workloads

POOL = ("max_pool2d_nchw", "avg_pool2d_nchw")


def _installed() -> bool:
    entries = importlib.metadata.entry_points(group=workloads.registry.ENTRY_POINT_GROUP)
    return any(entry.value == "schedlab_pool" for entry in entries)


def test_extension_is_installed_and_discovered():
    # `make test` installs extensions/schedlab_pool; the registry finds it by entry point
    assert _installed(), "pip install -e extensions/schedlab_pool (make test does)"
    assert set(POOL) <= set(workloads.names())
    assert not set(POOL) & set(workloads.names(include_plugins=False))


@pytest.mark.parametrize("name", POOL)
@pytest.mark.parametrize("sizes", [dict(C=3, H=9, W=11, kernel=3, stride=2), dict(H=7, W=6)])
def test_pool_workloads_match_numpy(name, sizes):
    func, reference = workloads.get(name, **sizes)
    args = workloads.make_args(func, seed=5)
    expected = reference(args[0])
    schedlab.interpret(func, *args)
    np.testing.assert_allclose(args[1], expected, rtol=1e-5, atol=1e-6)
    out = np.zeros_like(args[1])
    schedlab.build(func)(args[0], out)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_broken_extension_is_named(monkeypatch):
    class Broken:
        name, value = "broken", "no_such_module_xyz"

        def load(self):
            raise ModuleNotFoundError("No module named 'no_such_module_xyz'")

    monkeypatch.setattr(workloads.registry, "_plugins_loaded", False)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [Broken()])
    with pytest.raises(ImportError, match="extension 'broken'"):
        workloads.load_plugins()


# -- the plug-in points (schedlab/plugins.py, docs/extending.md) and the extensions using them ---
def _entry_values(group: str) -> set[str]:
    return {entry.value for entry in plugins.entry_points(group)}


def test_every_extension_is_installed_with_its_entry_points():
    # `make test` installs extensions/* (Makefile: EXTENSIONS)
    hint = "pip install -e extensions/schedlab_presets -e extensions/schedlab_npz (make test does)"
    assert "schedlab_presets.presets:register" in _entry_values("schedlab.targets"), hint
    assert "schedlab_presets.rules:register" in _entry_values("schedlab.schedule_rules"), hint
    assert "schedlab_presets.panel:register" in _entry_values("schedlab.explorer_panels"), hint
    assert "schedlab_npz:register" in _entry_values("schedlab.frontends"), hint
    text = plugins.describe()
    for group in plugins.GROUPS:
        assert group in text


def test_target_presets_from_an_extension():
    assert {"haswell", "zen2"} <= set(target.presets())
    haswell = schedlab.Target("haswell")
    assert haswell.kind == "cpu" and haswell.simd_width == 256 and haswell.march == "haswell"
    assert "Haswell" in haswell.describe() and haswell.num_cores == schedlab.Target().num_cores
    assert schedlab.Target(str(haswell)) == haswell  # JSON round trip, as bundles keep it
    with pytest.raises(ValueError, match="built-in target kind or preset"):
        target.register_preset("zen3", {"simd_width": 256})
    with pytest.raises(ValueError, match="registered already"):
        target.register_preset("haswell", {"simd_width": 256})
    with pytest.raises(ValueError, match=r"register_preset\('bad'\).*unknown attribute.*vlen"):
        target.register_preset("bad", {"vlen": 256})
    with pytest.raises(ValueError, match="CPU presets: .*haswell, zen2"):
        schedlab.Target("no-such-machine")


@pytest.mark.parametrize("M, N, rule", [(256, 320, "BlockedTranspose"), (255, 7, "Elementwise")])
def test_schedule_rule_from_an_extension_on_its_targets(M, N, rule):
    func, reference = workloads.get("transpose", M=M, N=N)
    names = [r.name for r in dlight.cpu.default_rules()]
    assert names.index("BlockedTranspose") == names.index("Elementwise") - 1
    sch, fired = dlight.schedule_func(func, dlight.cpu.default_rules(), "haswell", debug=True)
    assert fired == {"T_transpose": rule}
    args = workloads.make_args(sch.func, seed=3)
    schedlab.interpret(sch.func, *args)
    np.testing.assert_array_equal(args[1], reference(args[0]))
    out = np.zeros_like(args[1])
    schedlab.build(sch.func, "haswell")(args[0], out)
    np.testing.assert_array_equal(out, reference(args[0]))
    # on a target not made from the package's presets the rule declines
    _, fired = dlight.schedule_func(func, dlight.cpu.default_rules(), "cpu")
    assert fired == {"T_transpose": "Elementwise"}


def test_register_rule_checks_what_it_is_given():
    with pytest.raises(TypeError, match="not a dlight ScheduleRule"):
        dlight.register_rule(lambda: object())
    with pytest.raises(ValueError, match="target must be one of cpu, gpu"):
        dlight.register_rule(dlight.cpu.Fallback, target="tpu")

    class Misplaced(dlight.ScheduleRule):
        name = "Misplaced"

        def schedule_block(self, sch, block, info, target):
            return False

    dlight.register_rule(Misplaced, target="gpu", before="Conv")
    try:
        with pytest.raises(ValueError, match="before 'Conv', which is not a gpu rule"):
            dlight.gpu.default_rules()
    finally:
        dlight.unregister_rule(Misplaced, target="gpu")
    assert "Misplaced" not in [r.name for r in dlight.gpu.default_rules()]


def test_explorer_panel_from_an_extension():
    from schedlab.ui.model import ExplorerModel
    from schedlab.ui.session import ExplorerSession

    session = ExplorerSession(ExplorerModel())
    try:
        session.handle({"type": "load_workload", "name": "gemm",
                        "sizes": {"M": 64, "N": 64, "K": 64}})  # fmt: skip
        (panel,) = [p for p in session.state()["panels"] if p["name"] == "cpu-presets"]
        assert panel["title"] == "CPU presets" and not panel["error"]
        assert "haswell" in panel["text"] and "zen5" in panel["text"]
        before = panel["text"]
        i = next(n["uid"] for n in session.state()["loop_choices"] if n["name"] == "i")
        session.handle({"type": "select", "kind": "loop", "uid": i})
        session.handle({"type": "apply", "primitive": "parallel", "args": {}})
        (stale,) = [p for p in session.state()["panels"] if p["name"] == "cpu-presets"]
        assert stale["stale"] and stale["text"] == ""  # behind another tab: not run again
        session.handle({"type": "show_tab", "tab": "panel-cpu-presets"})
        (after,) = [p for p in session.state()["panels"] if p["name"] == "cpu-presets"]
        assert not after["stale"] and after["text"] != before  # run for the new step
    finally:
        session.close()


def test_a_failing_panel_shows_its_error_in_its_tab():
    from schedlab.ui import panels
    from schedlab.ui.model import ExplorerModel

    def broken(model):
        raise RuntimeError("no luck")

    panels.register_panel("broken-test", "Broken", broken)
    model = ExplorerModel()
    try:
        model.load_workload("gemm", M=8, N=8, K=8)
        shown = {p["name"]: p for p in panels.panels_state(model, {})}
        assert shown["broken-test"]["error"] == "panel 'broken-test' failed: RuntimeError: no luck"
        with pytest.raises(ValueError, match="registered already"):
            panels.register_panel("broken-test", "Broken", broken)
    finally:
        panels.unregister_panel("broken-test")
        model.close()


def _npz_mlp(path, rng):
    import schedlab_npz

    constants = {"w1": rng.standard_normal((16, 32)).astype("float32"),
                 "b1": rng.standard_normal(32).astype("float32"),
                 "w2": rng.standard_normal((32, 10)).astype("float32")}  # fmt: skip
    nodes = [
        {"op": "matmul", "inputs": ["x", "w1"], "output": "h"},
        {"op": "add", "inputs": ["h", "b1"], "output": "hb"},
        {"op": "nn.relu", "inputs": ["hb"], "output": "r"},
        {"op": "matmul", "inputs": ["r", "w2"], "output": "logits"},
        {"op": "nn.softmax", "inputs": ["logits"], "attrs": {"axis": -1}, "output": "p"},
    ]
    schedlab_npz.save(path, {"x": ((4, 16), "float32")}, nodes, ["p", "r"], constants)
    return constants


def test_npz_frontend_from_an_extension_end_to_end(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mlp.npz"
    c = _npz_mlp(path, rng)
    assert relax.frontend.frontend_for(path).name == "npz"
    mod = relax.frontend.from_file(path)
    x = rng.standard_normal((4, 16)).astype("float32")
    r = np.maximum(x @ c["w1"] + c["b1"], 0)
    logits = r @ c["w2"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    p, r_out = relax.VirtualMachine(schedlab.compile(mod, "cpu"))["main"](x)
    np.testing.assert_allclose(p, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r_out, r, rtol=1e-5, atol=1e-5)
    # another batch size through shape_dict, and the explorer opening the file
    wider = relax.frontend.from_file(path, {"x": (7, 16)})
    assert "(7, 10)" in wider.script()
    ex = schedlab.explore(str(path))
    try:
        assert ex.state["source"] == "npz model mlp.npz"
        assert "fused_matmul_add_nn_relu" in [f["name"] for f in ex.state["functions"]]
    finally:
        ex.close()


def test_npz_frontend_errors_name_the_node(tmp_path):
    import schedlab_npz

    path = tmp_path / "bad.npz"
    x = {"x": ((2, 3), "float32")}
    schedlab_npz.save(path, x, [{"op": "nn.frobnicate", "inputs": ["x"], "output": "y"}], ["y"], {})
    with pytest.raises(schedlab_npz.NpzGraphError, match=r"node 0 \(y\): unknown op "
                       r"'nn.frobnicate'; the ops: abs, add, "):  # fmt: skip
        relax.frontend.from_file(path)
    schedlab_npz.save(path, x, [{"op": "add", "inputs": ["x", "w"], "output": "y"}], ["y"], {})
    with pytest.raises(schedlab_npz.NpzGraphError, match=r"node 0 \(y\): 'w' is neither an input"):
        relax.frontend.from_file(path)
    listed = r"the frontends and their suffixes are onnx \(.onnx\), npz \(.npz\)"
    with pytest.raises(relax.frontend.FrontendError, match=r"reads '.*model.pt': " + listed):
        relax.frontend.from_file(tmp_path / "model.pt")


def test_a_broken_extension_is_named_and_tried_again(monkeypatch):
    class Broken:
        name, value = "broken", "no_such_module_xyz:register"

        def load(self):
            raise ModuleNotFoundError("No module named 'no_such_module_xyz'")

    monkeypatch.setattr(plugins, "_state", {})
    monkeypatch.setattr(plugins, "entry_points", lambda group: [Broken()])
    for _ in range(2):  # not hidden after the first failure
        with pytest.raises(plugins.PluginError, match=r"schedlab extension 'broken' "
                           r"\(no_such_module_xyz:register\) in group schedlab.frontends failed "
                           "to load: ModuleNotFoundError"):  # fmt: skip
            relax.frontend.frontends()


_FAKE_EXTENSION = '''
from schedlab.ir.stmt import ForKind
from schedlab.schedule import TensorIntrin, primitive


@primitive("UnrollIfShort", inputs=("loop",))
def unroll_if_short(ctx, loop, limit: int = 8):
    """Unroll `loop` when its extent is at most `limit`."""
    if loop.extent.value > limit:
        return ctx.state, None
    return ctx.state.replace(loop, loop.replace(kind=ForKind.UNROLLED)), None


def register_intrinsics():
    name = TensorIntrin.names()[0]
    builtin = TensorIntrin.get(name)
    TensorIntrin.register("fake_ext_copy", builtin.desc, builtin.impl)
'''

_FAKE_CHECK = """
import json
from schedlab import Schedule, workloads
from schedlab.schedule import Trace, TensorIntrin
from schedlab.schedule.reference import render_reference

sch = Schedule(workloads.get("gemm", M=16, N=16, K=4)[0])
i, j, k = sch.get_loops(sch.get_block("C"))
sch.unroll_if_short(k, limit=4)
sch.unroll_if_short(j, limit=4)
assert "for k in T.unroll(4)" in sch.func.script() and "T.unroll(16)" not in sch.func.script()
again = Schedule(workloads.get("gemm", M=16, N=16, K=4)[0])
Trace.from_json(json.loads(json.dumps(sch.trace.as_json()))).apply_to_schedule(again)
assert again.func.script() == sch.func.script()
assert "unroll_if_short" not in render_reference()
assert "fake_ext_copy" in TensorIntrin.names()
print("ok")
"""


def test_primitive_and_intrinsic_plug_in_points(tmp_path):
    """A package found through a .dist-info on sys.path, as pip installs one, in a fresh
    process: its primitive becomes a Schedule method and replays from a trace, its tensor
    intrinsic is listed; the primitives reference page stays schedlab's own."""
    (tmp_path / "fake_ext.py").write_text(_FAKE_EXTENSION)
    info = tmp_path / "fake_ext-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-ext\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[schedlab.primitives]\nunroll_if_short = fake_ext\n\n"
        "[schedlab.intrinsics]\ncopy = fake_ext:register_intrinsics\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-c", _FAKE_CHECK], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
