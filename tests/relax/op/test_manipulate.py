"""Shape operators: inference matches legalization and numpy at odd sizes; errors name shapes."""

import numpy as np
import pytest

from schedlab.ir.expr import SizeVar
from schedlab.relax.op import OpTypeError, TensorInfo, get_op

from ._run import rand, run_op, run_symbolic, static


@pytest.mark.parametrize(
    "shape,target,expected",
    [((3, 5, 7), (15, 7), (15, 7)), ((3, 5, 7), (-1, 5), (21, 5)), ((3, 5, 7), (0, -1), (3, 35)),
     ((3, 5, 7), (7, 0, 3), (7, 5, 3)), ((2, 3), (6,), (6,))],
)  # fmt: skip
def test_reshape(shape, target, expected):
    x = rand(*shape)
    out = run_op("relax.reshape", [x], {"shape": target})
    np.testing.assert_array_equal(out, x.reshape(expected))


def test_flatten_squeeze_expand_dims():
    x = rand(3, 1, 5, 1)
    np.testing.assert_array_equal(run_op("relax.flatten", [x]), x.reshape(-1))
    np.testing.assert_array_equal(run_op("relax.squeeze", [x]), x.reshape(3, 5))
    np.testing.assert_array_equal(run_op("relax.squeeze", [x], {"axis": [-1]}), x[..., 0])
    y = rand(3, 5)
    out = run_op("relax.expand_dims", [y], {"axis": [0, -1]})
    np.testing.assert_array_equal(out, y[None, :, :, None])
    np.testing.assert_array_equal(run_op("relax.expand_dims", [y], {"axis": 1}), y[:, None])


@pytest.mark.parametrize("axes", [None, [1, 0, 2], [2, 0, 1], [-1, -3, -2]])
def test_permute_dims(axes):
    x = rand(3, 5, 7)
    np.testing.assert_array_equal(run_op("relax.permute_dims", [x], {"axes": axes}),
                                  np.transpose(x, axes))  # fmt: skip


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = [[3, 5, 7], [3, 5, 7], [3, 5, 7]]
    for k, s in enumerate(shapes):
        s[axis] = 2 + k
    xs = [rand(*s, seed=k) for k, s in enumerate(shapes)]
    out = run_op("relax.concat", xs, {"axis": axis})
    np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("spec,axis", [(3, 1), ([2, 5], 1), ([1, 4, 4], -1), (1, 0)])
def test_split(spec, axis):
    x = rand(5, 9, 7)
    outs = run_op("relax.split", [x], {"indices_or_sections": spec, "axis": axis})
    refs = np.split(x, spec, axis=axis)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize(
    "attrs,index",
    [
        ({"axes": [1], "begin": [1], "end": [4]}, np.s_[:, 1:4]),
        (
            {"axes": [0, 2], "begin": [-2, 0], "end": [100, 7], "strides": [1, 2]},
            np.s_[-2:, :, 0:7:2],
        ),
        ({"axes": [1], "begin": [-1], "end": [-100], "strides": [-2]}, np.s_[:, -1::-2]),
        ({"begin": [1, 6], "end": [3, 0], "strides": [1, -3]}, np.s_[1:3, 6:0:-3]),
        ({"axes": [2], "begin": [5], "end": [2]}, np.s_[:, :, 5:2]),
    ],
)
def test_strided_slice(attrs, index):
    x = rand(3, 7, 9)
    np.testing.assert_array_equal(run_op("relax.strided_slice", [x], attrs), x[index])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take(axis):
    x = rand(3, 5, 7)
    size = x.size if axis is None else x.shape[axis]
    indices = np.array([[0, size - 1, 2], [-1, 1, -size]], dtype="int64")
    out = run_op("relax.take", [x, indices], {"axis": axis})
    ref = np.take(x, np.where(indices < 0, indices + size, indices), axis=axis)
    np.testing.assert_array_equal(out, ref)


