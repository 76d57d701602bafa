"""msir.dataset: MindSpore's data pipeline, checked against what MindSpore 2.10 itself gives.

The expected columns, sizes, dtypes and transform outputs were printed by
MindSpore 2.10.0 (CPU) running the same pipelines in a side environment
(`mindspore.dataset` with the same arguments; `vision.Resize` on the images
below); MindSpore is not a test dependency.
"""

import struct
import threading
import time

import numpy as np
import pytest

import msir.dataset as ds
from msir.common.tensor import Tensor
from msir.dataset import transforms, vision
from msir.errors import MsirValueError

X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10, dtype=np.int32)


def slices(**kwargs):
    return ds.NumpySlicesDataset({"data": X, "label": Y}, shuffle=False, **kwargs)


def last_column(dataset):
    return [int(row[-1]) for row in dataset.create_tuple_iterator(output_numpy=True)]


def test_columns_sizes_and_what_iterators_yield():
    d = slices()
    assert d.get_col_names() == ["data", "label"] and d.get_dataset_size() == 10
    row = next(d.create_tuple_iterator())
    assert isinstance(row, list) and isinstance(row[0], Tensor) and str(row[0].dtype) == "Float32"
    assert row[0].shape == (3,)
    row = next(d.create_dict_iterator(output_numpy=True))
    assert list(row) == ["data", "label"] and isinstance(row["data"], np.ndarray) and row["label"].dtype == np.int32
    assert isinstance(next(slices().create_dict_iterator())["data"], Tensor)
    assert isinstance(next(iter(slices()))[0], Tensor)
    label, data = next(slices().create_tuple_iterator(columns=["label", "data"], output_numpy=True))
    assert label == 0 and data.shape == (3,)
    with pytest.raises(MsirValueError, match=r"column \['image'\] is not among the dataset's columns"):
        slices().create_tuple_iterator(columns=["image"])


def test_column_naming_as_mindspore():
    assert ds.NumpySlicesDataset({"zlabel": Y, "data": X}).get_col_names() == ["zlabel", "data"]
    assert ds.NumpySlicesDataset((X, Y)).get_col_names() == ["column_0", "column_1"]
    assert ds.NumpySlicesDataset(X).get_col_names() == ["column_0"]
    assert ds.NumpySlicesDataset((X, Y), column_names=["a", "b"]).get_col_names() == ["a", "b"]
    ints = ds.NumpySlicesDataset([1, 2, 3], shuffle=False).create_tuple_iterator(output_numpy=True)
    assert [r[0].dtype for r in ints] == [np.int64] * 3
    floats = ds.NumpySlicesDataset([1.0, 2.0], shuffle=False).create_tuple_iterator(output_numpy=True)
    assert [r[0].dtype for r in floats] == [np.float64] * 2
    with pytest.raises(MsirValueError, match=r"1 column names \['a'\] for 2 columns"):
        ds.NumpySlicesDataset((X, Y), column_names=["a"])


def test_batch_sizes_and_drop_remainder():
    b = slices().batch(4)
    assert b.get_dataset_size() == 3
    assert [r[0].shape for r in b.create_tuple_iterator(output_numpy=True)] == [(4, 3), (4, 3), (2, 3)]
    b = slices().batch(4, drop_remainder=True)
    assert b.get_dataset_size() == 2
    assert [r[0].shape for r in b.create_tuple_iterator(output_numpy=True)] == [(4, 3), (4, 3)]
    assert next(slices().batch(3).create_tuple_iterator(output_numpy=True))[1].shape == (3,)
    assert ds.NumpySlicesDataset(np.arange(3)).batch(5, drop_remainder=True).get_dataset_size() == 0
    np.testing.assert_array_equal(next(slices().batch(4).create_tuple_iterator(output_numpy=True))[0], X[:4])


def test_repeat_and_batch_order():
    assert slices().batch(4).repeat(2).get_dataset_size() == 6
    r = slices().repeat(2).batch(4)
    assert r.get_dataset_size() == 5
    assert [x.shape for x, _ in r.create_tuple_iterator(output_numpy=True)] == [(4, 3)] * 5
    assert slices().repeat().get_dataset_size() == 10  # MindSpore reports one pass


