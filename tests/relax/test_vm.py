"""schedlab.compile + VirtualMachine: compiled graphs compute what the graph interpreter does
(odd sizes), the profile table, and argument errors. Graph builders here are shared with
test_pipeline.py and transform/test_memory_plan.py."""

import numpy as np
import pytest

import schedlab
from schedlab.relax import BlockBuilder, R, TensorStructInfo, Var, VirtualMachine
from schedlab.relax.interpreter import run


def _params(**shapes):
    return [Var(name, TensorStructInfo(shape, "float32")) for name, shape in shapes.items()]


def mlp_module(rows=3, dims=(5, 7, 6, 9, 4)):
    """A chain of dense layers, relu between them, softmax at the end."""
    x, *ws = _params(x=(rows, dims[0]), **{f"w{k}": dims[k : k + 2] for k in range(len(dims) - 1)})
    b = Var("b", TensorStructInfo((dims[1],), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, b, *ws]):
        with bb.dataflow():
            h = bb.emit(R.add(R.matmul(x, ws[0]), b))
            for w in ws[1:]:
                h = bb.emit(R.matmul(bb.emit(R.nn.relu(h)), w))
            gv = bb.emit_output(R.nn.softmax(h, axis=1))
        bb.emit_func_output(gv)
    return bb.get()


def conv_bn_relu_module():
    """conv2d (padding 1) -> batch_norm (inference) -> relu, NCHW, odd sizes."""
    x, w, g, be, m, v = _params(x=(1, 3, 7, 5), w=(5, 3, 3, 3), g=(5,), be=(5,), m=(5,), v=(5,))
    bb = BlockBuilder()
    with bb.function("main", [x, w, g, be, m, v]):
        with bb.dataflow():
            c = bb.emit(R.nn.conv2d(x, w, padding=1))
            n = bb.emit(R.nn.batch_norm(c, g, be, m, v, axis=1))
            gv = bb.emit_output(R.nn.relu(n))
        bb.emit_func_output(gv)
    return bb.get()


def norm_module():
    """layer_norm over the last axis, then softmax; returns a tuple (both values)."""
    x, g, b = _params(x=(5, 11), g=(11,), b=(11,))
    bb = BlockBuilder()
    with bb.function("main", [x, g, b]):
        with bb.dataflow():
            ln = bb.emit(R.nn.layer_norm(x, g, b, axes=[-1]))
            sm = bb.emit(R.nn.softmax(R.multiply(ln, ln), axis=-1))
            gv = bb.emit_output(R.tuple(sm, ln))
        bb.emit_func_output(gv)
    return bb.get()


