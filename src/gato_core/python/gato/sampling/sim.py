"""CPU simulator and rollout engine of the sampling planner (MuJoCo's C ``mujoco.rollout``).

:class:`MjSim` plays the role RoboKit's ``MjWarpSim`` plays for SimMPC, on the CPU: ``nworld``
worlds of one scene (a compiled ``MjModel`` or an ``MjSpec``; a spec lets cost terms add the
sensors they read), stepped one ``mj_step`` per world by :meth:`MjSim.step` (the executing
simulator) or rolled out in C by :class:`RolloutEngine` (the planner's draws).

Threads: the engine runs a fixed pool of ``nthread`` threads, each with its own ``MjData``. Every
rollout starts from a full physics state and an explicit constraint warm start, so a rollout's
result does not depend on which thread ran it: plans are bit-identical for a seed, whatever the
thread count (tested).
"""
from __future__ import annotations

import os
import time
from typing import Optional

import numpy as np

__all__ = ["MjSim", "RolloutEngine", "full_state", "state_layout"]


def _mj():
    import mujoco

    return mujoco


def default_threads() -> int:
    """Threads a planner uses when not told: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _check_nthread(nthread) -> int:
    if nthread is None:
        return default_threads()
    if isinstance(nthread, bool) or not isinstance(nthread, (int, np.integer)) or int(nthread) < 1:
        raise ValueError(f"nthread: expected an integer >= 1, got {nthread!r}")
    return int(nthread)


class MjSim:
    """``nworld`` worlds of one MuJoCo scene on the CPU.

    Args:
        model: a compiled ``mujoco.MjModel`` or a ``mujoco.MjSpec`` (compiled here; kept as
            :attr:`spec` so cost terms can add sensors to the planner's copy).
        nworld: number of worlds (>= 1).
        data: optional ``MjData`` every world starts from (copied) and :meth:`reset` returns to;
            else the model's defaults.
        substeps: physics steps per :meth:`step` (>= 1); ``substep_sensordata`` (substeps, nworld,
            nsensordata) holds the sensordata after each. SimMPC plans one physics step per sim
            step, so it takes simulators with substeps 1 only.
        nthread: rollout threads of a planner built on this simulator (default: the CPUs this
            process may use). Results do not depend on it.

    Attributes: ``mjm`` (the model), ``spec`` (or None), ``nworld``, ``substeps``, ``nthread``,
    ``data`` (list of ``nworld`` ``MjData``, created on first access), ``opt`` (the model's
    options, shared by the worlds), ``stream`` (None: no CUDA stream on the CPU).
    """

    stream = None

    def __init__(self, model, nworld: int = 1, data=None, substeps: int = 1, nthread: Optional[int] = None):
        mj = _mj()
        if isinstance(model, mj.MjSpec):
            self.spec = model
            self.mjm = model.compile()
        elif isinstance(model, mj.MjModel):
            self.spec, self.mjm = None, model
        else:
            raise ValueError(f"model: expected a mujoco.MjModel or mujoco.MjSpec, got {type(model).__name__}")
        if isinstance(nworld, bool) or not isinstance(nworld, (int, np.integer)) or nworld < 1:
            raise ValueError(f"nworld: expected an integer >= 1, got {nworld!r}")
        if data is not None and not isinstance(data, mj.MjData):
            raise ValueError(f"data: expected None or a mujoco.MjData, got {type(data).__name__}")
        if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)) or substeps < 1:
            raise ValueError(f"substeps: expected an integer >= 1, got {substeps!r}")
        self.nworld, self.substeps = int(nworld), int(substeps)
        self.substep_sensordata = np.zeros((self.substeps, self.nworld, self.mjm.nsensordata))
        self.nthread = _check_nthread(nthread)
        self._init = data
        self._data = None

    @property
    def data(self) -> list:
        if self._data is None:
            mj = _mj()
            self._data = []
            for _ in range(self.nworld):
                d = mj.MjData(self.mjm)
                if self._init is not None:
                    copy_state(self.mjm, self._init, d)
                mj.mj_forward(self.mjm, d)
                self._data.append(d)
        return self._data

    @property
    def opt(self):
        """The model's physics options (``sim.opt.iterations = 5`` applies from the next step on)."""
        return self.mjm.opt

    def step(self) -> None:
        """``substeps`` ``mj_step`` in every world (controls: each world's ``data.ctrl``);
        ``substep_sensordata[k]``: every world's sensordata after substep k."""
        mj = _mj()
        for k in range(self.substeps):
            for w, d in enumerate(self.data):
                mj.mj_step(self.mjm, d)
                self.substep_sensordata[k, w] = d.sensordata

    def reset(self, mask) -> None:
        """Return the worlds where ``mask`` (nworld,) bool / int is set to the initial state
        (``data``'s, else the model's defaults), derived quantities recomputed."""
        mj = _mj()
        m = np.asarray(mask.numpy() if hasattr(mask, "numpy") and hasattr(mask, "device") else mask).reshape(-1)
        if m.shape != (self.nworld,):
            raise ValueError(f"mask: expected ({self.nworld},) values, one per world, got shape {m.shape}")
        for w in np.flatnonzero(m):
            d = self.data[w]
            mj.mj_resetData(self.mjm, d)
            if self._init is not None:
                copy_state(self.mjm, self._init, d)
            mj.mj_forward(self.mjm, d)

    def get_sensor(self, name: str) -> np.ndarray:
        """(nworld, dim) readings of the sensor ``name`` (a copy)."""
        mj = _mj()
        i = mj.mj_name2id(self.mjm, mj.mjtObj.mjOBJ_SENSOR, name)
        if i < 0:
            raise ValueError(f"name: {name!r} is not a sensor of the scene")
        a, n = int(self.mjm.sensor_adr[i]), int(self.mjm.sensor_dim[i])
        return np.stack([d.sensordata[a:a + n].copy() for d in self.data])

    def kinematics(self) -> None:
        """``mj_kinematics`` in every world (xpos, xmat, site_xpos, ... from qpos)."""
        mj = _mj()
        for d in self.data:
            mj.mj_kinematics(self.mjm, d)

    def com_pos(self) -> None:
        """``mj_comPos`` in every world (subtree_com, cinert, cdof from the positions)."""
        mj = _mj()
        for d in self.data:
            mj.mj_comPos(self.mjm, d)

    def forward(self) -> None:
        """``mj_forward`` in every world (derived quantities, sensordata of the current state)."""
        mj = _mj()
        for d in self.data:
            mj.mj_forward(self.mjm, d)

    def resized(self, nworld: int) -> "MjSim":
        """A simulator of the same scene and thread count with ``nworld`` worlds."""
        out = MjSim(self.mjm, nworld, self._init, self.substeps, self.nthread)
        out.spec = self.spec
        return out


def copy_state(model, src, dst) -> None:
    """Copy time, qpos, qvel, act, ctrl and the warm start of one MjData into another (same sizes)."""
    dst.time = src.time
    dst.qpos[:] = src.qpos
    dst.qvel[:] = src.qvel
    if model.na:
        dst.act[:] = src.act
    dst.ctrl[:] = src.ctrl
    dst.qacc_warmstart[:] = src.qacc_warmstart


def state_layout(model) -> dict:
    """Offsets of time, qpos, qvel, act in a mjSTATE_FULLPHYSICS vector, and its size."""
    mj = _mj()
    nq, nv = model.nq, model.nv
    return dict(time=0, qpos=1, qvel=1 + nq, act=1 + nq + nv,
                size=mj.mj_stateSize(model, mj.mjtState.mjSTATE_FULLPHYSICS))


def full_state(model, d) -> np.ndarray:
    """(nstate,) mjSTATE_FULLPHYSICS vector of one MjData."""
    mj = _mj()
    s = np.empty(mj.mj_stateSize(model, mj.mjtState.mjSTATE_FULLPHYSICS))
    mj.mj_getState(model, d, s, mj.mjtState.mjSTATE_FULLPHYSICS)
    return s


class RolloutEngine:
    """Open-loop rollouts of one model in C over a pinned thread pool.

    ``run(model, x0 (n, nstate), warm (n, nv), ctrl (n, T, nu))`` returns (state (n, T, nstate),
    sensordata (n, T, nsensordata)) in buffers the next call with the same shape reuses.
    """

    def __init__(self, model, nthread: int):
        from mujoco import rollout as _rollout

        mj = _mj()
        self.nthread = _check_nthread(nthread)
        # nthread 1: run on the calling thread (a pool of one only adds a handoff).
        self._pool = _rollout.Rollout(nthread=0 if self.nthread == 1 else self.nthread)
        self._datas = [mj.MjData(model) for _ in range(self.nthread)]
        self._buffers = {}
        self._models = {}
        self.steps = 0  # simulated steps run so far (throughput accounting)
        self.rollout_s = 0.0  # wall time spent inside mujoco.rollout so far [s]

    def _out(self, model, n, T):
        key = (id(model), n, T)
        buf = self._buffers.get(key)
        if buf is None:
            buf = (np.empty((n, T, state_layout(model)["size"])), np.empty((n, T, model.nsensordata)))
            self._buffers[key] = buf
        return buf

    def run(self, model, x0: np.ndarray, warm: np.ndarray, ctrl: np.ndarray):
        n, T = ctrl.shape[:2]
        state, sens = self._out(model, n, T)
        models = self._models.get((id(model), n))
        if models is None:
            models = [model] * n
            self._models[(id(model), n)] = models
        # Contiguous float64 inputs let the C side skip its checks and copies.
        x0 = np.ascontiguousarray(x0, dtype=np.float64)
        warm = np.ascontiguousarray(warm, dtype=np.float64)
        ctrl = np.ascontiguousarray(ctrl, dtype=np.float64)
        chunk = max(1, n // (self.nthread * 10))  # small chunks balance uneven rollouts (contacts)
        tic = time.perf_counter()
        self._pool.rollout(models, self._datas, x0, ctrl, skip_checks=True, nstep=T,
                           control_spec=_mj().mjtState.mjSTATE_CTRL.value, initial_warmstart=warm,
                           state=state, sensordata=sens, chunk_size=chunk)
        self.rollout_s += time.perf_counter() - tic
        self.steps += n * T
        return state, sens

    def close(self):
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def as_states(model, data, batch_size: int, scratch) -> tuple:
    """(x0 (B, nstate), warm (B, nv)) of ``data``: an MjData (B = 1), a sequence of B MjData, an
    :class:`MjSim` with B worlds, or a mapping with (B, ...) arrays qpos, qvel and optional time,
    act, qacc_warmstart. ValueError names what does not fit."""
    mj = _mj()
    if isinstance(data, MjSim):
        data = data.data
    if isinstance(data, mj.MjData):
        data = [data]
    rows = []
    if isinstance(data, (list, tuple)):
        if len(data) != batch_size or not all(isinstance(d, mj.MjData) for d in data):
            raise ValueError(f"data: expected {batch_size} mujoco.MjData (one per instance), got {len(data)} items")
        for d in data:
            if d.qpos.shape[0] != model.nq or d.qvel.shape[0] != model.nv:
                raise ValueError(f"data: state sizes (nq {d.qpos.shape[0]}, nv {d.qvel.shape[0]}) differ from the "
                                 f"planning model's ({model.nq}, {model.nv})")
            copy_state(model, d, scratch)
            rows.append((full_state(model, scratch), np.array(d.qacc_warmstart)))
    else:
        try:
            qpos = np.asarray(data["qpos"], dtype=np.float64).reshape(batch_size, model.nq)
            qvel = np.asarray(data["qvel"], dtype=np.float64).reshape(batch_size, model.nv)
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"data: expected MjData, a list of them, an MjSim or a mapping with qpos "
                             f"({batch_size}, {model.nq}) and qvel ({batch_size}, {model.nv})") from None
        t = np.asarray(data.get("time", np.zeros(batch_size)), dtype=np.float64).reshape(batch_size)
        act = data.get("act")
        warm = data.get("qacc_warmstart")
        for b in range(batch_size):
            mj.mj_resetData(model, scratch)
            scratch.time, scratch.qpos[:], scratch.qvel[:] = t[b], qpos[b], qvel[b]
            if act is not None and model.na:
                scratch.act[:] = np.asarray(act, dtype=np.float64).reshape(batch_size, model.na)[b]
            w = np.zeros(model.nv) if warm is None else np.asarray(warm, dtype=np.float64).reshape(
                batch_size, model.nv)[b]
            rows.append((full_state(model, scratch), w))
    x0 = np.stack([r[0] for r in rows])
    if not np.all(np.isfinite(x0)):
        raise ValueError("data: the state contains NaN or Inf")
    return x0, np.stack([r[1] for r in rows])

