"""msir demo: a 2-layer MLP forward pass with softmax cross-entropy, written in
plain NumPy, compiled by msir.jit to native code and checked against NumPy."""

import time

import numpy as np

import msir


def softmax_cross_entropy(logits, labels_onehot):
    m = logits.max(axis=1, keepdims=True)
    shifted = logits - m
    log_z = np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    log_p = shifted - log_z
    return -np.mean(np.sum(labels_onehot * log_p, axis=1))


def mlp_loss(x, w1, b1, w2, b2, y):
    h = np.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    return softmax_cross_entropy(logits, y), np.argmax(logits, axis=1)


def main():
    rng = np.random.default_rng(0)
    batch, d_in, d_hidden, d_out = 128, 784, 256, 10
    x = rng.standard_normal((batch, d_in), dtype=np.float32)
    w1 = (rng.standard_normal((d_in, d_hidden)) / np.sqrt(d_in)).astype(np.float32)
    b1 = np.zeros(d_hidden, np.float32)
    w2 = (rng.standard_normal((d_hidden, d_out)) / np.sqrt(d_hidden)).astype(np.float32)
    b2 = np.zeros(d_out, np.float32)
    y = np.eye(d_out, dtype=np.float32)[rng.integers(0, d_out, batch)]

    compiled = msir.jit(mlp_loss)
    t0 = time.perf_counter()
    loss, pred = compiled(x, w1, b1, w2, b2, y)
    t1 = time.perf_counter()
    ref_loss, ref_pred = mlp_loss(x, w1, b1, w2, b2, y)

    print("msir IR of the loss (first lines):")
    print("\n".join(compiled.lower(x, w1, b1, w2, b2, y).splitlines()[:8]), "\n  ...")
    print(f"first call (trace + compile + run): {1e3 * (t1 - t0):.0f} ms")
    print(f"loss  msir = {loss:.6f}   numpy = {ref_loss:.6f}   ({type(loss).__name__})")
    print(f"predictions agree: {np.array_equal(pred, ref_pred)}")
    assert np.allclose(loss, ref_loss, rtol=1e-5), (loss, ref_loss)
    assert np.array_equal(pred, ref_pred)
    print("OK")


if __name__ == "__main__":
    main()
