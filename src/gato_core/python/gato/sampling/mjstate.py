"""Copying one MuJoCo MjData's state into another: shared by the simulator (gato.sampling.sim)
and the entities built on it (gato.sampling.entities), which must not import each other."""
from __future__ import annotations

__all__ = ["copy_state"]


def copy_state(model, src, dst) -> None:
    """Copy time, qpos, qvel, act, ctrl and the warm start of one MjData into another (same sizes)."""
    dst.time = src.time
    dst.qpos[:] = src.qpos
    dst.qvel[:] = src.qvel
    if model.na:
        dst.act[:] = src.act
    dst.ctrl[:] = src.ctrl
    dst.qacc_warmstart[:] = src.qacc_warmstart
