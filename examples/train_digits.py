"""Train an MLP on scikit-learn's bundled digits data set (1,797 8x8 images of the digits
0-9, read from the installed package: no download), report test accuracy and time per
epoch, save the trained weights with tg.save and check that the reloaded model scores the
same.

    ci/demo                                   # sets everything up and runs this
    .venv/bin/python examples/train_digits.py --epochs 20
"""

import argparse
import os
import tempfile
import time

import numpy as np
import tapegrad as tg
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tqdm import tqdm


def build_model(hidden=128, dropout=0.1):
    return tg.nn.Sequential(
        tg.nn.Linear(64, hidden, dtype=np.float32), tg.nn.ReLU(), tg.nn.Dropout(dropout),
        tg.nn.Linear(hidden, hidden, dtype=np.float32), tg.nn.ReLU(),
        tg.nn.Linear(hidden, 10, dtype=np.float32),
    )


def accuracy(model, x, y):
    model.eval()
    with tg.no_grad():
        predicted = model(tg.tensor(x)).numpy().argmax(axis=1)
    model.train()
    return float((predicted == y).mean())


def main(epochs=25, batch_size=32, lr=2e-3, seed=0, weights=None, progress=True):
    tg.manual_seed(seed)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)          # pixel values 0..16 -> 0..1
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    print(f"digits: {len(x_train)} training and {len(x_test)} test images, 64 pixels, 10 classes")

    model = build_model()
    optimizer = tg.optim.Adam(model.parameters(), lr=lr)
    loader = tg.data.DataLoader(x_train, y_train, batch_size=batch_size, shuffle=True, seed=seed)

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        total = 0.0
        for xb, yb in tqdm(loader, desc=f"epoch {epoch:2d}/{epochs}", leave=False,
                           disable=not progress):
            loss = tg.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(yb)
        seconds = time.perf_counter() - t0
        acc = accuracy(model, x_test, y_test)
        print(f"epoch {epoch:2d}  train loss {total / len(x_train):.4f}  "
              f"test accuracy {acc:.4f}  {seconds:.2f} s/epoch")
    print(f"trained in {time.perf_counter() - start:.1f} s")

    weights = weights or os.path.join(tempfile.mkdtemp(), "digits_mlp.npz")
    tg.save(model.state_dict(), weights)
    reloaded = build_model()
    reloaded.load_state_dict(tg.load(weights))
    reloaded_acc = accuracy(reloaded, x_test, y_test)
    print(f"saved to {weights}; reloaded model test accuracy {reloaded_acc:.4f}")
    if reloaded_acc != acc:
        raise SystemExit(f"the reloaded model scores {reloaded_acc}, not {acc}")
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights", help="where to save the trained weights (.npz)")
    args = parser.parse_args()
    main(args.epochs, args.batch_size, args.lr, args.seed, args.weights)
