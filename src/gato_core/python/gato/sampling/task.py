"""The Task protocol of the sampling planner's cost terms (RoboKit's ``robokit.terms.task``), on the CPU.

- :class:`Context`: an ``Enum`` of named inputs a planner hands its terms; a term template may
  hold a member (alone or inside a tuple) where a value belongs, and :meth:`Task.resolve` swaps
  it for the context's value (:meth:`Task.needs` lists what a template reads).
- :class:`Task`: the members every term and :class:`gato.sampling.SimMPC` share (``name``,
  ``weight``, ``robot``, ``var_key``, ``active``, ``parallel_safe``, ``initial_vars``,
  ``needs``, ``cost_name``, ``dense_task``, ``precompute``, ``resolve``).
- :class:`SimContext`: what a planner gives its terms for one set of worlds, and
  :func:`sim_context` (``sim`` -> those values).

Arrays are NumPy (Warp arrays on the CPU device are accepted where a context value or an
output buffer is read: ``.numpy()`` of a CPU Warp array aliases its memory, so writes land in it).
"""
from __future__ import annotations

import enum
from typing import Any, Dict, Mapping

import numpy as np

__all__ = ["Context", "Task", "VarKey", "SimContext", "sim_context", "as_array", "ContextModel"]


class Context(enum.Enum):
    """Base of the placeholder enums a planner resolves (subclass it: ``class Inputs(Context): STEP = 0``)."""


class VarKey(enum.Enum):
    """What a term's variables are: ROBOT (the worlds' state and controls)."""

    ROBOT = 0


class SimContext(Context):
    """Values a planner gives its terms for one world set; arrays have a leading world axis (nworld, ...).

    CLOCK (3,) int: (sim step of the row, row index in the horizon, fine steps the row counts);
    NUM_INSTANCES, WORLDS_PER_INSTANCE: nworld = their product (instances' worlds are contiguous);
    MODEL: the compiled ``mujoco.MjModel`` (the layout; gato's addition: Jacobians need it);
    TIME (nworld,); QPOS (nworld, nq); QVEL (nworld, nv); ACT (nworld, na); CTRL (nworld, nu) [the
    controls applied]; SENSORDATA (nworld, nsensordata); SENSORS [(name, adr, dim)]; BODIES
    [names]; BODY_POSITION (nworld, nbody, 3) [m]; BODY_ROTATION (nworld, nbody, 3, 3);
    GEOMS [names]; CONTACTS (count (1,), world (n,), geom (n, 2), dist (n,) [m], pos (n, 3) [m]).
    """

    CLOCK = 0
    NUM_INSTANCES = 1
    WORLDS_PER_INSTANCE = 2
    MODEL = 3
    TIME = 4
    QPOS = 5
    QVEL = 6
    ACT = 7
    CTRL = 8
    SENSORDATA = 9
    SENSORS = 10
    BODIES = 11
    BODY_POSITION = 12
    BODY_ROTATION = 13
    GEOMS = 14
    CONTACTS = 15


SENSOR_PREFIX = "sampling/"  # the sensors terms add to a scene (gato.sampling.terms)


def rot_to_quat(R) -> np.ndarray:
    """(..., 4) wxyz unit quaternions of (..., 3, 3) rotation matrices (w >= 0)."""
    R = np.asarray(R, dtype=np.float64)
    out = np.empty(R.shape[:-2] + (4,))
    flat, rf = out.reshape(-1, 4), R.reshape(-1, 3, 3)
    import mujoco

    for q, r in zip(flat, rf):
        mujoco.mju_mat2Quat(q, np.ascontiguousarray(r).reshape(9))
        if q[0] < 0:
            q *= -1.0
    return out


