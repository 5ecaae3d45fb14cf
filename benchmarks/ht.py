"""GradBench's hand tracking (`ht`, from ADBench; issue 14): the Jacobian of the residuals of a
skinned hand model (22 bones, Euler-angle joint rotations, linear blend skinning of the
vertices, an angle-axis global rotation) at 100 or 800 observed points with respect to the
26 pose parameters, "simple" variant (no `us`).

Our numpy version of GradBench's reference (python/gradbench/tools/pytorch/ht_objective.py,
itself ADBench's), written as a numpy user would: the bones' rotations batched, the parent
chain a Python loop over the static parents, the global rotation's small-angle case a
traced `if`. The model is generated deterministically with GradBench's sizes and bone tree
(`small`: its small model, 544 vertices, 100 points as in hand1; `gradbench`: its big model,
10,000 vertices, 800 points as in hand5), so no data file is needed.

    python -m benchmarks.ht [--quick]

Rows: `llgrad.jacobian` (one batched forward sweep, 26 basis vectors), `jacrev` (one batched
reverse sweep over the 3 x points cotangents; small size only: at 800 points its batched
cotangents would take ~17 GB, JAX's likewise), the per-row loop (one compiled reverse sweep
per output row from Python, what `llgrad.jacobian` did before; emulated with a Differentiable)
and JAX's jacfwd/jacrev when importable. Every Jacobian is checked against central finite
differences before timing.
"""
from __future__ import annotations

import argparse

from benchmarks._threads import set_threads

set_threads(1)

import numpy as np  # noqa: E402

import llgrad  # noqa: E402
from benchmarks._interleave import table, timed  # noqa: E402

# GradBench's bone tree (evals/ht/data/model/bones.txt): wrist, 5 x 4 finger bones, forearm
PARENTS = [-1, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11, 0, 13, 14, 15, 0, 17, 18, 19, 0]
SIZES = {"small": (544, 100), "gradbench": (10000, 800)}


def _pose_index(nbones: int) -> np.ndarray:
    """Where each of the 26 parameters goes in the flattened (nbones + 3, 3) pose
    (GradBench's to_pose_params: global rotation, translation, then two angles for each
    finger's first bone and one for the next two)."""
    idx = [0, 1, 2, 6, 7, 8]
    row = 5
    for _ in range(5):
        for i in (1, 2, 3):
            idx.append(3 * row)
            if i == 1:
                idx.append(3 * row + 1)
            row += 1
        row += 1
    assert len(idx) == 26 and row <= nbones + 3
    return np.array(idx)


def make_model(nverts: int, npts: int, seed: int = 0) -> dict:
    """A deterministic hand model of GradBench's shape and a pose near which the points lie."""
    rng = np.random.default_rng(seed)
    nb = len(PARENTS)

    def rigid():
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = q * np.sign(np.linalg.det(q)), rng.normal(scale=0.05, size=3)
        return m
    relatives = np.stack([rigid() for _ in range(nb)])
    absolutes = []
    for i, p in enumerate(PARENTS):
        absolutes.append(relatives[i] if p < 0 else absolutes[p] @ relatives[i])
    weights = np.zeros((nverts, nb))
    for v in range(nverts):  # up to four bones per vertex, as GradBench's vertices.txt
        bones = rng.choice(nb, size=rng.integers(1, 5), replace=False)
        w = rng.uniform(0.1, 1.0, size=len(bones))
        weights[v, bones] = w / w.sum()
    positions = np.ones((nverts, 4))
    positions[:, :3] = rng.normal(scale=0.05, size=(nverts, 3))
    return {"base_relatives": relatives,
            "inverse_base_absolutes": np.linalg.inv(np.stack(absolutes)),
            "base_positions": positions, "weights": weights,
            "correspondences": rng.integers(0, nverts, size=npts),
            "points": rng.normal(scale=0.1, size=(npts, 3)),
            "theta": rng.normal(scale=0.3, size=26)}


def make_objective(model: dict):
    """theta (26,) -> the residuals (3 * points,), with the model's arrays as constants."""
    nb = len(PARENTS)
    pose_index = _pose_index(nb)
    base_rel, inv_abs = model["base_relatives"], model["inverse_base_absolutes"]
    base_pos, weights_t = model["base_positions"], model["weights"].T.copy()
    points, corr = model["points"], model["correspondences"]

    def rotations(xzy):
        """The bones' Euler-angle rotations Rz @ Ry @ Rx, (nb, 3, 3)."""
        cx, sx = np.cos(xzy[:, 0]), np.sin(xzy[:, 0])
        cz, sz = np.cos(xzy[:, 1]), np.sin(xzy[:, 1])
        cy, sy = np.cos(xzy[:, 2]), np.sin(xzy[:, 2])
        one, zero = np.ones_like(cx), np.zeros_like(cx)
        rx = np.stack([one, zero, zero, zero, cx, -sx, zero, sx, cx], axis=1)
        ry = np.stack([cy, zero, -sy, zero, one, zero, sy, zero, cy], axis=1)
        rz = np.stack([cz, -sz, zero, sz, cz, zero, zero, zero, one], axis=1)
        return np.reshape(rz, (-1, 3, 3)) @ np.reshape(ry, (-1, 3, 3)) @ np.reshape(rx, (-1, 3, 3))

    def angle_axis(aa):
        n = np.sqrt(np.sum(aa ** 2))
        if n < 0.0001:
            r = np.eye(3)
        else:
            x, y, z = aa[0] / n, aa[1] / n, aa[2] / n
            s, c = np.sin(n), np.cos(n)
            r = np.array([[x * x + (1 - x * x) * c, x * y * (1 - c) - z * s,
                           x * z * (1 - c) + y * s],
                          [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c,
                           y * z * (1 - c) - x * s],
                          [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s,
                           z * z + (1 - z * z) * c]])
        return r

    def ht_objective(theta):
        pose = np.zeros(3 * (nb + 3))
        pose[pose_index] = theta
        pose[3:6] = 1.0
        pose = np.reshape(pose, (nb + 3, 3))
        rel = np.concatenate([base_rel[:, :, :3] @ rotations(pose[3:]), base_rel[:, :, 3:]],
                             axis=2)
        absolutes = []
        for i, p in enumerate(PARENTS):
            absolutes.append(rel[i] if p < 0 else absolutes[p] @ rel[i])
        transforms = np.stack(absolutes) @ inv_abs
        moved = np.reshape(np.reshape(transforms, (nb * 4, 4)) @ base_pos.T, (nb, 4, -1))
        skinned = np.sum(moved * weights_t[:, None, :], axis=0)[:3]  # (3, vertices)
        r = angle_axis(pose[0]) * pose[1]
        vertices = (r @ skinned).T + pose[2]
        return np.reshape(points - vertices[corr], (-1,))
    return ht_objective


