"""The device layout of a train step: marin's `MeshConfig` as Levanter's trainer fields, checked on the devices.

Levanter lays a run over a mesh of three axes, `replica × data × model`: the batch is split over
replica × data, parameters and optimizer state are sharded over `data` along the FSDP axes and over
`model` along the tensor-parallel axes, and `data` takes whatever devices the other two leave. Levanter
learns the device count only when it starts (after `jax.distributed` is initialised, for a gang of
hosts), and a layout that does not fit then fails deep inside it (an `assert`, or XLA refusing a
sharding). So the layout is checked at the same moment Levanter checks its own, inside its
`_validate_and_set_defaults`, and fails with the marin field to change: `train.mesh.model_axis_size`,
`train.train_batch_size`, `train.per_device_parallelism`, `train.mesh.fsdp_axes`.

Nothing here imports Levanter or jax at import time.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from marin.training.config import MeshConfig, TrainConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The mesh a run gets on a given number of devices and slices."""

    replica: int
    """Replicas (within and across slices)."""
    data: int
    """Devices of the FSDP axis (within and across slices)."""
    model: int
    """Devices of the tensor-parallel axis."""

    @property
    def batch_split(self) -> int:
        """Over how many groups of devices each batch is split (replica × data)."""
        return self.replica * self.data

    def describe(self) -> str:
        return f"{self.replica * self.data * self.model} devices = replica {self.replica} × data {self.data} × model {self.model}"


def trainer_fields(mesh: MeshConfig) -> dict:
    """The `TrainerConfig` fields that carry `mesh`."""
    fsdp = list(mesh.fsdp_axes)
    return dict(
        model_axis_size=mesh.model_axis_size,
        tensor_parallel_axes=list(mesh.tp_axes) or None,
        replica_ici_axis_size=mesh.replica_axis_size,
        replica_dcn_axis_size=mesh.replica_slices,
        fsdp_axis=fsdp[0] if len(fsdp) == 1 else (fsdp or None),
    )


def layout_for(config: TrainConfig, devices: int, slices: int = 1) -> Layout:
    """The layout of `config` on `devices` devices in `slices` slices; a ValueError naming the field when
    it does not divide the devices, the batch, or an axis it shards."""
    mesh = config.mesh
    if devices % slices:
        raise ValueError(f"{devices} devices do not split into {slices} slices of equal size")
    per_slice = devices // slices
    if slices % mesh.replica_slices:
        raise ValueError(f"train.mesh.replica_slices={mesh.replica_slices} does not divide the {slices} slice(s)")
    within = mesh.replica_axis_size * mesh.model_axis_size
    if per_slice % within:
        which = "model_axis_size" if per_slice % mesh.model_axis_size else "replica_axis_size"
        raise ValueError(
            f"train.mesh.{which}: replica_axis_size={mesh.replica_axis_size} × model_axis_size="
            f"{mesh.model_axis_size} = {within} does not divide the {per_slice} devices of a slice "
            f"({devices} devices in all)"
        )
    layout = Layout(
        replica=mesh.replica_axis_size * mesh.replica_slices,
        data=(per_slice // within) * (slices // mesh.replica_slices),
        model=mesh.model_axis_size,
    )
    where = f"the {layout.batch_split}-way data split of {layout.describe()}"
    if config.per_device_parallelism == -1:
        if config.train_batch_size % layout.batch_split:
            raise ValueError(
                f"train.train_batch_size={config.train_batch_size} is not divisible by {where}: "
                f"use a multiple of {layout.batch_split} (or change train.mesh)"
            )
    elif config.train_batch_size % (config.per_device_parallelism * layout.batch_split):
        raise ValueError(
            f"train.train_batch_size={config.train_batch_size} is not divisible by train.per_device_parallelism="
            f"{config.per_device_parallelism} × {where} = {config.per_device_parallelism * layout.batch_split}"
        )
    sizes = config.model.axis_sizes()  # Levanter pads `vocab` to fit the mesh itself
    for axis in mesh.fsdp_axes:
        if axis in sizes and sizes[axis] % layout.data:
            raise ValueError(
                f"train.mesh.fsdp_axes shards the model's {axis!r} axis ({sizes[axis]}) over the data axis of "
                f"{layout.describe()}, which does not divide it: change train.mesh or the model"
            )
    for axis in mesh.tp_axes:
        if axis in sizes and sizes[axis] % layout.model:
            raise ValueError(
                f"train.mesh.model_axis_size={layout.model} does not divide the model's {axis!r} axis ({sizes[axis]})"
            )
    return layout


def checked_trainer_config(config: TrainConfig, **fields):
    """Levanter's `TrainerConfig` with `fields` and the mesh of `config`, which checks the layout against
    the devices when Levanter validates its own settings (after `jax.distributed` is initialised)."""
    trainer = _checked_class()(**fields, **trainer_fields(config.mesh))
    trainer.marin_config = config
    return trainer


@functools.cache
def _checked_class():
    from levanter.trainer import TrainerConfig

    class MeshCheckedTrainerConfig(TrainerConfig):
        """Levanter's TrainerConfig, whose validation first checks marin's layout on the devices."""

        def _validate_and_set_defaults(self):
            config = getattr(self, "marin_config", None)
            if config is not None:
                import jax

                logger.info("mesh: %s", layout_for(config, jax.device_count(), self.num_slices).describe())
            super()._validate_and_set_defaults()

    return MeshCheckedTrainerConfig