def test_generator_sources():
    def gen():
        for i in range(5):
            yield np.array([i], np.float32), np.array(i, np.int64)

    g = ds.GeneratorDataset(gen, column_names=["a", "b"], shuffle=False)
    assert g.get_dataset_size() == 5
    rows = list(g.create_tuple_iterator(output_numpy=True))
    assert [(a.shape, b.shape, b.dtype) for a, b in rows] == [((1,), (), np.int64)] * 5

    g2 = ds.GeneratorDataset(lambda: iter([(i, float(i)) for i in range(3)]), column_names=["a", "b"], shuffle=False)
    assert [(a.dtype, b.dtype) for a, b in g2.create_tuple_iterator(output_numpy=True)] == [(np.int64, np.float64)] * 3

    class RandomAccess:
        def __getitem__(self, i):
            return np.array([i], np.float32), np.array(i % 2, np.int32)

        def __len__(self):
            return 7

    g3 = ds.GeneratorDataset(RandomAccess(), column_names=["x", "y"], shuffle=False)
    assert g3.get_dataset_size() == 7
    assert [int(y) for _, y in g3.create_tuple_iterator(output_numpy=True)] == [0, 1, 0, 1, 0, 1, 0]
    shuffled = ds.GeneratorDataset(RandomAccess(), column_names=["x", "y"])
    assert sorted(int(x[0]) for x, _ in shuffled.create_tuple_iterator(output_numpy=True)) == list(range(7))


def test_generator_column_mismatch_names_the_columns():
    g = ds.GeneratorDataset(lambda: iter([(1, 2)]), column_names=["a"], shuffle=False)
    with pytest.raises(MsirValueError, match=r"gave 2 values in row 0, for the 1 columns \['a'\]"):
        list(g.create_tuple_iterator())


def test_map_column_placement_as_mindspore():
    a, b, c = np.arange(4), np.arange(4) * 10, np.arange(4) * 100

    def abc():
        return ds.NumpySlicesDataset({"a": a, "b": b, "c": c}, shuffle=False)

    assert abc().map(lambda x, z: (x + 1, z + 1), ["a", "c"], ["x", "y"]).get_col_names() == ["x", "b", "y"]
    assert abc().map(lambda x, z: x + z, ["a", "c"], ["s"]).get_col_names() == ["s", "b"]
    assert abc().map(lambda x, z: x + z, ["b", "c"], ["s"]).get_col_names() == ["s", "a"]
    assert abc().map(lambda x, z: (x, z), ["c", "a"], ["c", "a"]).get_col_names() == ["a", "b", "c"]
    two = slices().map(lambda d: (d, d.sum()), input_columns=["data"], output_columns=["data", "s"])
    assert two.get_col_names() == ["data", "s", "label"]
    data, s, label = next(two.create_tuple_iterator(output_numpy=True))
    assert s == 3.0 and label == 0
    assert slices().map(lambda v: v + 1, ["label"], ["lab2"]).get_col_names() == ["data", "lab2"]
    np.testing.assert_array_equal(next(slices().map(lambda v: v * 2).create_tuple_iterator(output_numpy=True))[0],
                                  [0, 2, 4])
    chained = slices().map([lambda v: v + 1, lambda v: v * 10], "label")
    assert [int(label) for _, label in chained.create_tuple_iterator(output_numpy=True)][:3] == [10, 20, 30]


def test_map_bad_columns_are_named():
    with pytest.raises(MsirValueError, match=r"column \['nope'\] is not among the dataset's columns \['data', 'label'\]"):
        slices().map(lambda v: v, input_columns=["nope"])
    with pytest.raises(MsirValueError, match=r"clash with the columns \['label'\]"):
        slices().map(lambda v: v, ["data"], ["label"]).get_col_names()
    bad = ds.NumpySlicesDataset({"data": X}, shuffle=False).map(lambda v: (v, v), input_columns=["data"])
    with pytest.raises(MsirValueError, match=r"returned 2 values for the output columns \['data'\]") as err:
        list(bad.create_tuple_iterator())
    assert "test_dataset.py" in str(err.value)  # the map's own line


