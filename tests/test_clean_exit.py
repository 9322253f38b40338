"""A process that used Levanter's data loaders exits cleanly: their prefetch threads end before finalisation.

The loaders' daemon threads free jax arrays; one still running while the interpreter finalises aborts the
process (SIGABRT) after a step has written SUCCESS (marin.training.levanter_process).
"""

from __future__ import annotations

import itertools

from marin.training.levanter_process import prepare_levanter_process, stop_background_iterators


def test_background_iterators_are_stopped_and_joined():
    from levanter.utils.background_iterable import BackgroundIterator

    prepare_levanter_process()
    iterator = BackgroundIterator(lambda: itertools.count(), max_capacity=2)
    assert next(iterator) == 0 and iterator.thread.is_alive()
    stop_background_iterators(timeout_s=10)
    assert not iterator.thread.is_alive()