def test_take_clip_and_wrap_modes():
    x, indices = rand(7), np.array([-9, -1, 3, 8, 15], dtype="int32")
    np.testing.assert_array_equal(run_op("relax.take", [x, indices], {"axis": 0, "mode": "wrap"}),
                                  np.take(x, indices, mode="wrap"))  # fmt: skip
    out = run_op("relax.take", [x, indices], {"axis": 0, "mode": "clip"})
    np.testing.assert_array_equal(
        out, x[np.clip(np.where(indices < 0, indices + 7, indices), 0, 6)]
    )


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    x = rand(3, 5, 7)
    rng = np.random.default_rng(axis + 5)
    shape = [2, 4, 3]
    indices = rng.integers(-x.shape[axis], x.shape[axis], size=shape).astype("int64")
    out = run_op("relax.gather_elements", [x, indices], {"axis": axis})
    positive = np.where(indices < 0, indices + x.shape[axis], indices)
    grid = list(np.indices(shape))
    grid[axis] = positive
    np.testing.assert_array_equal(out, x[tuple(grid)])


@pytest.mark.parametrize("width", [[1, 2, 0, 0, 3, 1], [[1, 2], [0, 0], [3, 1]]])
def test_pad(width):
    x = rand(3, 5, 7)
    out = run_op("relax.nn.pad", [x], {"pad_width": width, "pad_value": 1.5})
    ref = np.pad(x, [(1, 2), (0, 0), (3, 1)], constant_values=1.5)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("shape,reps", [((3, 5), [2, 3]), ((3, 5), [2, 1, 3]), ((2, 3, 5), [3])])
def test_tile(shape, reps):
    x = rand(*shape)
    np.testing.assert_array_equal(run_op("relax.tile", [x], {"repeats": reps}), np.tile(x, reps))


def test_broadcast_to():
    x = rand(5, 1)
    out = run_op("relax.broadcast_to", [x], {"shape": (3, 5, 7)})
    np.testing.assert_array_equal(out, np.broadcast_to(x, (3, 5, 7)))


def test_full_zeros_ones():
    out = run_op("relax.full", [], {"shape": (3, 5), "fill_value": 2.5})
    np.testing.assert_array_equal(out, np.full((3, 5), 2.5, "float32"))
    out = run_op("relax.zeros", [], {"shape": [7], "dtype": "int32"})
    assert out.dtype == np.int32 and not out.any()
    np.testing.assert_array_equal(run_op("relax.ones", [], {"shape": (2, 3)}), np.ones((2, 3)))


def test_compiled_shape_ops():
    x = rand(3, 5, 7)
    out = run_op("relax.permute_dims", [x], {"axes": [2, 0, 1]}, compiled=True)
    np.testing.assert_array_equal(out, x.transpose(2, 0, 1))
    out = run_op("relax.concat", [x, x[:, :2]], {"axis": 1}, compiled=True)
    np.testing.assert_array_equal(out, np.concatenate([x, x[:, :2]], 1))
    out = run_op("relax.reshape", [x], {"shape": (7, -1)}, compiled=True)
    np.testing.assert_array_equal(out, x.reshape(7, -1))


def test_symbolic_shapes():
    n = SizeVar("n", "int64")
    info = get_op("relax.reshape").infer_info([TensorInfo((n, 4, 3))], {"shape": (0, -1)})
    assert info.shape[0] is n and info.shape[1].value == 12
    info = get_op("relax.concat").infer_info([TensorInfo((n, 2)), TensorInfo((n, 3))], {"axis": 1})
    assert info.shape[1].value == 5
    info = get_op("relax.permute_dims").infer_info([TensorInfo((n, 2))], {})
    assert info.shape[1] is n
    info = get_op("relax.split").infer_info(
        [TensorInfo((n, 6))], {"indices_or_sections": 2, "axis": 1}
    )
    assert len(info) == 2 and info[0].shape[0] is n and info[0].shape[1].value == 3
    assert get_op("relax.reshape").pattern == "injective"