def test_batch_of_different_shapes_names_the_column():
    g = ds.GeneratorDataset(lambda: iter([(np.zeros(2),), (np.zeros(3),)]), ["a"], shuffle=False).batch(2)
    with pytest.raises(MsirValueError, match=r"cannot batch column 'a': its rows have the shapes \(2,\) and \(3,\)"):
        list(g.create_tuple_iterator())


def _failing_transform(value):
    if value == 3:
        raise KeyError("bad sample 3")
    return value


def test_map_exception_reaches_the_main_thread_with_its_frame():
    it = slices().map(_failing_transform, "label").create_tuple_iterator()
    with pytest.raises(KeyError, match="bad sample 3") as err:
        list(it)
    frames = [tb.tb_frame.f_code.co_name for tb in _walk(err.value.__traceback__)]
    assert "_failing_transform" in frames
    assert any("Dataset.map on the columns ['label']" in n for n in err.value.__notes__)


def _walk(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def test_shuffle_is_deterministic_under_the_seed_and_reshuffles_each_epoch():
    ds.config.set_seed(1)
    first = last_column(slices().shuffle(4))
    ds.config.set_seed(1)
    assert last_column(slices().shuffle(4)) == first
    assert sorted(first) == list(range(10)) and first != list(range(10))
    ds.config.set_seed(2)
    assert last_column(slices().shuffle(4)) != first
    ds.config.set_seed(7)
    it = ds.NumpySlicesDataset(np.arange(6)).create_tuple_iterator(output_numpy=True)
    epoch1, epoch2 = [int(r[0]) for r in it], [int(r[0]) for r in it]
    assert sorted(epoch1) == sorted(epoch2) == list(range(6)) and epoch1 != epoch2
    ds.config.set_seed(5489)
    assert ds.config.get_seed() == 5489


def test_buffered_shuffle_keeps_rows_near_their_place():
    ds.config.set_seed(3)
    order = last_column(ds.NumpySlicesDataset(np.arange(50), shuffle=False).shuffle(2))
    assert sorted(order) == list(range(50))
    # a buffer of 2 delays a row by at most the rows drawn before it: never read before its turn
    assert all(order[i] <= i + 1 for i in range(50))


def test_num_epochs_bounds_the_iterator():
    it = ds.NumpySlicesDataset(Y, shuffle=False).create_tuple_iterator(num_epochs=2, output_numpy=True)
    assert len(list(it)) == 10 and len(list(it)) == 10 and list(it) == []
    with pytest.raises(MsirValueError, match="num_epochs"):
        slices().create_tuple_iterator(num_epochs=0)


def test_prefetching_reads_ahead_on_a_bounded_queue_and_stops():
    produced = []

    def source():
        for i in range(100):
            produced.append(i)
            yield (np.array(i),)

    ds.config.set_prefetch_size(4)
    try:
        it = ds.GeneratorDataset(source, ["v"], shuffle=False).create_tuple_iterator(output_numpy=True)
        assert int(next(it)[0]) == 0
        deadline = time.time() + 5
        while len(produced) < 5 and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        # the row given, 4 in the queue, and at most one waiting to enter it: read ahead, and bounded
        assert 5 <= len(produced) <= 6
        threads = [t for t in threading.enumerate() if t.name == "msir-dataset-prefetch"]
        it.stop()
        assert all(not t.is_alive() for t in threads)
        assert list(it) == []
    finally:
        ds.config.set_prefetch_size(16)


def _counting_source(produced, rows):
    def source():
        for i in range(rows):
            produced.append(i)
            yield (np.array(i),)

    return source


def _wait_for(condition):
    deadline = time.time() + 5
    while not condition() and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)


@pytest.mark.parametrize("num_epochs", [1, 2])
def test_the_next_epoch_is_read_ahead_only_when_it_may_come(num_epochs):
    produced = []
    it = ds.GeneratorDataset(_counting_source(produced, 3), ["v"], shuffle=False).create_tuple_iterator(
        num_epochs=num_epochs, output_numpy=True)
    assert [int(r[0]) for r in it] == [0, 1, 2]
    _wait_for(lambda: len(produced) >= 6)
    assert len(produced) == 3 * num_epochs  # epoch 2 is ready before it is asked for, and only if it comes
    assert len(list(it)) == (3 if num_epochs == 2 else 0)


