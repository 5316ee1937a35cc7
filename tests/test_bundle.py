"""Schedule bundles (docs/bundle.md): exported from the explorer and rebuilt in a fresh process
by `schedlab apply`, refused loudly when they do not match, and used by `schedlab.compile`."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import schedlab
from schedlab import relax, workloads
from schedlab.bundle import Bundle, BundleError, export_bundle, load_bundle
from schedlab.cli import main
from schedlab.schedule import Schedule
from schedlab.tune.relax_integration import FROM_DATABASE_ATTR, extract_tasks
from schedlab.ui.model import ExplorerModel
from schedlab.workloads import make_args


def _explored_gemm() -> ExplorerModel:
    """The explorer on gemm at odd sizes, after split, parallel and vectorize clicks."""
    model = ExplorerModel(target="cpu")
    model.load_workload("gemm", M=37, N=29, K=19)
    model.select_block("C")
    model.select_loop(model.loops()[0])
    assert model.apply("split", factors=[None, 8]).ok
    i_0, i_1, j, k = model.loops()
    model.select_loop(i_0)
    assert model.apply("reorder", loops=[i_0, k, i_1, j]).ok
    model.select_loop(i_0)
    assert model.apply("parallel").ok
    model.select_loop(j)
    assert model.apply("vectorize").ok
    return model


@pytest.fixture(scope="module")
def gemm_bundle():
    """(the explorer's bundle JSON, the scheduled function, the unscheduled one)."""
    model = _explored_gemm()
    try:
        measured = model.measure(timeout=120)
        assert measured.ok, measured.reason
        data = model.export_bundle()
        yield data, model.func, model.schedule.history[0].mod["gemm"]
    finally:
        model.close()


def _write(tmp_path, data, name="gemm.bundle.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=1))
    return path


def _apply(*args):
    return subprocess.run([sys.executable, "-m", "schedlab.cli", "apply", *map(str, args)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_explorer_bundle_rebuilds_the_same_kernel_in_a_fresh_process(gemm_bundle, tmp_path):
    data, scheduled, original = gemm_bundle
    assert data["schema"] == "schedlab.bundle" and data["versions"]["schema"] == 1
    assert data["name"] == "gemm" and data["target"]["kind"] == "cpu"
    assert [m["source"] for m in data["measurements"]] == ["explorer"]
    out = _apply(_write(tmp_path, data), "--out", tmp_path / "build", "--check")
    assert out.returncode == 0, out.stderr
    for marker in ("kernel:    gemm(A: float32[37, 19]", "the printed function matches it",
                   "ms median (explorer)", "check:     max abs difference"):  # fmt: skip
        assert marker in out.stdout, out.stdout

    # the same generated source as the explorer's kernel, built here
    here = schedlab.build(scheduled, "cpu", name="gemm")
    assert (tmp_path / "build" / "gemm.c").read_text() == here.source
    assert (tmp_path / "build" / "gemm.so").stat().st_size > 0
    # the same numbers: the fresh process's outputs on seeded inputs, and ours on the same
    kept = np.load(tmp_path / "build" / "gemm.check.npz")
    args = make_args(original, seed=0)
    np.testing.assert_array_equal(kept["A"], args[0])
    here(*args)
    np.testing.assert_array_equal(kept["C"], args[2])
    np.testing.assert_allclose(args[2], args[0] @ args[1], rtol=1e-4, atol=1e-5)


def _tampered(data, edit):
    data = json.loads(json.dumps(data))
    edit(data)
    return data


def _edit_func(data):
    data["workload"]["func"] = data["workload"]["func"].replace("T.grid(37", "T.grid(36")


def _edit_split(data):
    for inst in data["trace"]["insts"]:
        if inst[0] == "Split":
            inst[1][-1] = 7  # another valid schedule: it replays, into another kernel


@pytest.mark.parametrize(
    "edit, expected",
    [
        (_edit_func, r"structural hash mismatch: the bundle records workload [0-9a-f]{64}, its "
                     r"printed function hashes to [0-9a-f]{64}"),
        (lambda d: d["workload"].update(structural_hash="0" * 64),
         "structural hash mismatch: the bundle records workload 0000"),
        (lambda d: d["trace"]["insts"][0][2].__setitem__(0, "D"),
         r"the trace does not replay on the bundle's function: replaying instruction 0 "
         r"\(GetBlock\) failed: .*no block named 'D'"),
        (_edit_split, r"scheduled kernel mismatch: the trace should make a function with "
                      r"structural hash [0-9a-f]{64}, replaying it here made [0-9a-f]{64}"),
        (lambda d: d["trace"].update(target="cuda"),
         "target mismatch: the trace was recorded for target kind 'cuda', the bundle is for "
         "'cpu'"),
        (lambda d: d["versions"].update(schema=2), "unsupported bundle schema version 2"),
        (lambda d: d.update(name="../gemm"), "'name' must be a C identifier"),
        (lambda d: d["measurements"].append({"median_secs": "fast"}),
         r"measurements\[1\]: measurement field 'median_secs' must be a number > 0"),
    ],
)  # fmt: skip
def test_a_bundle_that_does_not_match_fails_naming_what_differs(gemm_bundle, edit, expected):
    data = _tampered(gemm_bundle[0], edit)
    with pytest.raises(BundleError, match=expected):
        Bundle.from_json(data)


def test_apply_refuses_a_tampered_bundle_in_one_line(gemm_bundle, tmp_path, capsys):
    path = _write(tmp_path, _tampered(gemm_bundle[0], _edit_func))
    assert main(["apply", str(path), "--out", str(tmp_path / "build")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"schedlab apply: error: {path}: structural hash mismatch")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "build").exists()


def test_apply_refuses_another_target_kind(gemm_bundle, tmp_path, capsys):
    data = _tampered(gemm_bundle[0], lambda d: d.update(target={"kind": "cuda"}))
    data["trace"]["target"] = "cuda"
    path = _write(tmp_path, data)
    assert main(["apply", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the bundle is for target kind 'cuda'; schedlab apply builds with the CPU" in err


def test_apply_bad_files_are_one_line(tmp_path, capsys):
    (tmp_path / "junk.json").write_text("{not json")
    for path, expected in [(tmp_path / "missing.json", "cannot read bundle"),
                           (tmp_path, "is a directory"),
                           (tmp_path / "junk.json", "the JSON is malformed")]:  # fmt: skip
        assert main(["apply", str(path)]) == 2
        assert expected in capsys.readouterr().err


def _mlp():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(relax.call("relax.nn.relu", relax.call("relax.matmul", x, w)))
            z = bb.emit(relax.call("relax.exp", x))
            out = bb.emit_output(relax.Tuple([y, z]))
        bb.emit_func_output(out)
    return bb.get()


def _matmul_bundle(mod, target="cpu") -> Bundle:
    """A bundle of the module's matmul kernel (reordered k-i-j: unlike any default schedule)."""
    (task,) = [t for t in extract_tasks(mod, "cpu") if "matmul" in t.name]
    sch = Schedule(task.func, target=target)
    i, j, k = sch.get_loops(sch.get_block("matmul"))
    sch.reorder(k, i, j)
    return export_bundle(sch, name=task.name)


def test_compile_uses_the_bundle_for_its_kernel(tmp_path):
    mod = _mlp()
    bundle = _matmul_bundle(mod)
    for database in (bundle, [bundle], str(bundle.save(tmp_path / "mm.bundle.json"))):
        exe = schedlab.compile(mod, "cpu", database=database)
        tuned = {n for n, f in exe.mod.items() if f.attrs.get(FROM_DATABASE_ATTR)}
        assert tuned == {bundle.name}  # the exp kernel took the default schedule
        func = exe.mod[bundle.name]
        strip = {"global_symbol", "tir.is_scheduled", FROM_DATABASE_ATTR, "op_pattern"}
        same = func.replace(attrs={k: v for k, v in func.attrs.items() if k not in strip})
        expected = bundle.scheduled.replace(
            attrs={k: v for k, v in bundle.scheduled.attrs.items() if k not in strip}
        )
        assert schedlab.ir.structural_equal(same, expected)
    xs, ws = np.random.rand(4, 16).astype("float32"), np.random.rand(16, 8).astype("float32")
    y, z = relax.VirtualMachine(exe)["main"](xs, ws)
    np.testing.assert_allclose(y, np.maximum(xs @ ws, 0), rtol=1e-5)
    np.testing.assert_allclose(z, np.exp(xs), rtol=1e-5)


def test_an_explorer_bundle_of_a_model_kernel_goes_into_compile():
    """The explorer schedules a model's kernels as its "zero" pipeline fuses them; compile
    finds the same kernel (up to its name) in the target's pipeline."""
    mod = _mlp()
    model = ExplorerModel()
    try:
        model.load_graph(mod)
        model.open_function("fused_matmul_nn_relu")
        model.select_block("matmul")
        model.select_loop(model.loops()[0])
        assert model.apply("parallel").ok
        bundle = Bundle.from_json(model.export_bundle())
    finally:
        model.close()
    exe = schedlab.compile(mod, "cpu", database=bundle)
    assert exe.mod["fused_matmul_nn_relu"].attrs.get(FROM_DATABASE_ATTR)


def test_compile_refuses_bundles_that_fit_no_kernel_or_target(gemm_bundle):
    mod = _mlp()
    gemm = Bundle.from_json(gemm_bundle[0])
    with pytest.raises(BundleError, match=r"bundle 'gemm' matches no kernel of the module: it is "
                       r"for workload [0-9a-f]{12}\.\.\., the unscheduled kernels are "
                       r"exp \([0-9a-f]{12}\.\.\.\), fused_matmul_nn_relu \("):  # fmt: skip
        schedlab.compile(mod, "cpu", database=[_matmul_bundle(mod), gemm])
    cuda = _matmul_bundle(mod, target="cuda")
    assert Bundle.from_json(cuda.dumps()).target.kind == "cuda"
    with pytest.raises(BundleError, match="target mismatch: bundle 'fused_matmul_nn_relu' is for "
                       "target kind 'cuda', compiling for 'cpu'"):  # fmt: skip
        schedlab.compile(mod, "cpu", database=cuda)


def test_export_bundle_round_trips_from_a_schedule():
    sch = Schedule(workloads.get("softmax", M=5, N=7)[0])
    bundle = export_bundle(sch, measurements=[3e-6, {"median_secs": 2e-6, "source": "bench"}])
    again = Bundle.from_json(bundle.dumps())
    assert again.workload == bundle.workload and again.scheduled_hash == bundle.scheduled_hash
    assert [m["median_secs"] for m in again.measurements] == [3e-6, 2e-6]
    with pytest.raises(BundleError, match="must be a C identifier"):
        export_bundle(sch, name="no good")
    with pytest.raises(BundleError, match="'median_secs' required"):
        export_bundle(sch, measurements=[{"seconds": 1.0}])


def test_load_bundle_names_the_file(gemm_bundle, tmp_path):
    path = _write(tmp_path, _tampered(gemm_bundle[0], lambda d: d.update(extra=1)))
    with pytest.raises(BundleError, match=rf"^{path}: unknown bundle field\(s\) \['extra'\]"):
        load_bundle(path)
