"""Generate the quickstart dataset (run once; the result is committed under dataset/).

Labels come from a fixed random "teacher" network, so the task is learnable but not linearly separable: a
student MLP's loss falls steadily over the quickstart's few dozen steps instead of collapsing in five.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FEATURES, HIDDEN, CLASSES = 32, 64, 8
TRAIN, VAL = 4000, 1000


def main() -> None:
    rng = np.random.default_rng(20240601)
    w1 = rng.normal(size=(FEATURES, HIDDEN)) / np.sqrt(FEATURES)
    w2 = rng.normal(size=(HIDDEN, CLASSES)) / np.sqrt(HIDDEN)
    x = rng.normal(size=(TRAIN + VAL, FEATURES)).astype(np.float32)
    labels = (np.tanh(x @ w1) @ w2).argmax(axis=1).astype(np.uint8)
    out = Path(__file__).parent / "dataset"
    out.mkdir(exist_ok=True)
    np.save(out / "x_train.npy", x[:TRAIN])
    np.save(out / "y_train.npy", labels[:TRAIN])
    np.save(out / "x_val.npy", x[TRAIN:])
    np.save(out / "y_val.npy", labels[TRAIN:])


if __name__ == "__main__":
    main()