def test_after_an_error_the_iterator_ends():
    it = slices().map(_failing_transform, "label").create_tuple_iterator(num_epochs=-1)
    with pytest.raises(KeyError):
        list(it)
    assert list(it) == []


def test_mnist_reads_idx_files(tmp_path):
    images = (np.arange(5 * 28 * 28) % 256).astype(np.uint8).reshape(5, 28, 28)
    labels = np.array([3, 1, 4, 1, 5], np.uint8)
    _write_idx(tmp_path / "train-images-idx3-ubyte", 2051, images)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", 2049, labels)
    m = ds.MnistDataset(str(tmp_path), usage="train", shuffle=False)
    assert m.get_col_names() == ["image", "label"] and m.get_dataset_size() == 5
    image, label = next(m.create_tuple_iterator(output_numpy=True))
    assert image.shape == (28, 28, 1) and image.dtype == np.uint8 and label.dtype == np.uint32 and label == 3
    np.testing.assert_array_equal(image[..., 0], images[0])
    assert ds.MnistDataset(str(tmp_path), shuffle=False).get_dataset_size() == 5
    assert ds.MnistDataset(str(tmp_path), num_samples=2).get_dataset_size() == 2


def test_mnist_quick_start_pipeline(tmp_path):
    images = (np.arange(4 * 28 * 28) % 256).astype(np.uint8).reshape(4, 28, 28)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", 2051, images)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", 2049, np.array([3, 1, 4, 1], np.uint8))
    from msir.common import dtype as mstype

    m = ds.MnistDataset(str(tmp_path), usage="test", shuffle=False)
    m = m.map([vision.Rescale(1.0 / 255.0, 0), vision.Normalize(mean=(0.1307,), std=(0.3081,)), vision.HWC2CHW()],
              "image")
    m = m.map(transforms.TypeCast(mstype.int32), "label").batch(2)
    image, label = next(m.create_tuple_iterator())
    assert image.shape == (2, 1, 28, 28) and str(image.dtype) == "Float32" and str(label.dtype) == "Int32"
    np.testing.assert_array_equal(label.asnumpy(), [3, 1])
    # MindSpore's first three normalised pixels
    np.testing.assert_allclose(image.asnumpy()[0, 0, 0, :3], [-0.42421296, -0.41148472, -0.3987565], rtol=1e-6)


def test_mnist_bad_files_are_named(tmp_path):
    _write_idx(tmp_path / "train-images-idx3-ubyte", 2051, np.zeros((2, 4, 4), np.uint8))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, 2) + b"\x01")
    with pytest.raises(MsirValueError, match=r"train-labels-idx1-ubyte' holds 1 bytes of data, its header \(2,\)"):
        ds.MnistDataset(str(tmp_path), usage="train")
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2051, 2) + b"\x01\x02")
    with pytest.raises(MsirValueError, match="not an MNIST idx file of labels: magic number 2051"):
        ds.MnistDataset(str(tmp_path), usage="train")
    with pytest.raises(MsirValueError, match="does not exist"):
        ds.MnistDataset(str(tmp_path / "nowhere"))


def _write_idx(path, magic, array):
    path.write_bytes(struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes())


IMAGE = np.array([[207, 21, 45, 60, 46], [205, 222, 149, 10, 24], [85, 110, 159, 122, 67], [40, 177, 188, 8, 29],
                  [115, 100, 227, 132, 107], [110, 170, 150, 44, 188]], np.uint8)[:, :, None]
