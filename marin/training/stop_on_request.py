"""Ctrl-C keeps the training done: on a stop request, save a checkpoint at the end of a step, then stop.

The executor interrupts a step by raising an exception in its thread, which lands wherever the step is:
in a training almost always just after Levanter's `train_step` waited for the loss, when the state of the
step before has been given (donated) to the one that ran and the new state's hooks have not run, so
neither state can be saved as a checkpoint a rerun would accept (it resumes only from a checkpoint whose
step has its metrics line, marin.training.metrics). A training therefore honours the executor's stop
request instead (marin.stepkit.stop): the request is checked where one step is complete and the next has
not begun, right after Levanter's `Trainer.train_step` returns. By then every hook of the step has run
and its metrics line is written (Levanter logs the marker that completes the line after its hooks, so a
hook itself would run too early), and its state is still whole. There the training saves that state
through the run's own Levanter checkpointer, as a temporary checkpoint (the one before it, if temporary,
is deleted as Levanter does; a rerun's first checkpoint deletes this one in turn), waits for the commit,
writes out its trackers, and raises `RunnerInterrupted`. A step at which Levanter already saved is not
saved again; step 0 is never saved (Levanter's rule), and a stop requested during the last step lets the
training end as usual.

`train_step` is wrapped on Levanter's `Trainer` class for the duration of the training only (trainings
of a process take turns, marin.training.train). A run over several processes (a gang) does not stop this
way: its hosts would have to agree on the step with a collective at every step; it is interrupted as
before.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta

from marin.stepkit.stop import RunnerInterrupted, stop_honoured, stop_requested

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def checkpoint_and_stop_on_request(checkpointers_before: set) -> Iterator[None]:
    """Around Levanter's training loop: on a stop request, the first step to end is saved and the loop ends
    with RunnerInterrupted. `checkpointers_before`: the Levanter checkpointers that are not this run's."""
    import jax
    from levanter.trainer import Trainer

    if jax.process_count() > 1:
        yield
        return
    original = Trainer.__dict__["train_step"]

    def train_step(self, state, *batch, **batch_kwargs):
        info = original(self, state, *batch, **batch_kwargs)
        if stop_requested() and info.step < self.num_train_steps - 1:
            _save_and_stop(info, checkpointers_before)
        return info

    Trainer.train_step = train_step
    try:
        with stop_honoured():
            yield
    finally:
        Trainer.train_step = original


def _save_and_stop(info, checkpointers_before: set) -> None:
    import levanter.tracker

    from marin.storage import exists
    from marin.training.levanter_process import live_checkpointers

    step, saved = info.step, []
    for checkpointer in live_checkpointers() - checkpointers_before:
        if step > 0:
            # Levanter's own decision with the shortest save interval (zero would read as none): a temporary
            # checkpoint, replacing the previous temporary one, unless this step was already saved
            interval = checkpointer.save_interval
            checkpointer.save_interval = timedelta.resolution
            try:
                checkpointer.on_step(info)
            finally:
                checkpointer.save_interval = interval
        checkpointer.wait_until_finished()
        path = f"{checkpointer.base_path.rstrip('/')}/step-{step}"
        if exists(f"{path}/metadata.json"):
            saved.append(path)
    try:
        levanter.tracker.current_tracker().finish()
    except Exception as exc:
        logger.warning("stopping the training: writing out its trackers failed: %s", exc)
    what = f"saved the checkpoint of step {step} ({', '.join(saved)})" if saved else f"no checkpoint of step {step}"
    logger.warning("stop requested: %s; the training stops there", what)
    raise RunnerInterrupted(f"stopped at step {step} on request")
