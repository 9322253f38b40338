"""A ladder asks the data for what its rungs need when it is defined, before anything trains.

An isoFLOP ladder over the plays whose smallest models at its larger budgets need more sequences than the
training split holds (an earlier tutorial ladder: widths 16, 32, 64 at 2e11, 5e11 and 1.2e12 FLOPs, on the
1024-token BPE):
they get the passes they need as `epochs` (versioned), and a rung that would need more than `max_epochs`
is an error naming it. These build steps only; nothing runs.
"""

from __future__ import annotations

import json

import pytest

TRAIN_TOKENS = 1_892_256
"""The plays' training split with the tutorial's 1024-token BPE."""


def build(train_tokens: int = TRAIN_TOKENS):
    from experiments.defaults_evaluation import isoflop_ladder

    ladder = isoflop_ladder(
        "tiny-shakespeare-isoflop",
        "/data/tok",
        budgets=[2e11, 5e11, 1.2e12],
        widths=[16, 32, 64],
        vocab_size=1024,
        train_tokens=train_tokens,
    )
    return None, ladder


def test_an_isoflop_ladder_gives_the_rungs_that_need_a_second_pass_their_epochs():
    _, ladder = build()
    sequences = TRAIN_TOKENS // 128
    for trained in ladder.trains:
        needed = trained.config.num_train_steps * trained.config.train_batch_size
        passes = max(trained.config.epochs, 1)
        assert sequences * passes >= needed > sequences * (passes - 1), trained.name
    assert {t.name.split("/", 2)[2]: t.config.epochs for t in ladder.trains if t.config.epochs} == {
        "C5e11/d16-l2": 2,
        "C1.2e12/d16-l2": 3,
        "C1.2e12/d32-l2": 2,
    }


def test_epochs_enter_the_hash_only_where_a_rung_needs_them():
    from marin.execution import Executor

    _, known = build()
    _, unknown = build(train_tokens=10**12)
    plan = Executor("/nonexistent-prefix").plan
    a, b = plan(known.trains), plan(unknown.trains)
    same = [t.name for t, u in zip(known.trains, unknown.trains, strict=True) if a[t] == b[u]]
    assert len(same) == 6 and all(t.config.epochs == 0 for t in known.trains if t.name in same)


def test_a_rung_needing_more_than_max_epochs_is_an_error_naming_it_when_the_ladder_is_defined():
    from experiments.defaults_evaluation import isoflop_ladder

    with pytest.raises(ValueError, match=r"iso/C1\.2e\+?12/d16-l2: 2380 steps of 16 sequences .* max_epochs=2"):
        isoflop_ladder(
            "iso",
            "/data/tok",
            budgets=[2e11, 1.2e12],
            widths=[16, 32, 64],
            vocab_size=1024,
            train_tokens=TRAIN_TOKENS,
            max_epochs=2,
        )


def test_train_tokens_of_reads_the_tokenize_steps_stats(tmp_path):
    from experiments.defaults_training import train_tokens_of

    assert train_tokens_of(str(tmp_path)) is None
    (tmp_path / "stats.json").write_text(json.dumps({"train": {"tokens": 1234}, "validation": {"tokens": 5}}))
    assert train_tokens_of(str(tmp_path)) == 1234