MINDSPORE_RESIZED = {
    (4, 9): [[207, 161, 86, 71, 71, 58, 47, 43, 41], [115, 123, 135, 146, 157, 122, 90, 69, 56],
             [59, 92, 147, 175, 198, 109, 40, 45, 49], [111, 125, 148, 160, 169, 112, 77, 134, 168]],
    (9, 7): [[207, 101, 28, 45, 56, 54, 46], [206, 158, 114, 97, 53, 35, 35], [185, 195, 188, 150, 63, 30, 31],
             [105, 119, 137, 157, 119, 85, 60], [63, 109, 152, 174, 96, 58, 48], [52, 116, 173, 194, 76, 34, 42],
             [102, 108, 143, 220, 142, 104, 94], [113, 125, 150, 189, 117, 113, 148],
             [110, 144, 164, 150, 74, 106, 188]],
    (3, 2): [[143, 35], [123, 61], [129, 103]],
}


@pytest.mark.parametrize("size", list(MINDSPORE_RESIZED))
def test_resize_uint8_gives_mindspores_bytes(size):
    out = vision.Resize(size)(IMAGE)
    assert out.dtype == np.uint8 and out.shape == (*size, 1)
    np.testing.assert_array_equal(out[..., 0], MINDSPORE_RESIZED[size])


def test_resize_float_and_shapes():
    f = IMAGE.astype(np.float32) / 255
    expected_row0 = [0.8098039627, 0.6330065131, 0.3383442163, 0.2789760529, 0.2784313857, 0.2272331118, 0.1832243949,
                     0.1679738461, 0.1588235348]
    out = vision.Resize((4, 9))(f)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0, :, 0], expected_row0, rtol=1e-6)
    assert vision.Resize(32)(np.zeros((28, 56, 1), np.uint8)).shape == (32, 64, 1)
    assert vision.Resize((3, 4))(np.zeros((5, 6), np.uint8)).shape == (3, 4)
    with pytest.raises(MsirValueError, match="size must be"):
        vision.Resize((0, 3))


def test_rescale_normalize_hwc2chw_typecast_compose():
    img = (np.arange(28 * 28) % 256).astype(np.uint8).reshape(28, 28, 1)
    a = vision.Rescale(1.0 / 255.0, 0)(img)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a[0, :3, 0], [0.0, 0.00392157, 0.00784314], rtol=1e-5)
    n = vision.Normalize(mean=[0.5 * 255], std=[0.5 * 255])(img)
    np.testing.assert_allclose(n[0, :3, 0], [-1.0, -0.99215686, -0.9843137], rtol=1e-6)
    np.testing.assert_allclose(
        vision.Normalize(mean=[1.0, 2.0], std=[2.0, 4.0], is_hwc=False)(np.ones((2, 2, 2), np.float32))[:, 0, 0],
        [0.0, -0.25])
    assert vision.HWC2CHW()(a).shape == (1, 28, 28) and vision.HWC2CHW()(np.zeros((5, 6))).shape == (5, 6)
    assert vision.Rescale(0.5, 0)(np.ones((2, 2, 1), np.int32)).dtype == np.float32
    from msir.common import dtype as mstype

    assert transforms.TypeCast(mstype.int32)(np.array(3, np.uint8)).dtype == np.int32
    composed = transforms.Compose([vision.Rescale(2.0, 1.0), vision.HWC2CHW()])(img)
    assert composed.shape == (1, 28, 28) and composed.dtype == np.float32 and composed[0, 0, 1] == 3.0


def test_unseeded_shuffles_differ_between_runs_as_mindspores_do():
    import subprocess
    import sys

    program = ("import numpy as np, msir.dataset as ds; print(ds.config.get_seed(), [int(r[0]) for r in "
               "ds.NumpySlicesDataset(np.arange(20)).create_tuple_iterator(output_numpy=True)])")
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0].startswith("5489 [") and runs[1].startswith("5489 [") and runs[0] != runs[1]


def test_msir_set_seed_seeds_the_pipeline_too():
    import msir

    msir.set_seed(11)
    first = last_column(ds.NumpySlicesDataset(np.arange(10)))
    assert ds.config.get_seed() == 11
    msir.set_seed(11)
    assert last_column(ds.NumpySlicesDataset(np.arange(10))) == first


COLOUR = np.array([[[171, 206], [5, 206], [120, 131], [161, 73]], [[250, 13], [71, 98], [146, 104], [33, 11]],
                   [[0, 12], [38, 255], [48, 167], [192, 60]]], np.uint8)
