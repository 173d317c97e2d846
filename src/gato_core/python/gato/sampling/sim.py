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

import copy
import os
import time
from typing import Optional

import numpy as np

from .mjstate import copy_state

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


# Fields whose randomisation changes constants mj_setConst derives (subtree masses, invweights, ...).
_CONST_FIELDS = ("body_mass", "body_inertia", "body_ipos", "body_iquat")
# Per-world state a world keeps when set_scene gives it another scene's model rows.
_LAYOUT = ("nq", "nv", "nu", "na", "nsensordata")


# Fields whose rows the compiler folded into "same frame" / "simple body" shortcuts: a world whose
# rows of them change gives the shortcut up (flags cleared), so the new values take effect.
_SAMEFRAME = {"geom_pos": ("geom_sameframe",), "geom_quat": ("geom_sameframe",),
              "site_pos": ("site_sameframe",), "site_quat": ("site_sameframe",),
              "body_ipos": ("body_sameframe", "body_simple", "dof_simplenum"),
              "body_iquat": ("body_sameframe", "body_simple", "dof_simplenum"),
              "body_inertia": ("body_simple", "dof_simplenum")}


def _drop_shortcuts(model, field: str) -> None:
    for flag in _SAMEFRAME.get(field, ()):
        getattr(model, flag)[:] = 0


def _is_mask_array(x) -> np.ndarray:
    return np.asarray(x.numpy() if hasattr(x, "numpy") and hasattr(x, "device") else x)


class _FieldRows:
    """``sim.model.<field>``: the field's rows of every world, (nworld, *field shape).

    ``numpy()`` returns a copy; ``assign(values)`` writes (nworld, *field shape) values back into
    every world's model (as a Warp array's ``assign``)."""

    def __init__(self, sim: "MjSim", name: str):
        self._sim, self._name = sim, name

    def numpy(self) -> np.ndarray:
        return np.stack([np.array(getattr(m, self._name)) for m in self._sim.models])

    @property
    def shape(self) -> tuple:
        return (self._sim.nworld,) + np.shape(getattr(self._sim.mjm, self._name))

    def assign(self, values) -> None:
        v = np.asarray(values, dtype=np.float64)
        rows = [getattr(m, self._name) for m in self._sim.models]
        if v.shape != (self._sim.nworld,) + np.shape(rows[0]):
            raise ValueError(f"values: expected shape {(self._sim.nworld,) + np.shape(rows[0])} for model."
                             f"{self._name}, got {v.shape}")
        for m, row, val in zip(self._sim.models, rows, v):
            row[...] = val
            _drop_shortcuts(m, self._name)


class _ModelRows:
    """``sim.model``: MuJoCo model fields with a leading world axis (one row per world)."""

    def __init__(self, sim: "MjSim"):
        self._sim = sim

    def __getattr__(self, name: str) -> _FieldRows:
        self._sim._check_field(name, "name")
        return _FieldRows(self._sim, name)


