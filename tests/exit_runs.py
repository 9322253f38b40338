"""A short process shaped like a training at its end: Levanter data loaders still prefetching, a jitted
train step run, a result written, then exit. The repeated-run test (tests/test_clean_exit.py) runs it many
times and wants exit code 0 every time.

python -m tests.exit_runs OUT_FILE [--loaders K] [--stress T] [--without-hook]

`--loaders K` leaves K loaders alive and busy at exit (a training leaves one or two: its train and
evaluation loaders); `--stress T` adds T Levanter background iterators whose producers do nothing but make
and drop jax arrays (into unbounded queues, so they never wait), so that at exit some thread is almost always inside an array's destructor (which
lets go of the GIL), the state that aborts a finalising interpreter; `--without-hook` skips
`prepare_levanter_process()`, so nothing stops those threads before the interpreter finalises (what every
process did before marin stopped them at exit).
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--loaders", type=int, default=2)
    parser.add_argument("--stress", type=int, default=0)
    parser.add_argument("--without-hook", action="store_true")
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh
    from levanter.data import DataLoader
    from levanter.data.dataset import ListAsyncDataset
    from levanter.utils.background_iterable import BackgroundIterator

    if not args.without_hook:
        from marin.training.levanter_process import prepare_levanter_process

        prepare_levanter_process()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rows = [np.arange(i, i + 64, dtype=np.int32) % 97 for i in range(4096)]
    iterators = []
    for _ in range(args.loaders):
        loader = DataLoader(ListAsyncDataset(rows, is_complete=True), 4, mesh=mesh, axis_resources={"batch": "data"})
        iterators.append(iter(loader))

    @jax.jit
    def train_step(w, batch):
        x = jax.nn.one_hot(batch, 97).mean(axis=1)
        grad = jax.grad(lambda w: jnp.mean((x @ w) ** 2))(w)
        return w - 0.1 * grad, jnp.sqrt(jnp.sum(grad**2))

    w = jnp.ones((97, 8))
    for _ in range(3):
        for iterator in iterators:
            w, norm = train_step(w, next(iterator))

    def churn():
        while True:
            for _ in range(20):
                jnp.zeros((8,)) + 1
            yield 0

    stressors = [BackgroundIterator(churn, max_capacity=None) for _ in range(args.stress)]
    for stressor in stressors:
        next(stressor)
    with open(args.out, "w") as f:
        f.write(f"{float(norm):.6f}\n")


if __name__ == "__main__":
    main()
