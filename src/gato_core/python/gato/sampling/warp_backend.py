"""Rollout engine of the sampling planner on MuJoCo Warp (``mujoco_warp``): ``backend="warp"``.

:class:`WarpRolloutEngine` has :class:`gato.sampling.sim.RolloutEngine`'s interface (``run``,
``steps``, ``rollout_s``, ``close``) and returns the same arrays, so the planner does not know
which engine it drives. All rollouts of one call are the worlds of one ``mujoco_warp`` batch,
stepped together ``T`` times on one Warp device: "cuda" / "cuda:N" (a GPU) or "cpu" (Warp's
CPU device: slow, it exists so the backend can be tested without a GPU).

Optional dependency: ``mujoco-warp`` (and ``warp-lang``) are imported on first use only; the
default ``backend="cpu"`` never needs them. Differences from ``mujoco.rollout`` (float64, C):
Warp computes in float32, so states agree to float32 rounding amplified by the dynamics
(docs/sampling.md gives the measured gap); the scene's ``mjDSBL_AUTORESET`` flag (set by
:func:`gato.sampling.scenes.robot_spec` so a diverged rollout is not silently reset) is cleared
on the device copy because ``mujoco_warp`` has no auto-reset at all; time is stepped in float32.
"""
from __future__ import annotations

import copy
import time
from typing import Optional

import numpy as np

__all__ = ["WarpRolloutEngine", "import_warp", "cuda_available"]

#: Contacts and constraint rows allocated per world (a world with more overflows: mujoco_warp
#: drops the extra contacts, so keep these above what a scene reaches).
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


class WarpRolloutEngine:
    """Open-loop rollouts of one model as one batch of ``mujoco_warp`` worlds on a Warp device.

    ``run(model, x0 (n, nstate), warm (n, nv), ctrl (n, T, nu))`` returns (state (n, T, nstate)
    in mjSTATE_FULLPHYSICS layout, sensordata (n, T, nsensordata)): row t is the state after the
    (t+1)-th step and the sensors that step computed, as ``mujoco.rollout`` returns them.
    """

    def __init__(self, model, device: Optional[str] = None):
        import mujoco

        self._wp, self._mjw = import_warp()
        self.device = check_device(device)
        nq, nv, na = model.nq, model.nv, model.na
        size = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        if size != 1 + nq + nv + na:
            raise ValueError("model: backend 'warp' supports time, qpos, qvel and act as the physics state; "
                             f"this scene has {size - 1 - nq - nv - na} more (history or plugin state)")
        self._models = {}  # id(MjModel) -> (MjModel kept alive, device Model)
        self._datas = {}  # (id(MjModel), n) -> device Data
        self._hist = {}  # (id(MjModel), n, T) -> device history buffers
        self.steps = 0  # simulated steps run so far (throughput accounting)
        self.rollout_s = 0.0  # wall time spent stepping on the device so far [s]

    def _device_model(self, model):
        import mujoco

        entry = self._models.get(id(model))
        if entry is None:
            mm = copy.copy(model)
            mm.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
            try:
                with self._wp.ScopedDevice(self.device):
                    entry = (model, self._mjw.put_model(mm))
            except NotImplementedError as e:
                raise ValueError(f"model: mujoco_warp does not support this scene: {e}") from None
            self._models[id(model)] = entry
        return entry[1]

    def _device_data(self, model, n):
        import mujoco

        key = (id(model), n)
        d = self._datas.get(key)
        if d is None:
            with self._wp.ScopedDevice(self.device):
                d = self._mjw.put_data(model, mujoco.MjData(model), nworld=n, nconmax=NCONMAX, njmax=NJMAX)
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

    def run(self, model, x0: np.ndarray, warm: np.ndarray, ctrl: np.ndarray):
        wp = self._wp
        n, T = ctrl.shape[:2]
        nq, nv, na, nu, ns = model.nq, model.nv, model.na, model.nu, model.nsensordata
        m = self._device_model(model)
        d = self._device_data(model, n)
        h = self._history(model, n, T)
        x0 = np.asarray(x0, dtype=np.float64)
        f32 = np.float32
        tic = time.perf_counter()
        with wp.ScopedDevice(self.device):
            d.time.assign(x0[:, 0].astype(f32))
            d.qpos.assign(x0[:, 1:1 + nq].astype(f32))
            d.qvel.assign(x0[:, 1 + nq:1 + nq + nv].astype(f32))
            if na:
                d.act.assign(x0[:, 1 + nq + nv:1 + nq + nv + na].astype(f32))
            d.qacc_warmstart.assign(np.asarray(warm, dtype=f32))
            if nu:
                # (T, n, nu): step t's controls are one contiguous block.
                h["ctrl"].assign(np.ascontiguousarray(np.swapaxes(ctrl, 0, 1), dtype=f32).ravel())
            for t in range(T):
                if nu:
                    wp.copy(d.ctrl, h["ctrl"], 0, t * n * nu, n * nu)
                self._mjw.step(m, d)
                for f, w in (("time", 1), ("qpos", nq), ("qvel", nv), ("act", na), ("sensordata", ns)):
                    if w:
                        wp.copy(h[f], getattr(d, f), t * n * w, 0, n * w)
            out = {f: h[f].numpy() for f in ("time", "qpos", "qvel", "act", "sensordata")}
        self.rollout_s += time.perf_counter() - tic
        self.steps += n * T
        state = np.empty((n, T, 1 + nq + nv + na))
        state[..., 0] = out["time"][:T * n].reshape(T, n).T
        for f, a, w in (("qpos", 1, nq), ("qvel", 1 + nq, nv), ("act", 1 + nq + nv, na)):
            if w:
                state[..., a:a + w] = np.swapaxes(out[f][:T * n * w].reshape(T, n, w), 0, 1)
        sens = np.swapaxes(out["sensordata"][:T * n * ns].reshape(T, n, ns), 0, 1) if ns else np.empty((n, T, 0))
        return state, np.ascontiguousarray(sens)

    def close(self):
        self._models.clear()
        self._datas.clear()
        self._hist.clear()
