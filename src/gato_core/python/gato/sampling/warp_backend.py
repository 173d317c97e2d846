"""Rollout engine of the sampling planner on MuJoCo Warp (``mujoco_warp``): ``backend="warp"``.

:class:`WarpRolloutEngine` has :class:`gato.sampling.sim.RolloutEngine`'s interface (``run``,
``steps``, ``rollout_s``, ``close``) and returns the same arrays, so the planner does not know
which engine it drives. All rollouts of one call are the worlds of one ``mujoco_warp`` batch,
stepped together ``T`` times on one Warp device: "cuda" / "cuda:N" (a GPU) or "cpu" (Warp's
CPU device: slow, it exists so the backend can be tested without a GPU).

Optional dependency: ``mujoco-warp`` (and ``warp-lang``) are imported on first use only; the
default ``backend="cpu"`` never needs them. Differences from ``mujoco.rollout`` (float64, C):
Warp computes in float32, so states agree to float32 rounding amplified by the dynamics
(docs/sampling_reference.md gives the measured gap); the scene's ``mjDSBL_AUTORESET`` flag (set by
:func:`gato.sampling.scenes.robot_spec` so a diverged rollout is not silently reset) is cleared
on the device copy because ``mujoco_warp`` has no auto-reset at all; time is stepped in float32;
contacts and constraint rows live in preallocated buffers (``nconmax``, ``njmax``) whose overflow
the engine detects and handles (:class:`WarpRolloutEngine`).
"""
from __future__ import annotations

import copy
import logging
import math
import time
from typing import Optional

import numpy as np

__all__ = ["WarpRolloutEngine", "import_warp", "cuda_available"]

log = logging.getLogger(__name__)

#: Default capacities per world (SimMPCConfig.nconmax / njmax): contacts and constraint rows.
NCONMAX = 64
NJMAX = 256


def import_warp():
    """(warp, mujoco_warp) modules, or ImportError naming the optional dependency to install."""
    try:
        import warp as wp

        # before mujoco_warp's import initialises Warp: no banner, no per-kernel load lines
        if hasattr(wp, "LOG_WARNING"):
            wp.config.log_level = wp.LOG_WARNING
        else:  # pragma: no cover - Warp before log levels
            wp.config.quiet = True
        import mujoco_warp as mjw
    except ImportError as e:
        raise ImportError(
            "backend 'warp' needs the optional packages mujoco-warp and warp-lang "
            f"(pip install mujoco-warp==4.0.0 warp-lang); import failed: {e}") from e
    wp.init()
    return wp, mjw


def cuda_available() -> bool:
    """True where Warp imports and sees a CUDA device."""
    try:
        wp, _ = import_warp()
    except ImportError:
        return False
    return wp.get_cuda_device_count() > 0


def check_device(device: Optional[str]) -> str:
    """The Warp device name ``device`` means (None: "cuda:0" if a GPU exists, else "cpu");
    ValueError names the device when Warp does not have it."""
    wp, _ = import_warp()
    if device is None:
        return "cuda:0" if wp.get_cuda_device_count() > 0 else "cpu"
    try:
        return str(wp.get_device(device))
    except (RuntimeError, ValueError) as e:
        have = [str(d) for d in wp.get_devices()]
        raise ValueError(f"device: Warp has no device {device!r} (it has {have}): {e}") from None


def _capacity_bits(mjw) -> dict:
    """mujoco_warp overflow bits (``Data.overflow``, OverflowType) per SimMPCConfig capacity field
    that bounds them: broadphase pairs, narrowphase and CCD contacts share the contact pool
    (nconmax x worlds; CCD's defaults to it); constraint rows and their Jacobian non-zeros (sized
    from njmax) are per world."""
    o = mjw.OverflowType
    return {"nconmax": int(o.BROADPHASE | o.NARROWPHASE | o.CCD), "njmax": int(o.NEFC | o.NJMAX_NNZ)}


def _other_bits(mjw) -> int:
    """Overflow bits no setting here bounds (height-field, EPA horizon, contact-match sensor,
    island dofs, tactile): logged as warnings. A solver or line search hitting its iteration limit
    (ITERATIONS, LS_ITERATIONS) is not an overflow (MuJoCo C stops there too) and is not reported."""
    o = mjw.OverflowType
    return int(o.ALL) & ~(sum(_capacity_bits(mjw).values()) | int(o.ITERATIONS) | int(o.LS_ITERATIONS))