def as_array(x, dtype=np.float64) -> np.ndarray:
    """A NumPy view of ``x``: an ndarray, a CPU Warp array (aliased), or anything array-like."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "numpy") and hasattr(x, "device"):  # a Warp array: .numpy() aliases CPU memory
        return x.numpy()
    return np.asarray(x, dtype=dtype)


def _swap(value, context):
    if isinstance(value, Context):
        if value not in context:
            raise ValueError(f"context: no value for {value!r}")
        return context[value]
    if isinstance(value, tuple) and any(isinstance(v, Context) for v in value):
        return tuple(_swap(v, context) for v in value)
    return value


def _members(value, seen) -> set:
    if isinstance(value, Context):
        return {value}
    if isinstance(value, tuple):
        out = set()
        for v in value:
            out |= _members(v, seen)
        return out
    if isinstance(value, Task) and id(value) not in seen:
        return value._needs(seen)
    if isinstance(value, list):  # e.g. a config's [(term, running, terminal), ...]
        out = set()
        for v in value:
            out |= _members(v, seen)
        return out
    if hasattr(value, "terms") and isinstance(getattr(value, "terms"), list):  # a SimMPCConfig
        return _members(value.terms, seen)
    return set()


class Task:
    """Members every cost term shares (and :class:`gato.sampling.SimMPC`, which nests as a term).

    Class attributes: ``SUPPORTS_CUDA_GRAPH`` (False: no CUDA here), ``SUPPORTS_AUTODIFF`` (False:
    Jacobians are analytic or finite differences, see docs/sampling_reference.md), ``var_key``
    (VarKey.ROBOT), ``name`` (label for ``config.task(name)``), ``robot`` (None), ``weight`` (1.0).
    """

    SUPPORTS_CUDA_GRAPH: bool = False
    SUPPORTS_AUTODIFF: bool = False
    var_key: enum.Enum = VarKey.ROBOT
    name: str = ""
    robot: Any = None
    weight: Any = 1.0

    @property
    def active(self) -> bool:
        """Whether the term adds cost: False when its weights are all zero (None weighs 1)."""
        w = self.weight
        if w is None:
            return True
        if isinstance(w, dict):
            return any(np.any(np.asarray(v, dtype=np.float64) != 0) for v in w.values())
        try:
            return bool(np.any(np.asarray(w, dtype=np.float64) != 0))
        except (TypeError, ValueError):
            return True

    @property
    def parallel_safe(self) -> bool:
        """Whether the term may be evaluated apart from the others (it reads no other term's results)."""
        return True

    def initial_vars(self, num_candidates: int, device: Any = None) -> Dict[enum.Enum, Any]:
        """Variables this task adds beside the planner's: none."""
        return {}

    def needs(self) -> set:
        """The Context members this template reads, including those of the tasks it wraps."""
        return self._needs(set())

    def _needs(self, seen) -> set:
        seen.add(id(self))
        out = set()
        for v in vars(self).values():
            out |= _members(v, seen)
        return out

    def resolve(self, var_values, context: Mapping[Context, Any]) -> None:
        """Swap each Context placeholder, alone or in a tuple, for its value in ``context``."""
        for k, v in list(vars(self).items()):
            nv = _swap(v, context)
            if nv is not v:
                setattr(self, k, nv)

    def precompute(self, var_values, need_gradient: bool = False) -> None:
        """Prepare shared state before the term is evaluated (nothing here: terms evaluate on demand)."""

    @property
    def dense_task(self) -> "Task":
        """The per-pose task this term applies: the term itself."""
        return self

    @property
    def cost_name(self) -> str:
        """Snake-case label used in cost reports (the name when set)."""
        if self.name:
            return self.name
        s = type(self).__name__
        return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(s))