MINDSPORE_ENLARGED = [  # vision.Resize((7, 9)) of COLOUR in MindSpore 2.10: the edge rows are interpolated too
    [[171, 206], [143, 206], [69, 206], [11, 202], [62, 168], [113, 135], [136, 108], [154, 83], [161, 73]],
    [[182, 178], [154, 180], [80, 186], [21, 187], [69, 159], [118, 131], [131, 102], [139, 75], [142, 64]],
    [[216, 96], [187, 104], [110, 125], [48, 143], [89, 130], [130, 117], [117, 85], [96, 50], [88, 38]],
    [[250, 13], [220, 27], [141, 65], [75, 98], [109, 101], [142, 104], [102, 68], [52, 26], [33, 11]],
    [[143, 12], [128, 38], [90, 106], [59, 163], [80, 148], [101, 133], [103, 93], [102, 48], [101, 32]],
    [[36, 12], [37, 49], [40, 147], [44, 228], [52, 195], [61, 162], [104, 117], [151, 70], [169, 53]],
    [[0, 12], [6, 52], [23, 160], [39, 250], [43, 211], [47, 172], [104, 125], [168, 78], [192, 60]]]


def test_resize_enlarging_a_two_channel_image_gives_mindspores_bytes_and_floats():
    np.testing.assert_array_equal(vision.Resize((7, 9))(COLOUR), MINDSPORE_ENLARGED)
    floats = vision.Resize((7, 9))(COLOUR.astype(np.float32))
    np.testing.assert_allclose(floats[1, :4, 0], [182.2857, 154.3095, 79.7064, 20.5], atol=1e-3)
    np.testing.assert_allclose(floats[5, 1], [36.8810, 48.8810], atol=1e-3)


@pytest.mark.parametrize("hwc", [True, False])
@pytest.mark.parametrize("drop", [True, False])
def test_batched_maps_give_the_rows_own_results(hwc, drop):
    """A batch over maps whose operations all have a block form runs them once per
    block: the same bits, order and shapes as the per-row maps (the lambdas, which
    have no block form, force the row path)."""
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (23, 6, 5, 3)).astype(np.uint8)
    if not hwc:
        images = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    labels = rng.integers(0, 10, 23).astype(np.int64)
    ops = [vision.Rescale(1 / 255, -0.25), vision.Normalize([0.1, 0.2, 0.3], [0.5, 0.6, 0.7], is_hwc=hwc)]
    if hwc:
        ops.append(vision.HWC2CHW())
    cast = transforms.TypeCast(np.int32)

    def pipeline(block_form: bool):
        ds.config.set_seed(11)
        data = ds.NumpySlicesDataset({"image": images, "label": labels}, shuffle=True)
        image_ops = ops if block_form else [lambda x, op=op: op(x) for op in ops]
        data = data.map(image_ops, "image").map(cast if block_form else (lambda y: cast(y)), "label")
        return list(data.batch(5, drop_remainder=drop).create_tuple_iterator(num_epochs=1, output_numpy=True))

    fast, rows = pipeline(True), pipeline(False)
    assert len(fast) == len(rows) == (4 if drop else 5)
    for (xf, yf), (xr, yr) in zip(fast, rows):
        assert xf.dtype == xr.dtype == np.float32 and yf.dtype == yr.dtype == np.int32
        assert xf.shape == xr.shape and np.array_equal(xf, xr) and np.array_equal(yf, yr)
    assert rows[0][0].shape[1:] == (3, 6, 5)


def test_block_forms_refuse_what_the_row_forms_refuse():
    with pytest.raises(MsirValueError, match=r"Normalize: 2 means and stds for an image of 3 channels \(shape \(4, 4, 3\)\)"):
        vision.Normalize([0.1, 0.2], [1.0, 1.0]).apply_block(np.zeros((2, 4, 4, 3), np.float32))
    with pytest.raises(MsirValueError, match=r"HWC2CHW: the image must be \(H, W\) or \(H, W, C\), got shape \(4,\)"):
        vision.HWC2CHW().apply_block(np.zeros((2, 4), np.float32))
