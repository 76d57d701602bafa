"""Model.train reads msir.dataset pipelines: the same steps as with a list of the same
batches, the time each step waited for its batch on the run context, and a
batch with the wrong columns refused by their names."""

import numpy as np
import pytest

import msir as ms
import msir.dataset as ds
from msir import nn
from msir.errors import MsirValueError
from msir.train import Callback, Model


def _net():
    ms.set_seed(0)
    return nn.SequentialCell([nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3)])


def _data(n=24):
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, 4)).astype(np.float32), rng.integers(0, 3, n).astype(np.int32)


class WaitRecorder(Callback):
    def __init__(self):
        self.waits, self.epoch_waits, self.losses = [], [], []

    def step_end(self, run_context):
        cb = run_context.original_args()
        self.waits.append(cb.data_wait_time)
        self.losses.append(float(cb.net_outputs.asnumpy()))

    def epoch_end(self, run_context):
        self.epoch_waits.append(run_context.original_args().epoch_data_wait_time)


@pytest.fixture(params=["graph", "pynative"])
def mode(request):
    ms.set_context(mode=ms.GRAPH_MODE if request.param == "graph" else ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


@pytest.fixture
def pynative():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def _train(dataset, epochs=2, **kwargs):
    net = _net()
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.1, 0.9))
    recorder = WaitRecorder()
    model.train(epochs, dataset, callbacks=[recorder], **kwargs)
    return net, recorder


def test_model_trains_on_a_pipeline_as_on_its_batches(mode):
    x, y = _data()
    pipeline = ds.NumpySlicesDataset({"image": x, "label": y}, shuffle=False).map(lambda v: v * 2, "image").batch(8)
    net, recorder = _train(pipeline, dataset_sink_mode=True)
    batches = [(x[i:i + 8] * 2, y[i:i + 8]) for i in range(0, 24, 8)]
    reference, reference_recorder = _train(batches)
    np.testing.assert_allclose(recorder.losses, reference_recorder.losses, rtol=1e-6)
    for p, q in zip(net.trainable_params(), reference.trainable_params()):
        np.testing.assert_allclose(p.asnumpy(), q.asnumpy(), rtol=1e-6)
    assert len(recorder.waits) == 6 and all(isinstance(w, float) and w >= 0 for w in recorder.waits)
    assert len(recorder.epoch_waits) == 2
    assert recorder.epoch_waits[1] == pytest.approx(sum(recorder.waits[3:]))


def test_shuffled_pipeline_trains_every_sample_each_epoch(pynative):
    x, y = _data()
    seen = []

    def record(v):
        seen.append(int(v))
        return v

    ds.config.set_seed(4)
    pipeline = ds.NumpySlicesDataset({"image": x, "index": np.arange(24)}).map(record, "index").batch(6)
    net = _net()
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.1, 0.9))
    pipeline = pipeline.map(lambda i: (i % 3).astype(np.int32), "index")
    model.train(2, pipeline)
    assert sorted(seen[:24]) == sorted(seen[24:]) == list(range(24)) and seen[:24] != seen[24:]


def test_a_batch_with_other_columns_is_refused_by_name():
    x, y = _data()
    three = ds.NumpySlicesDataset({"image": x, "label": y, "weight": y.astype(np.float32)}).batch(8)
    with pytest.raises(MsirValueError, match=r"must be \(data, label\), got 3 columns \['image', 'label', 'weight'\]"):
        _train(three, epochs=1)


def test_model_eval_reads_a_pipeline_as_its_batches(pynative):
    x, y = _data()
    net = _net()
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  metrics={"accuracy": nn.Accuracy(), "loss": nn.Loss()})
    pipeline = ds.NumpySlicesDataset((x, y), column_names=["image", "label"], shuffle=False).batch(10)
    from_pipeline = model.eval(pipeline)
    from_batches = model.eval([(x[i:i + 10], y[i:i + 10]) for i in range(0, 24, 10)])
    assert from_pipeline == pytest.approx(from_batches)
    assert 0 <= from_pipeline["accuracy"] <= 1


def test_an_error_in_the_source_stops_training_with_the_users_frame(pynative):
    x, y = _data()

    def broken_source():
        for i in range(24):
            if i == 9:
                raise RuntimeError("sample 9 is unreadable")
            yield x[i], y[i]

    pipeline = ds.GeneratorDataset(broken_source, ["image", "label"]).batch(8)
    with pytest.raises(RuntimeError, match="sample 9 is unreadable") as err:
        _train(pipeline, epochs=1)
    assert "broken_source" in [entry.name for entry in err.traceback]