class MjSim:
    """``nworld`` worlds of one MuJoCo scene, or ``nworld[i]`` worlds of each scene ``model[i]``, on the CPU.

    Args:
        model: a compiled ``mujoco.MjModel`` or a ``mujoco.MjSpec`` (compiled here; kept as
            :attr:`spec` so cost terms can add sensors to the planner's copy), or a sequence of
            them: several scenes with the same state layout (nq, nv, nu, na, nsensordata) that may
            differ in geoms, meshes, inertias, sites, pairs (:attr:`mjm` / :attr:`spec`: the first).
        nworld: number of worlds (>= 1), or with several scenes one count per scene (>= 0, not all
            0; a scene with no worlds can still be given to worlds by :meth:`set_scene`); worlds are
            ordered scene by scene.
        data: optional ``MjData`` every world starts from (its state copied) and :meth:`reset`
            returns to; else each scene's defaults.
        substeps: physics steps per :meth:`step` (>= 1); ``substep_sensordata`` (substeps, nworld,
            nsensordata) holds the sensordata after each. SimMPC plans one physics step per sim
            step, so it takes simulators with substeps 1 only.
        nthread: rollout threads of a planner built on this simulator (default: the CPUs this
            process may use). Results do not depend on it.

    Attributes: ``mjm`` (the first scene's model), ``spec`` (or None), ``scenes`` (the compiled
    scene models), ``scene`` ((nworld,) scene index per world), ``nworld``, ``substeps``,
    ``nthread``, ``data`` (list of ``nworld`` ``MjData``, created on first access), ``models``
    (each world's ``MjModel``: its own copy once :attr:`model` rows, :meth:`set_random` or
    :meth:`set_scene` touched them), ``model`` (fields with a leading world axis), ``opt`` (the
    first scene's options, shared by the worlds that have no copy of their own), ``stream``
    (None: no CUDA stream on the CPU).
    """

    stream = None

    def __init__(self, model, nworld=1, data=None, substeps: int = 1, nthread: Optional[int] = None):
        mj = _mj()
        several = isinstance(model, (list, tuple))
        items = list(model) if several else [model]
        if several and not items:
            raise ValueError("model: expected at least one scene")
        specs, scenes = [], []
        for i, m in enumerate(items):
            where = f"model[{i}]" if several else "model"
            if isinstance(m, mj.MjSpec):
                specs.append(m)
                scenes.append(m.compile())
            elif isinstance(m, mj.MjModel):
                specs.append(None)
                scenes.append(m)
            else:
                raise ValueError(f"{where}: expected a mujoco.MjModel or mujoco.MjSpec, got {type(m).__name__}")
        for i, m in enumerate(scenes[1:], 1):
            for f in _LAYOUT:
                if getattr(m, f) != getattr(scenes[0], f):
                    raise ValueError(f"model[{i}]: its {f} {getattr(m, f)} differs from model[0]'s "
                                     f"{getattr(scenes[0], f)} (scenes share one state layout)")
        counts = list(nworld) if isinstance(nworld, (list, tuple, np.ndarray)) else [nworld]
        if len(counts) != len(scenes) or any(isinstance(n, bool) or not isinstance(n, (int, np.integer))
                                             or n < (0 if several else 1) for n in counts) or sum(counts) < 1:
            want = f"{len(scenes)} integers >= 0, one per scene, not all 0" if several else "an integer >= 1"
            raise ValueError(f"nworld: expected {want}, got {nworld!r}")
        if data is not None and not isinstance(data, mj.MjData):
            raise ValueError(f"data: expected None or a mujoco.MjData, got {type(data).__name__}")
        if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)) or substeps < 1:
            raise ValueError(f"substeps: expected an integer >= 1, got {substeps!r}")
        self.spec, self.mjm = specs[0], scenes[0]
        self._specs = specs  # each scene's MjSpec or None (a planner adds its terms' sensors to copies)
        self.scenes = scenes
        self.scene = np.repeat(np.arange(len(scenes)), counts)
        self.nworld, self.substeps = int(sum(counts)), int(substeps)
        self.substep_sensordata = np.zeros((self.substeps, self.nworld, self.mjm.nsensordata))
        self.nthread = _check_nthread(nthread)
        self._init = data
        self._data = None
        self._own = None  # per-world model copies, made on first need (a planner's sims have many worlds)
        self._rng = None

    # ------------------------------------------------------------ per-world model rows
    @property
    def models(self) -> list:
        """Each world's ``MjModel`` (the scene's shared one until a world gets its own rows)."""
        if self._own is not None:
            return self._own
        return [self.scenes[s] for s in self.scene]

    def _own_models(self) -> list:
        if self._own is None:
            self._own = [copy.copy(self.scenes[s]) for s in self.scene]
        return self._own

    @property
    def model(self) -> _ModelRows:
        """Model fields with a leading world axis: ``sim.model.geom_friction.numpy()`` (nworld, ngeom,
        3); ``assign`` writes every world's rows (each world gets its own model copy)."""
        self._own_models()
        return _ModelRows(self)

    def _check_field(self, field, arg: str) -> None:
        ok = isinstance(field, str) and not field.startswith("_") and hasattr(self.mjm, field) \
            and isinstance(getattr(self.mjm, field), np.ndarray)
        if not ok:
            raise ValueError(f"{arg}: {field!r} is not an array field of mujoco.MjModel")
        shapes = {np.shape(getattr(m, field)) for m in self.scenes}
        if len(shapes) > 1:
            raise ValueError(f"{arg}: {field!r} has different shapes in the scenes ({sorted(shapes)}): "
                             f"no rows per world")

    def set_random(self, field: str, index: tuple, low, high, log: bool = False, add: bool = False,
                   rng: Optional[np.random.Generator] = None) -> None:
        """Set (``add``: offset) ``model.<field>[:, *index]`` to one uniform draw per world from ``low``
        to ``high`` (broadcast to the trailing axes of ``field[index]``; each element drawn
        independently), log-uniformly with ``log``. ``rng``: the generator (None: the simulator's
        own, seeded 0 at construction, so a fresh simulator repeats its draws). After body_mass,
        body_inertia, body_ipos or body_iquat it runs :meth:`set_const`. ValueError names the
        argument that does not fit (field, index, low, high)."""
        self._check_field(field, "field")
        if not isinstance(index, tuple):
            raise ValueError(f"index: expected a tuple of indices into model.{field}, got {index!r}")
        try:
            target = np.asarray(getattr(self.mjm, field)[index])
        except (IndexError, TypeError, ValueError) as e:
            raise ValueError(f"index: {index!r} does not index model.{field} of shape "
                             f"{np.shape(getattr(self.mjm, field))} ({e})") from None
        bounds = []
        for name, v in (("low", low), ("high", high)):
            try:
                a = np.broadcast_to(np.asarray(v, dtype=np.float64), target.shape)
            except (TypeError, ValueError):
                raise ValueError(f"{name}: {v!r} does not broadcast to model.{field}[{index}]'s shape "
                                 f"{target.shape}") from None
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name}: must be finite, got {v!r}")
            bounds.append(a)
        lo, hi = bounds
        if np.any(lo > hi):
            raise ValueError(f"high: must be >= low everywhere, got low {low!r}, high {high!r}")
        if log and np.any(lo <= 0):
            raise ValueError(f"low: a log-uniform draw needs low > 0, got {low!r}")
        if rng is None:
            if self._rng is None:
                self._rng = np.random.default_rng(0)
            rng = self._rng
        elif not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng: expected None or a numpy.random.Generator, got {type(rng).__name__}")
        u = rng.random((self.nworld,) + target.shape)
        draw = np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo))) if log else lo + u * (hi - lo)
        for m, x in zip(self._own_models(), draw):
            arr = getattr(m, field)
            arr[index] = (arr[index] + x) if add else x
            _drop_shortcuts(m, field)
        if field in _CONST_FIELDS:
            self.set_const()

    def set_const(self) -> None:
        """Recompute the constants derived from masses and inertias (``mj_setConst``), per world,
        after randomising them or body_ipos."""
        mj = _mj()
        for m in self._own_models():
            # A moved inertial frame breaks the compiler's "simple body" shortcut (mj_setConst
            # refuses it); dropping the flag only gives up that shortcut.
            _drop_shortcuts(m, "body_ipos")
            mj.mj_setConst(m, mj.MjData(m))  # a scratch MjData: mj_setConst overwrites its state

    def set_scene(self, mask, scene) -> None:
        """Give the worlds where ``mask`` ((nworld,) bool or int) is set scene ``scene[w]``'s model
        rows ((nworld,) ints in [0, len(scenes))); their state carries over (static geoms move from
        the next forward / step), earlier randomised rows of those worlds are replaced."""
        mj = _mj()
        m = _is_mask_array(mask).reshape(-1)
        if m.shape != (self.nworld,):
            raise ValueError(f"mask: expected ({self.nworld},) values, one per world, got shape {m.shape}")
        sc = _is_mask_array(scene).reshape(-1)
        if sc.shape != (self.nworld,) or not np.issubdtype(sc.dtype, np.integer):
            raise ValueError(f"scene: expected ({self.nworld},) integers, one per world, got {sc.dtype} "
                             f"shape {sc.shape}")
        sel = np.flatnonzero(m)
        bad = [int(sc[w]) for w in sel if not 0 <= sc[w] < len(self.scenes)]
        if bad:
            raise ValueError(f"scene: {bad} is not a scene index in [0, {len(self.scenes)})")
        own, datas = self._own_models(), self.data
        for w in sel:
            s = int(sc[w])
            own[w] = copy.copy(self.scenes[s])
            self.scene[w] = s
            d = mj.MjData(own[w])  # the scene's sizes (geoms, contacts) may differ from the old one's
            copy_state(own[w], datas[w], d)
            mj.mj_forward(own[w], d)
            datas[w] = d

    # ------------------------------------------------------------------ stepping
    @property
    def data(self) -> list:
        if self._data is None:
            mj = _mj()
            self._data = []
            for m in self.models:
                d = mj.MjData(m)
                if self._init is not None:
                    copy_state(m, self._init, d)
                mj.mj_forward(m, d)
                self._data.append(d)
        return self._data

    @property
    def opt(self):
        """The first scene's physics options (``sim.opt.iterations = 5`` applies from the next step
        on to the worlds that share that scene's model)."""
        return self.mjm.opt

    def step(self) -> None:
        """``substeps`` ``mj_step`` in every world (controls: each world's ``data.ctrl``; its model:
        ``models[w]``); ``substep_sensordata[k]``: every world's sensordata after substep k."""
        mj = _mj()
        models = self.models
        for k in range(self.substeps):
            for w, d in enumerate(self.data):
                mj.mj_step(models[w], d)
                self.substep_sensordata[k, w] = d.sensordata

    def reset(self, mask) -> None:
        """Return the worlds where ``mask`` (nworld,) bool / int is set to the initial state
        (``data``'s, else the scene's defaults), derived quantities recomputed."""
        mj = _mj()
        m = _is_mask_array(mask).reshape(-1)
        if m.shape != (self.nworld,):
            raise ValueError(f"mask: expected ({self.nworld},) values, one per world, got shape {m.shape}")
        models = self.models
        for w in np.flatnonzero(m):
            d = self.data[w]
            mj.mj_resetData(models[w], d)
            if self._init is not None:
                copy_state(models[w], self._init, d)
            mj.mj_forward(models[w], d)

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
        for m, d in zip(self.models, self.data):
            mj.mj_kinematics(m, d)

    def com_pos(self) -> None:
        """``mj_comPos`` in every world (subtree_com, cinert, cdof from the positions)."""
        mj = _mj()
        for m, d in zip(self.models, self.data):
            mj.mj_comPos(m, d)

    def forward(self) -> None:
        """``mj_forward`` in every world (derived quantities, sensordata of the current state)."""
        mj = _mj()
        for m, d in zip(self.models, self.data):
            mj.mj_forward(m, d)

    # ------------------------------------------------------------ scene helpers
    @staticmethod
    def build_coarse_spec(spec, config):
        """A copy of ``spec`` with ``config``'s (a :class:`gato.sampling.CoarseConfig`) cheaper
        geometry and physics (gato.sampling.coarse)."""
        from .coarse import build_coarse_spec

        return build_coarse_spec(spec, config)

    def build_entity(self, prefix: str, soft_joint_pos_limit_factor: float = 1.0):
        """The :class:`gato.sampling.Entity` named ``prefix*``, its default pose the initial qpos."""
        from .entities import Entity

        return Entity(self, prefix, soft_joint_pos_limit_factor)

    def build_contact_sensor(self, name: str, track_air_time: bool = False):
        """A :class:`gato.sampling.ContactSensor` of the contact sensors named ``{name}_{primary}_{found or force}``."""
        from .entities import ContactSensor

        return ContactSensor(self, name, track_air_time)

    def compute_rays(self, render_context=None, **rays) -> None:
        """Cast rays (``mujoco_warp.rays``' arguments) in every world at its current poses
        (gato.sampling.rays; ``render_context`` is accepted for the API and not needed on the CPU)."""
        from .rays import compute_rays

        compute_rays(self, render_context, **rays)

    def resized(self, nworld: int) -> "MjSim":
        """A simulator of the same scenes and thread count with ``nworld`` worlds, split evenly over
        several scenes (the first ``nworld % len(scenes)`` scenes get one more); fresh model rows."""
        k = len(self.scenes)
        if isinstance(nworld, bool) or not isinstance(nworld, (int, np.integer)) or nworld < k:
            raise ValueError(f"nworld: expected an integer >= {k} (one world per scene at least), got {nworld!r}")
        if k == 1:
            out = MjSim(self.mjm, int(nworld), self._init, self.substeps, self.nthread)
        else:
            counts = [nworld // k + (i < nworld % k) for i in range(k)]
            out = MjSim(list(self.scenes), counts, self._init, self.substeps, self.nthread)
        out.spec, out._specs = self.spec, list(self._specs)
        return out


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
        """``model``: one MjModel for every rollout, or a list of n (one per rollout, same sizes)."""
        n, T = ctrl.shape[:2]
        if isinstance(model, (list, tuple)):
            if len(model) != n:
                raise ValueError(f"model: expected {n} models, one per rollout, got {len(model)}")
            models, model = list(model), model[0]
        else:
            models = self._models.get((id(model), n))
            if models is None:
                models = [model] * n
                self._models[(id(model), n)] = models
        state, sens = self._out(model, n, T)
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