def _t(*shape, dtype="float32"):
    return TensorInfo(shape, dtype)


@pytest.mark.parametrize(
    "name,inputs,attrs,words",
    [
        (
            "relax.reshape",
            [_t(3, 5)],
            {"shape": (4, 4)},
            ["relax.reshape", "15 elements", "(3, 5)"],
        ),
        ("relax.reshape", [_t(3, 5)], {"shape": (-1, -1)}, ["more than one -1"]),
        ("relax.reshape", [_t(3, 5)], {"shape": (2, -1)}, ["15 elements"]),
        ("relax.squeeze", [_t(3, 5)], {"axis": [1]}, ["size 5", "not 1"]),
        ("relax.expand_dims", [_t(3)], {"axis": [4]}, ["axis 4", "rank 2"]),
        ("relax.permute_dims", [_t(3, 5)], {"axes": [0]}, ["all 2 axes"]),
        ("relax.concat", [_t(3, 5), _t(4, 5)], {"axis": 1}, ["differ in axis 0", "(4, 5)"]),
        ("relax.concat", [_t(3, 5), _t(5)], {}, ["same rank"]),
        ("relax.split", [_t(3, 5)], {"indices_or_sections": 2, "axis": 1}, ["not divisible"]),
        ("relax.strided_slice", [_t(3, 5)], {"begin": [0], "end": [2], "strides": [0]}, ["0"]),
        ("relax.strided_slice", [_t(3, 5)], {"begin": [0, 1], "end": [2]}, ["same length"]),
        ("relax.take", [_t(3, 5), _t(2)], {"axis": 0}, ["integers", "float32"]),
        ("relax.take", [_t(3, 5), _t(2, dtype="int32")], {"axis": 2}, ["axis 2"]),
        ("relax.gather_elements", [_t(3, 5), _t(2, dtype="int64")], {}, ["same rank"]),
        ("relax.nn.pad", [_t(3, 5)], {"pad_width": [1, 1]}, ["2 axes", "(3, 5)"]),
        ("relax.nn.pad", [_t(3)], {"pad_width": [1, 1], "pad_mode": "reflect"}, ["reflect"]),
        ("relax.tile", [_t(3)], {"repeats": [0]}, [">= 1"]),
        ("relax.broadcast_to", [_t(3, 5)], {"shape": (3, 4)}, ["cannot broadcast", "(3, 5)"]),
        ("relax.full", [], {"shape": (3,)}, ["missing", "fill_value"]),
        ("relax.zeros", [], {"shape": (-3,)}, ["negative"]),
    ],
)
def test_errors(name, inputs, attrs, words):
    with pytest.raises(OpTypeError) as info:
        get_op(name).infer_info(inputs, attrs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_static_helper():
    assert static((3, 5)) == (3, 5)


def test_symbolic_legalization_runs():
    n = SizeVar("n", "int32")
    x = rand(5, 4, 3)
    out = run_symbolic("relax.reshape", [x], [(n, 4, 3)], (5, 12), {"shape": (0, -1)})
    np.testing.assert_array_equal(out, x.reshape(5, 12))
    out = run_symbolic("relax.permute_dims", [x], [(n, 4, 3)], (3, 5, 4), {"axes": [2, 0, 1]})
    np.testing.assert_array_equal(out, x.transpose(2, 0, 1))
    y = rand(5, 2, 3, seed=1)
    out = run_symbolic("relax.concat", [x, y], [(n, 4, 3), (n, 2, 3)], (5, 6, 3), {"axis": 1})
    np.testing.assert_array_equal(out, np.concatenate([x, y], 1))
    out = run_symbolic("relax.add", [x, x[0, 0]], [(n, 4, 3), (3,)], (5, 4, 3))
    np.testing.assert_array_equal(out, x + x[0, 0])
    out = run_symbolic("relax.sum", [x], [(n, 4, 3)], (5, 3), {"axis": 1})
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)