def inputs_for(mod, seed=0):
    """Random float32 arrays for `main`'s parameters (variances made positive)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param in mod["main"].params:
        shape = param.struct_info_.static_shape()
        array = rng.standard_normal(shape).astype("float32")
        arrays.append(np.abs(array) + 0.5 if param.name_hint == "v" else array)
    return arrays


def assert_vm_matches(mod, arrays):
    vm = VirtualMachine(schedlab.compile(mod, target="cpu"))
    got, want = vm["main"](*arrays), run(mod, *arrays)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return vm


@pytest.mark.parametrize("build", [mlp_module, conv_bn_relu_module, norm_module])
def test_compiled_matches_interpreter(build):
    mod = build()
    assert_vm_matches(mod, inputs_for(mod))


def test_results_are_fresh_and_repeatable():
    mod = mlp_module()
    arrays = inputs_for(mod)
    vm = assert_vm_matches(mod, arrays)
    first = vm["main"](*arrays)
    second = vm["main"](*arrays)
    assert first is not second and not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, second)


def test_planned_storage_is_reused_between_calls_and_never_returned():
    """Planned storage stays with the VM (no page faults on every call); results never alias
    it, nor each other, and a tuple returning one tensor twice gets two arrays."""
    mod = mlp_module()
    arrays = inputs_for(mod)
    vm = assert_vm_matches(mod, arrays)
    blocks = {key: [id(b) for b in free] for key, free in vm._storage.items()}
    assert blocks, "the mlp module plans storage for its intermediates"
    first = vm["main"](*arrays)
    assert {key: [id(b) for b in free] for key, free in vm._storage.items()} == blocks
    second = vm["main"](*arrays)
    np.testing.assert_array_equal(first, second)
    assert not np.shares_memory(first, second)
    for free in vm._storage.values():
        assert not any(np.shares_memory(first, block.array) for block in free)
    pair = assert_vm_matches(norm_module(), inputs_for(norm_module()))
    softmax, norm = pair["main"](*inputs_for(norm_module()))
    assert not np.shares_memory(softmax, norm)


def test_static_calls_launch_kernels_on_remembered_arguments(monkeypatch):
    """A static function hands its kernels the same tensor objects on every call (views of its
    planned storage made once), so after the first call each kernel launches on the pointers
    it remembered; only an argument that is new each call (the fresh result) is taken again.
    The results stay right, and new inputs are still read."""
    from schedlab.backend.cpu.runtime import CpuKernel

    taken = []
    remember = CpuKernel._remember
    monkeypatch.setattr(CpuKernel, "_remember", lambda k, args: taken.append(k.name)
                        or remember(k, args))  # fmt: skip
    mod = mlp_module()
    arrays = inputs_for(mod)
    vm = assert_vm_matches(mod, arrays)
    kernels = len(vm.executable.kernels)
    assert kernels >= 4
    taken.clear()
    vm["main"](*arrays)
    taken.clear()
    third = vm["main"](*arrays)
    assert len(taken) <= 1, taken  # the kernel writing the result
    np.testing.assert_allclose(third, run(mod, *arrays), rtol=1e-5, atol=1e-5)
    other = inputs_for(mod, seed=1)
    np.testing.assert_allclose(vm["main"](*other), run(mod, *other), rtol=1e-5, atol=1e-5)


def test_concurrent_calls_do_not_share_storage():
    from concurrent.futures import ThreadPoolExecutor

    mod = mlp_module(rows=64, dims=(32, 48, 40, 56, 24))
    vm = VirtualMachine(schedlab.compile(mod, target="cpu"))
    inputs = [inputs_for(mod, seed) for seed in range(6)]
    want = [run(mod, *arrays) for arrays in inputs]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda arrays: vm["main"](*arrays), inputs * 4))
    for k, result in enumerate(got):
        np.testing.assert_allclose(result, want[k % len(inputs)], rtol=1e-4, atol=1e-4)


def test_executable_keeps_instructions_and_kernels():
    ex = schedlab.compile(mlp_module(), target="cpu")
    assert set(ex.kernels) == {k for k, f in ex.mod.items() if isinstance(f, schedlab.PrimFunc)}
    text = ex.as_text()
    assert "call_kernel" in text and "alloc_storage" in text and "ret" in text
    assert "main" in repr(ex)


def test_profile_table():
    mod = mlp_module()
    vm = VirtualMachine(schedlab.compile(mod, target="cpu"))
    report = vm.profile(*inputs_for(mod))
    names = {row.name for row in report.rows}
    assert names == set(vm.executable.kernels)
    assert all(row.calls == 1 and row.total_ms >= 0 for row in report.rows)
    assert all(row.mean_ms == row.total_ms / row.calls for row in report.rows)
    text = str(report)
    assert "kernel" in text and "calls" in text and "mean ms" in text
    assert all(name in text for name in names)


def test_wrong_inputs_name_the_parameter():
    mod = conv_bn_relu_module()
    vm = VirtualMachine(schedlab.compile(mod, target="cpu"))
    arrays = inputs_for(mod)
    with pytest.raises(ValueError, match=r"expected 6 argument\(s\) \(x, w, g, be, m, v\), got 5"):
        vm["main"](*arrays[:5])
    bad = [*arrays[:1], np.zeros((5, 3, 3, 2), "float32"), *arrays[2:]]
    with pytest.raises(ValueError, match=r"parameter 'w': expected shape \(5, 3, 3, 3\)"):
        vm["main"](*bad)
    with pytest.raises(ValueError, match=r"parameter 'x': expected dtype float32, got float64"):
        vm["main"](arrays[0].astype("float64"), *arrays[1:])
    with pytest.raises(KeyError, match="no function 'nope'"):
        vm["nope"]


def test_symbolic_batch_without_fused_intermediates():
    from schedlab.ir.expr import SizeVar

    n = SizeVar("n")
    x = Var("x", TensorStructInfo((n, 5), "float32"))
    w = Var("w", TensorStructInfo((5, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(R.matmul(x, w))
        bb.emit_func_output(gv)
    mod = bb.get()
    vm = VirtualMachine(schedlab.compile(mod, target="cpu"))
    rng = np.random.default_rng(1)
    for rows in (1, 7):
        arrays = [rng.standard_normal((rows, 5)).astype("float32")]
        arrays.append(rng.standard_normal((5, 3)).astype("float32"))
        np.testing.assert_allclose(vm["main"](*arrays), run(mod, *arrays), rtol=1e-5, atol=1e-6)


def test_compile_rejects_what_it_cannot_run():
    with pytest.raises(TypeError, match="expected an IRModule"):
        schedlab.compile("main")
    mod = mlp_module()
    with pytest.raises(schedlab.LoweringError, match=r"cannot call 'relax.add'"):
        schedlab.compile(mod, pipeline=schedlab.ir.transform.Sequential([]))


def test_graph_function_calls_and_match_cast():
    from schedlab.relax import Call, GlobalVar

    bb = BlockBuilder()
    (y,) = _params(y=(3, 5))
    with bb.function("helper", [y]):
        with bb.dataflow():
            gv = bb.emit_output(R.exp(y))
        bb.emit_func_output(gv)
    (x,) = _params(x=(3, 5))
    with bb.function("main", [x]):
        a = bb.emit(R.add(x, x))
        h = bb.emit(Call(GlobalVar("helper"), (a,)))
        c = bb.match_cast(h, TensorStructInfo((3, 5), "float32"))
        bb.emit_func_output(bb.emit(R.multiply(c, x)))
    mod = bb.get()
    vm = assert_vm_matches(mod, inputs_for(mod))
    text = vm.executable.as_text()
    assert "call_func(r2) [helper]" in text and "match(r3)" in text


def test_fused_kernel_with_symbolic_intermediate():
    """A fused kernel keeping an (n, 3) intermediate of symbolic size: the C backend allocates
    it on the heap at run time; the VM matches the graph interpreter at several batch sizes."""
    from schedlab.ir.expr import SizeVar

    n = SizeVar("n")
    x = Var("x", TensorStructInfo((n, 5), "float32"))
    w = Var("w", TensorStructInfo((5, 3), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(R.nn.relu(bb.emit(R.matmul(x, w))))
        bb.emit_func_output(gv)
    mod = bb.get()
    vm = VirtualMachine(schedlab.compile(mod, target="cpu"))
    kernel = vm.executable.kernels["fused_matmul_nn_relu"]
    assert "sl_alloc((size_t)(n * 3)" in kernel.source  # the intermediate, on the heap
    rng = np.random.default_rng(2)
    for rows in (3, 5):
        arrays = [rng.standard_normal((rows, 5)).astype("float32")]
        arrays.append(rng.standard_normal((5, 3)).astype("float32"))
        got = vm["main"](*arrays)
        assert got.shape == (rows, 3)
        np.testing.assert_allclose(got, run(mod, *arrays), rtol=1e-5, atol=1e-6)


def test_the_vm_keeps_weights_and_storage_on_cache_lines(monkeypatch):
    """Kernels get 64-byte aligned weights (an ONNX weight is a view at any offset) and
    planned storage (numpy's own arrays start 16 bytes past a page)."""
    import schedlab.relax.vm as vm_module
    from schedlab.host_arrays import is_aligned

    x, w0 = _params(x=(8, 16), w0=(16, 12))
    raw = np.random.default_rng(0).standard_normal(16 * 12 + 1).astype(np.float32)
    weight = raw[1:].reshape(16, 12)  # 4 bytes past raw's start: never aligned
    assert not is_aligned(weight)
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(R.matmul(x, R.const(weight))))
            gv = bb.emit_output(R.nn.softmax(R.add(h, h), axis=1))
        bb.emit_func_output(gv)
    mod = bb.get()
    ex = schedlab.compile(mod, target="cpu")
    constants = [c for f in ex.functions.values() for c in f.constants if isinstance(c, np.ndarray)]
    assert constants and all(is_aligned(c) for c in constants)
    seen = []
    launch = vm_module._launch
    monkeypatch.setattr(vm_module, "_launch", lambda k, args: (seen.extend(args), launch(k, args)))
    data = inputs_for(mod)
    got = VirtualMachine(ex)["main"](*data)
    np.testing.assert_allclose(got, run(mod, *data), rtol=1e-5, atol=1e-6)
    assert len(seen) > 2 and all(is_aligned(a) for a in seen if a is not data[0])