class WarpRolloutEngine:
    """Open-loop rollouts of one model as one batch of ``mujoco_warp`` worlds on a Warp device.

    ``run(model, x0 (n, nstate), warm (n, nv), ctrl (n, T, nu))`` returns (state (n, T, nstate)
    in mjSTATE_FULLPHYSICS layout, sensordata (n, T, nsensordata)): row t is the state after the
    (t+1)-th step and the sensors that step computed, as ``mujoco.rollout`` returns them.

    Capacities: ``nconmax`` contacts per world (one pool of nconmax x n for the batch) and
    ``njmax`` constraint rows per world. mujoco_warp drops what does not fit and flags it in
    ``Data.overflow``; the engine reads the flags once per call: a call that overflowed is re-run
    once with the overflowing capacity grown (at least doubled; a logged warning, kept for later
    calls), and one that overflows again raises RuntimeError naming the SimMPCConfig field.

    graph: None: on a CUDA device each sim step replays one captured CUDA graph of
    ``mujoco_warp.step`` (captured on the first call per model and batch size), on Warp's CPU
    device every kernel launches from Python; True: capture on any device (Warp's CPU device
    replays it in C++); False: never capture. A capture that fails (a CUDA driver without
    conditional graph nodes or memory pools) is logged and the engine steps eagerly from then on
    (``graph`` becomes False).
    """

    def __init__(self, model, device: Optional[str] = None, *, nconmax: int = NCONMAX, njmax: int = NJMAX,
                 graph: Optional[bool] = None):
        import mujoco

        self._wp, self._mjw = import_warp()
        self.device = check_device(device)
        for name, v in (("nconmax", nconmax), ("njmax", njmax)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        if graph is not None and not isinstance(graph, bool):
            raise ValueError(f"graph: expected None, True or False, got {graph!r}")
        nq, nv, na = model.nq, model.nv, model.na
        size = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        if size != 1 + nq + nv + na:
            raise ValueError("model: backend 'warp' supports time, qpos, qvel and act as the physics state; "
                             f"this scene has {size - 1 - nq - nv - na} more (history or plugin state)")
        self.capacity = {"nconmax": nconmax, "njmax": njmax}  # current (grown) capacities per world
        self._configured = dict(self.capacity)
        self.graph = self.device.startswith("cuda") if graph is None else graph
        self._models = {}  # id(MjModel) -> (MjModel kept alive, device Model)
        self._datas = {}  # (id(MjModel), n) -> device Data
        self._graphs = {}  # (id(MjModel), n) -> captured mujoco_warp.step of that Data
        self._hist = {}  # (id(MjModel), n, T) -> device history buffers
        self._warned = 0  # overflow bits already logged (_other_bits)
        self.steps = 0  # simulated steps run so far, re-runs included (throughput accounting)
        self.rollout_s = 0.0  # wall time spent stepping on the device so far [s]
        self.regrows = 0  # calls re-run with grown capacities

    def _device_model(self, model):
        import mujoco

        entry = self._models.get(id(model))
        if entry is None:
            mm = copy.copy(model)
            mm.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
            try:
                with self._wp.ScopedDevice(self.device):
                    dm = self._mjw.put_model(mm)
            except NotImplementedError as e:
                raise ValueError(f"model: mujoco_warp does not support this scene: {e}") from None
            # no per-step kernel prints for the overflows run() detects and reports itself
            dm.opt.warn_overflow = int(dm.opt.warn_overflow) & ~sum(_capacity_bits(self._mjw).values())
            entry = (model, dm)
            self._models[id(model)] = entry
        return entry[1]

    def _device_data(self, model, n):
        import mujoco

        key = (id(model), n)
        d = self._datas.get(key)
        if d is None:
            with self._wp.ScopedDevice(self.device):
                d = self._mjw.put_data(model, mujoco.MjData(model), nworld=n, **self.capacity)
            self._datas[key] = d
        return d

    def _history(self, model, n, T):
        key = (id(model), n, T)
        h = self._hist.get(key)
        if h is None:
            wp, dev = self._wp, self.device
            h = {f: wp.empty(T * n * max(1, w), dtype=float, device=dev)
                 for f, w in (("time", 1), ("qpos", model.nq), ("qvel", model.nv), ("act", model.na),
                              ("sensordata", model.nsensordata), ("ctrl", model.nu))}
            self._hist[key] = h
        return h

    def _step(self, key, m, d):
        """One mujoco_warp.step of every world: eager, or the replay of its captured graph."""
        if not self.graph:
            self._mjw.step(m, d)
            return
        g = self._graphs.get(key)
        if g is None:
            try:
                # records the step's launches against d's buffers (runs nothing); replayed below
                with self._wp.ScopedCapture(device=self.device) as cap:
                    self._mjw.step(m, d)
            except Exception as e:  # noqa: BLE001 - e.g. a driver without conditional graph nodes
                # nothing ran during the failed capture: this and later steps launch eagerly
                log.warning("backend 'warp': capturing mujoco_warp.step on %s failed (%s: %s); stepping "
                            "without graphs", self.device, type(e).__name__, e)
                self.graph = False
                self._graphs.clear()
                self._mjw.step(m, d)
                return
            g = self._graphs[key] = cap.graph
        self._wp.capture_launch(g)

    def _rollout(self, model, x0, warm, ctrl):
        """One pass over the batch: (the history arrays, {capacity field: grown value} for each
        capacity the pass overflowed)."""
        wp = self._wp
        n, T = ctrl.shape[:2]
        nq, nv, na, nu, ns = model.nq, model.nv, model.na, model.nu, model.nsensordata
        m = self._device_model(model)
        d = self._device_data(model, n)
        h = self._history(model, n, T)
        f32 = np.float32
        with wp.ScopedDevice(self.device):
            d.time.assign(x0[:, 0].astype(f32))
            d.qpos.assign(x0[:, 1:1 + nq].astype(f32))
            d.qvel.assign(x0[:, 1 + nq:1 + nq + nv].astype(f32))
            if na:
                d.act.assign(x0[:, 1 + nq + nv:1 + nq + nv + na].astype(f32))
            d.qacc_warmstart.assign(np.asarray(warm, dtype=f32))
            d.overflow.zero_()  # sticky flags: cleared per call, read once after the last step
            if nu:
                # (T, n, nu): step t's controls are one contiguous block.
                h["ctrl"].assign(np.ascontiguousarray(np.swapaxes(ctrl, 0, 1), dtype=f32).ravel())
            for t in range(T):
                if nu:
                    wp.copy(d.ctrl, h["ctrl"], 0, t * n * nu, n * nu)
                self._step((id(model), n), m, d)
                for f, w in (("time", 1), ("qpos", nq), ("qvel", nv), ("act", na), ("sensordata", ns)):
                    if w:
                        wp.copy(h[f], getattr(d, f), t * n * w, 0, n * w)
            out = {f: h[f].numpy() for f in ("time", "qpos", "qvel", "act", "sensordata")}
            flags = int(np.bitwise_or.reduce(d.overflow.numpy()))
        self.steps += n * T
        return out, (self._grown(flags, d, n) if flags else {})

    def _grown(self, flags: int, d, n: int) -> dict:
        """{field: new capacity} for the capacities ``flags`` says overflowed: at least double,
        and at least the last step's demand (contacts per world of the pool, rows of the worst
        world; the peak over the steps may be higher, hence the doubling)."""
        other = flags & _other_bits(self._mjw) & ~self._warned
        if other:
            self._warned |= other
            names = [f.name for f in self._mjw.OverflowType
                     if f.value and not f.value & (f.value - 1) and other & f.value]  # single bits only
            log.warning("mujoco_warp overflow %s in a rollout batch (no gato setting bounds it; contacts or "
                        "sensor matches were dropped): results of the affected worlds are approximate", names)
        out = {}
        bits = _capacity_bits(self._mjw)
        if flags & bits["nconmax"]:
            need = math.ceil(max(int(d.nacon.numpy()[0]), int(d.ncollision.numpy()[0])) / n)
            out["nconmax"] = max(2 * self.capacity["nconmax"], need)
        if flags & bits["njmax"]:
            out["njmax"] = max(2 * self.capacity["njmax"], int(np.max(d.nefc.numpy())))
        return out

    def run(self, model, x0: np.ndarray, warm: np.ndarray, ctrl: np.ndarray):
        n, T = ctrl.shape[:2]
        nq, nv, na, ns = model.nq, model.nv, model.na, model.nsensordata
        x0 = np.asarray(x0, dtype=np.float64)
        tic = time.perf_counter()
        out, grow = self._rollout(model, x0, warm, ctrl)
        if grow:
            log.warning("backend 'warp': a batch of %d rollouts overflowed %s; re-running it with %s (raise "
                        "SimMPCConfig.%s to avoid the re-run)", n,
                        ", ".join(f"{k} = {self.capacity[k]}" for k in grow),
                        ", ".join(f"{k} = {v}" for k, v in grow.items()), " / ".join(grow))
            self.capacity.update(grow)
            self.regrows += 1
            self._datas.clear()  # buffers of the old size, and the graphs recorded against them
            self._graphs.clear()
            out, again = self._rollout(model, x0, warm, ctrl)
            if again:
                k = next(iter(again))
                raise RuntimeError(
                    f"{k}: the rollouts overflowed the mujoco_warp buffers again after growing them to "
                    f"{', '.join(f'{f} = {self.capacity[f]}' for f in again)} (configured "
                    f"{', '.join(f'{f} = {self._configured[f]}' for f in again)}); increase SimMPCConfig.{k} "
                    f"to at least {again[k]}")
        self.rollout_s += time.perf_counter() - tic
        state = np.empty((n, T, 1 + nq + nv + na))
        state[..., 0] = out["time"][:T * n].reshape(T, n).T
        for f, a, w in (("qpos", 1, nq), ("qvel", 1 + nq, nv), ("act", 1 + nq + nv, na)):
            if w:
                state[..., a:a + w] = np.swapaxes(out[f][:T * n * w].reshape(T, n, w), 0, 1)
        sens = np.swapaxes(out["sensordata"][:T * n * ns].reshape(T, n, ns), 0, 1) if ns else np.empty((n, T, 0))
        return state, np.ascontiguousarray(sens)

    def close(self):
        self._graphs.clear()
        self._models.clear()
        self._datas.clear()
        self._hist.clear()