class ContextModel:
    """The layout a term binds to when resolved from a context: the MODEL's fields where the
    context has one, the context's arrays' sizes otherwise, and a sensor layout that adds the
    context's body poses and contacts as virtual sensors after SENSORDATA (``sampling/<body>/pos``
    (3), ``sampling/<body>/quat`` (4, wxyz), ``sampling/contact/<geom>`` (found, dist, pos))."""

    def __init__(self, context: Mapping[Context, Any]):
        m = context.get(SimContext.MODEL)
        self._model = m
        self.context = context
        get = lambda key: as_array(context[key]) if key in context else None  # noqa: E731
        self.qpos, self.qvel = get(SimContext.QPOS), get(SimContext.QVEL)
        self.ctrl, self.sens = get(SimContext.CTRL), get(SimContext.SENSORDATA)
        nw = [a.shape[0] for a in (self.qpos, self.qvel, self.ctrl, self.sens) if a is not None]
        if SimContext.NUM_INSTANCES in context and SimContext.WORLDS_PER_INSTANCE in context:
            nw.append(int(context[SimContext.NUM_INSTANCES]) * int(context[SimContext.WORLDS_PER_INSTANCE]))
        if not nw:
            raise ValueError("context: no world arrays (QPOS, QVEL, CTRL, SENSORDATA) and no NUM_INSTANCES")
        self.nworld = nw[0]
        if any(n != self.nworld for n in nw):
            raise ValueError(f"context: the world arrays and NUM_INSTANCES x WORLDS_PER_INSTANCE disagree: {nw}")

        def size(attr, arr):
            if m is not None:
                return int(getattr(m, attr))
            return 0 if arr is None else int(arr.shape[-1])
        self.nq, self.nv, self.nu = size("nq", self.qpos), size("nv", self.qvel), size("nu", self.ctrl)
        self.na = int(m.na) if m is not None else 0
        layout = {}
        if SimContext.SENSORS in context:
            for name, adr, dim in context[SimContext.SENSORS]:
                layout[str(name)] = (int(adr), int(dim))
        elif m is not None:
            for i in range(m.nsensor):
                layout[m.sensor(i).name] = (int(m.sensor_adr[i]), int(m.sensor_dim[i]))
        base = self.sens.shape[-1] if self.sens is not None else (int(m.nsensordata) if m is not None else 0)
        extra = []
        bodies = context.get(SimContext.BODIES)
        if bodies is not None and SimContext.BODY_POSITION in context:
            pos = as_array(context[SimContext.BODY_POSITION]).reshape(self.nworld, len(bodies), 3)
            rot = as_array(context[SimContext.BODY_ROTATION]).reshape(self.nworld, len(bodies), 3, 3) \
                if SimContext.BODY_ROTATION in context else np.broadcast_to(np.eye(3), (self.nworld, len(bodies), 3, 3))
            for i, b in enumerate(bodies):
                for kind, val in (("pos", pos[:, i]), ("quat", rot_to_quat(rot[:, i]))):
                    if f"{SENSOR_PREFIX}{b}/{kind}" not in layout:  # a real sensor of that name wins
                        layout[f"{SENSOR_PREFIX}{b}/{kind}"] = (base, val.shape[-1])
                        extra.append(val)
                        base += val.shape[-1]
        geoms = context.get(SimContext.GEOMS)
        if geoms is not None and SimContext.CONTACTS in context:
            count, world, pair, dist, cpos = (as_array(a) for a in context[SimContext.CONTACTS])
            n = int(np.asarray(count).reshape(-1)[0]) if np.size(count) else 0
            for g, gname in enumerate(geoms):
                val = np.zeros((self.nworld, 5))
                best = np.full(self.nworld, np.inf)
                for c in range(n):  # the closest contact of the geom, as a MuJoCo contact sensor reports it
                    w = int(world[c])
                    if g in (int(pair[c][0]), int(pair[c][1])) and float(dist[c]) < best[w]:
                        best[w] = float(dist[c])
                        val[w] = [1.0, float(dist[c]), *np.asarray(cpos[c], dtype=np.float64)[:3]]
                layout.setdefault(f"{SENSOR_PREFIX}contact/{gname}", (base, 5))
                extra.append(val)
                base += 5
        self.sensor_layout = layout
        self.nsensordata = base
        if self.sens is None:
            self.sens = np.zeros((self.nworld, 0))
        self.sensordata = np.concatenate([self.sens] + extra, axis=-1) if extra else self.sens
        self.bodies = list(bodies) if bodies is not None else None
        if self.bodies is not None:
            self.body_names = self.bodies
        else:
            self.body_names = [m.body(i).name for i in range(m.nbody)] if m is not None else None

    def __getattr__(self, attr):
        m = self.__dict__.get("_model")
        if m is None:
            raise AttributeError(f"context: {attr!r} needs SimContext.MODEL in the context")
        return getattr(m, attr)

    def body(self, i):
        if self.body_names is None:
            raise ValueError("context: a body id needs SimContext.BODIES or SimContext.MODEL")

        class _B:
            name = self.body_names[int(i)]
        return _B()


def sim_context(sim) -> Dict[Context, Any]:
    """The :class:`SimContext` values of a simulator's worlds (an :class:`gato.sampling.MjSim`), with
    its model's layout, except CLOCK, NUM_INSTANCES and WORLDS_PER_INSTANCE (the planner's)."""
    m = sim.mjm
    ds = sim.data
    stack = lambda f: np.stack([np.array(f(d), dtype=np.float64) for d in ds])  # noqa: E731
    world, pair, dist, pos = [], [], [], []
    for w, d in enumerate(ds):
        for c in range(d.ncon):
            con = d.contact[c]
            world.append(w)
            pair.append([int(con.geom1), int(con.geom2)])
            dist.append(float(con.dist))
            pos.append(np.array(con.pos))
    return {
        SimContext.MODEL: m,
        SimContext.TIME: np.array([d.time for d in ds]),
        SimContext.QPOS: stack(lambda d: d.qpos), SimContext.QVEL: stack(lambda d: d.qvel),
        SimContext.ACT: stack(lambda d: d.act).reshape(len(ds), m.na),
        SimContext.CTRL: stack(lambda d: d.ctrl).reshape(len(ds), m.nu),
        SimContext.SENSORDATA: stack(lambda d: d.sensordata).reshape(len(ds), m.nsensordata),
        SimContext.SENSORS: [(m.sensor(i).name, int(m.sensor_adr[i]), int(m.sensor_dim[i])) for i in range(m.nsensor)],
        SimContext.BODIES: [m.body(i).name for i in range(m.nbody)],
        SimContext.BODY_POSITION: stack(lambda d: d.xpos),
        SimContext.BODY_ROTATION: stack(lambda d: d.xmat).reshape(len(ds), m.nbody, 3, 3),
        SimContext.GEOMS: [m.geom(i).name for i in range(m.ngeom)],
        SimContext.CONTACTS: (np.array([len(world)]), np.array(world, dtype=int),
                              np.array(pair, dtype=int).reshape(-1, 2), np.array(dist),
                              np.array(pos).reshape(-1, 3)),
    }
