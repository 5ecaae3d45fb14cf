"""Train a small MLP on a synthetic 3-class spiral with llgrad.nn and llgrad.optim.

    python examples/train_mlp.py [--steps 300] [--lr 0.01] [--seed 0] [--every 50]

Prints the loss every `--every` steps and the final training accuracy; runs in a few seconds.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import llgrad as lg
from llgrad import nn


def spiral(n_per_class: int = 100, classes: int = 3, seed: int = 0):
    """Points on `classes` interleaved noisy spiral arms; labels are the arm index."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.0, 1.0, n_per_class)
        theta = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ys.append(np.full(n_per_class, c))
    return lg.tensor(np.concatenate(xs).astype(np.float32)), lg.tensor(np.concatenate(ys))


def make_model(hidden: int = 32, classes: int = 3) -> nn.Module:
    return nn.Sequential(
        nn.Linear(2, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    )


def train(steps: int = 300, lr: float = 0.01, seed: int = 0, every: int = 50,
          verbose: bool = True):
    """Full-batch Adam on the spiral; returns (losses, final accuracy)."""
    lg.manual_seed(seed)
    x, y = spiral(seed=seed)
    model = make_model()
    opt = lg.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for step in range(steps):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if verbose and (step % every == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
    model.eval()
    with lg.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    return losses, acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=50)
    args = ap.parse_args()
    t0 = time.perf_counter()
    losses, acc = train(args.steps, args.lr, args.seed, args.every)
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} ({losses[0] / losses[-1]:.1f}x lower); "
          f"train accuracy {acc:.1%}; {time.perf_counter() - t0:.2f}s")


if __name__ == "__main__":
    main()
