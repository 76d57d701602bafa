"""msir demo: a 2-layer MLP with softmax cross-entropy, written in plain NumPy.

The forward pass is compiled by msir.jit to native code and checked against
NumPy; then an SGD training step (forward, reverse-mode gradient by source
transformation, update) is compiled as one native function that updates the
donated parameters in place, and trained for a few steps."""

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


def loss_only(x, w1, b1, w2, b2, y):
    return mlp_loss(x, w1, b1, w2, b2, y)[0]


@msir.jit(donate_argnums=(0, 1, 2, 3))
def sgd_step(w1, b1, w2, b2, x, y):
    loss, (g1, gb1, g2, gb2) = msir.value_and_grad(loss_only, argnums=(1, 2, 3, 4))(x, w1, b1, w2, b2, y)
    return w1 - 0.1 * g1, b1 - 0.1 * gb1, w2 - 0.1 * g2, b2 - 0.1 * gb2, loss


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

    # Training: the step's gradient and update are one native function; the
    # donated parameters are updated in place (the step returns the same arrays).
    params = [w1.copy(), b1.copy(), w2.copy(), b2.copy()]
    first = [p for p in params]
    losses = []
    t0 = time.perf_counter()
    *params, step_loss = sgd_step(*params, x, y)
    t1 = time.perf_counter()
    losses.append(float(step_loss))
    for _ in range(29):
        *params, step_loss = sgd_step(*params, x, y)
        losses.append(float(step_loss))
    t2 = time.perf_counter()
    in_place = all(p is q for p, q in zip(params, first))
    print(f"training: first step (compile + run) {1e3 * (t1 - t0):.0f} ms, then {1e3 * (t2 - t1) / 29:.2f} ms/step")
    print(f"loss over 30 SGD steps: {losses[0]:.4f} -> {losses[-1]:.4f}; parameters updated in place: {in_place}")
    assert losses[-1] < 0.5 * losses[0] and in_place
    print("OK")


if __name__ == "__main__":
    main()