def _fd_jacobian(f, x, eps=1e-6):
    return np.stack([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(len(x))],
                    axis=1)


def _jax_rows(model, theta, rev: bool):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    nb = len(PARENTS)
    idx = jnp.asarray(_pose_index(nb))
    m = {k: jnp.asarray(v) for k, v in model.items()}

    def f(theta):
        pose = jnp.zeros(3 * (nb + 3)).at[idx].set(theta).at[3:6].set(1.0).reshape(nb + 3, 3)
        xzy = pose[3:]
        cx, sx, cz, sz = jnp.cos(xzy[:, 0]), jnp.sin(xzy[:, 0]), jnp.cos(xzy[:, 1]), \
            jnp.sin(xzy[:, 1])
        cy, sy = jnp.cos(xzy[:, 2]), jnp.sin(xzy[:, 2])
        one, zero = jnp.ones_like(cx), jnp.zeros_like(cx)
        mk = lambda *c: jnp.stack(c, axis=1).reshape(-1, 3, 3)  # noqa: E731
        rot = mk(cz, -sz, zero, sz, cz, zero, zero, zero, one) @ \
            mk(cy, zero, -sy, zero, one, zero, sy, zero, cy) @ \
            mk(one, zero, zero, zero, cx, -sx, zero, sx, cx)
        base_rel = m["base_relatives"]
        rel = jnp.concatenate([base_rel[:, :, :3] @ rot, base_rel[:, :, 3:]], axis=2)
        absolutes = []
        for i, p in enumerate(PARENTS):
            absolutes.append(rel[i] if p < 0 else absolutes[p] @ rel[i])
        transforms = jnp.stack(absolutes) @ m["inverse_base_absolutes"]
        moved = (transforms.reshape(nb * 4, 4) @ m["base_positions"].T).reshape(nb, 4, -1)
        skinned = jnp.sum(moved * m["weights"].T[:, None, :], axis=0)[:3]
        aa = pose[0]
        n = jnp.sqrt(jnp.sum(aa ** 2))  # theta is away from the small-angle case
        x, y, z = aa / n
        s, c = jnp.sin(n), jnp.cos(n)
        r = jnp.array([[x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
                       [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s],
                       [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c]])
        vertices = ((r * pose[1]) @ skinned).T + pose[2]
        return (m["points"] - vertices[m["correspondences"]]).reshape(-1)
    jf, jr = jax.jit(jax.jacfwd(f)), jax.jit(jax.jacrev(f))
    rows = {"jax jacfwd": lambda: np.asarray(jf(theta).block_until_ready())}
    if rev:
        rows["jax jacrev"] = lambda: np.asarray(jr(theta).block_until_ready())
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default="small,gradbench")
    args = ap.parse_args()
    samples = 3 if args.quick else 11
    for size in args.sizes.split(","):
        model = make_model(*SIZES[size])
        f, theta = make_objective(model), model["theta"]
        fd = _fd_jacobian(f, theta)
        jac, rev = llgrad.jacobian(f), llgrad.jacrev(f)
        per_row = llgrad.jacobian(llgrad.Differentiable(f))

        def check(name, out):
            assert np.allclose(out, fd, rtol=1e-6, atol=1e-7), name
        rows = {"llgrad jacobian (jacfwd: 26 inputs)": lambda: jac(theta)}
        if size == "small":  # reverse mode over 3 x 800 cotangents at once: ~17 GB
            rows["llgrad jacrev"] = lambda: rev(theta)
        rows.update(_jax_rows(model, theta, rev=size == "small"))
        nv, npts = SIZES[size]
        title = f"ht {size}: {nv} vertices, J {3 * npts} x 26"
        res = timed(rows, samples, check=check)
        # the per-row loop takes 3 x points native sweeps: timed apart, fewer samples
        res.update(timed({"per-row loop (jacobian before)": lambda: per_row(theta)},
                         1 if size == "gradbench" else samples, reps=1, check=check))
        print(table(title, res))
        base = res["per-row loop (jacobian before)"][3]
        print(f"{'  per-row loop / llgrad jacobian (cpu)':44s} {base / res[next(iter(rows))][3]:9.1f}x")


if __name__ == "__main__":
    main()
