"""End to end: small PyTorch-style training scripts (a CNN on synthetic 28x28 images, an LSTM
sequence classifier, an embedding classifier) written against llgrad exactly as for torch,
trained for 100 steps: the loss falls, and with fixed seeds every number repeats exactly
from run to run."""
from __future__ import annotations

import numpy as np

import llgrad as torch  # the scripts below are PyTorch scripts
from llgrad import nn
from llgrad.utils.data import DataLoader, TensorDataset


def _bars(n, rng):
    """28x28 images with a horizontal (class 0) or vertical (class 1) bar, plus noise."""
    x = rng.standard_normal((n, 1, 28, 28)).astype(np.float32) * 0.3
    y = rng.integers(0, 2, n)
    pos = rng.integers(4, 24, n)
    for i in range(n):
        if y[i]:
            x[i, 0, :, pos[i]:pos[i] + 2] += 1.0
        else:
            x[i, 0, pos[i]:pos[i] + 2, :] += 1.0
    return torch.tensor(x), torch.tensor(y)


def train_cnn(seed):
    torch.manual_seed(seed)
    x, y = _bars(64, np.random.default_rng(seed))
    model = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    losses = []
    while len(losses) < 100:
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    return losses[:100], acc


def train_lstm(seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.standard_normal((48, 12, 3)).astype(np.float32))
    y = torch.tensor((x.numpy()[:, :, 0].sum(1) > 0).astype(np.int64))

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 16, batch_first=True)
            self.head = nn.Linear(16, 2)

        def forward(self, seq):
            _, (h, _) = self.lstm(seq)
            return self.head(h[-1])
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for step in range(100):
        idx = torch.tensor(np.arange(step * 16, step * 16 + 16) % 48)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def train_embedding(seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tokens = torch.tensor(rng.integers(1, 20, (64, 6)))
    labels = torch.tensor((tokens.numpy() < 10).sum(1) >= 3).long()
    emb, head = nn.Embedding(20, 8, padding_idx=0), nn.Linear(8, 2)
    opt = torch.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.5,
                          momentum=0.9)
    losses = []
    for _ in range(100):
        loss = nn.functional.cross_entropy(head(emb(tokens).mean(1)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert not emb.weight.detach().numpy()[0].any()  # the padding row stays zero
    return losses


def test_cnn_trains_and_repeats_exactly():
    losses, acc = train_cnn(0)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10]) and acc > 0.9
    assert train_cnn(0) == (losses, acc)


def test_lstm_classifier_trains_and_repeats_exactly():
    losses = train_lstm(1)
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert train_lstm(1) == losses


def test_embedding_classifier_trains_and_repeats_exactly():
    losses = train_embedding(2)
    assert losses[-1] < 0.5 * losses[0]
    assert train_embedding(2) == losses


def test_seeded_scripts_repeat_exactly_in_a_new_process():
    # run to run, not only call to call: a fresh interpreter with another hash seed (set and
    # dict orders of strings change) trains the CNN and the LSTM to the same numbers
    import json
    import os
    import subprocess
    import sys
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_train_nn as t; "
            "print(json.dumps([t.train_cnn(0), t.train_lstm(1)]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    r = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (cnn_losses, cnn_acc), lstm_losses = json.loads(r.stdout)
    assert (cnn_losses, cnn_acc) == train_cnn(0)
    assert lstm_losses == train_lstm(1)
