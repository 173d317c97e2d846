"""SimMPC: receding-horizon sampling MPC (MPPI / cross-entropy) over MuJoCo rollouts on the CPU.

Each plan refines ``batch_size`` instances' control nodes from their measured states:
``max_iterations`` times, ``num_samples - 1`` noisy node draws are rolled out in C
(``mujoco.rollout``, one call per iteration and stage segment, threads over the draws) and
scored by the config's cost terms (``config.backend="warp"``: one ``mujoco_warp`` batch on a Warp
device instead, :mod:`gato.sampling.warp_backend`); the moved plan (elite-weighted mean) is rolled out once more
at the model's own timestep (the "validation" world). The planner returns the next
``ctrl_steps`` commands; the caller executes them and plans again ``ctrl_steps`` later
(:meth:`SimMPC.execute` runs that loop on an :class:`gato.sampling.MjSim`).

Units: steps of the planning model (``model.opt.timestep`` s each); commands in the actuators'
(or the control map's) units.
"""
from __future__ import annotations

import copy
import math
import time
from typing import Callable, List, Optional

import numpy as np

from .config import SimMPCConfig, SimMPCStage
from .control_map import clock_of, map_commands, num_commands
from .mppi import basis_at, elite_update, free_nodes, node_basis, noise_profile, refit_std
from .sim import MjSim, RolloutEngine, as_states, state_layout
from .task import SimContext, Task, as_array
from .batch import RolloutBatch

__all__ = ["SimMPC"]

_AUTO_FACTORS = (4, 2)   # coarse step factors the automatic stage choice tries, largest first
_AUTO_TOLERANCE = 0.11   # coarse costs must stay within this share of the fine costs' spread


class SimMPC(Task):
    """Receding-horizon sampling MPC over simulated rollouts, for ``config.batch_size`` instances.

    A :class:`gato.sampling.Task` too: ``resolve(var_values, context)`` takes each instance's
    state from a :class:`SimContext` (its first world), and ``compute_weighted_cost`` plans from
    there and adds each instance's planned cost (the plan's cost-to-go) to ``out_cost``.

    Args:
        config: :class:`SimMPCConfig` with at least one cost term.
        sim: the planning simulator, an :class:`MjSim` (its ``nthread`` pins the rollout threads).
            With an ``MjSpec`` scene the planner compiles a copy with the sensors its terms read.
        ctrl_ref: reference commands the plans offset, (T, nu) or (batch_size, T, nu) (nu: the
            actuators', or the control map's ``num_commands``); rows past its end repeat the last.

    Attributes: ``sims`` ({"rollout": draws' worlds, "validation": moved plans' worlds}),
    ``model`` (the planning MjModel), ``stages`` (None until the first plan picks them),
    ``nodes`` (batch_size, num_nodes, nu) the current plans' offsets, ``plan_commands``
    (batch_size, horizon_steps, nu) the last plans' full command sequences.
    """

    def __init__(self, config: SimMPCConfig, sim: MjSim, ctrl_ref: np.ndarray):
        import mujoco

        if not isinstance(config, SimMPCConfig):
            raise ValueError(f"config: expected a SimMPCConfig, got {type(config).__name__}")
        config.validate()
        if not isinstance(sim, MjSim):
            raise ValueError(f"sim: expected a gato.sampling.MjSim, got {type(sim).__name__}")
        if sim.substeps != 1:
            raise ValueError(f"sim: SimMPC plans one physics step per sim step; got substeps {sim.substeps}")
        if not config.terms:
            raise ValueError("terms: the config has no cost term; add one with config.add(term)")
        if config.planner == "ilqr" and (config.control_map is not None or config.backend != "cpu"
                                         or config.num_replicas != 1):
            raise ValueError("planner: 'ilqr' needs backend 'cpu', no control_map and num_replicas 1 "
                             "(docs/sampling.md)")
        self.config = config
        self.model = self._planning_model(sim)
        scenes = [self.model] + [self._planning_model(sim, i) for i in range(1, len(sim.scenes))]
        for term, _, _ in config.terms:
            term.resolve(self.model)
        m, B, S, R = self.model, config.batch_size, config.num_samples, config.num_replicas
        self.nu = num_commands(config.control_map, m)
        if self.nu < 1:
            raise ValueError("sim: the model has no actuators to plan for")
        self.set_ctrl_ref(ctrl_ref)
        self.lo, self.hi = self._bounds()
        # The planner's worlds: every scene of sim (all worlds start in the first); per-world rows
        # (set_random / set_const / set_scene on sims["validation"]) reach the rollouts (_row_models).
        zeros = [0] * (len(scenes) - 1)
        self.sims = {"rollout": MjSim(scenes if zeros else m, [B * (S - 1) * R] + zeros if zeros else B * (S - 1) * R,
                                      nthread=sim.nthread),
                     "validation": MjSim(scenes if zeros else m, [B * R] + zeros if zeros else B * R,
                                         nthread=sim.nthread)}
        if config.backend == "warp":
            from .warp_backend import WarpRolloutEngine  # optional dependency: imported only here

            self.engine = WarpRolloutEngine(m, config.device, nconmax=config.nconmax, njmax=config.njmax,
                                            graph=None if config.cuda_graph_mode == "step" else False)
        else:
            self.engine = RolloutEngine(m, sim.nthread)
        self._scratch = mujoco.MjData(m)
        self._layout = state_layout(m)
        self._models = {1: m}
        K, H = config.num_nodes, config.horizon_steps
        self.basis = node_basis(config.interpolation, H, config.node_steps, K)
        self._free = free_nodes(config)
        self._sigma = noise_profile(config, self.nu)
        self._scale = np.ones(B)
        self.nodes = np.zeros((B, K, self.nu))
        self.plan_commands = np.zeros((B, H, self.nu))
        self._commands = np.zeros((config.ctrl_steps, B, self.nu))
        self._t_prev: Optional[int] = None
        self.rng = np.random.default_rng(config.seed)
        self.stages: Optional[List[SimMPCStage]] = list(config.stages) if config.stages else None
        self.num_plans = 0
        self.ilqr = None
        if config.planner == "ilqr":
            from .ilqr import ILQRPlans

            self.ilqr = ILQRPlans(self)

    def set_ctrl_ref(self, ctrl_ref: np.ndarray, offset: int = 0) -> None:
        """Replace the reference commands: (T, nu) or (batch_size, T, nu), row k at sim step
        offset + k (a receding-horizon driver refills a short window and moves the offset)."""
        B = self.config.batch_size
        ref = np.asarray(ctrl_ref, dtype=np.float64)
        if ref.ndim == 2:
            ref = np.broadcast_to(ref, (B,) + ref.shape)
        if ref.ndim != 3 or ref.shape[0] != B or ref.shape[2] != self.nu or ref.shape[1] < 1 \
                or not np.all(np.isfinite(ref)):
            raise ValueError(f"ctrl_ref: expected finite (T, {self.nu}) or ({B}, T, {self.nu}) commands, "
                             f"got shape {np.shape(ctrl_ref)}")
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            raise ValueError(f"offset: expected an integer sim step, got {offset!r}")
        self.ctrl_ref, self.ctrl_ref_offset = np.ascontiguousarray(ref), int(offset)

    # ------------------------------------------------------------------ setup
    def _planning_model(self, sim: MjSim, scene: int = 0):
        spec = sim.spec if scene == 0 else sim._specs[scene]
        if spec is None:
            return sim.scenes[scene]
        spec = spec.copy()
        for term, _, _ in self.config.terms:
            term.require(spec)
        return spec.compile()

    def _bounds(self):
        c, m = self.config, self.model
        if c.ctrl_range is not None:
            if c.ctrl_range.shape != (self.nu, 2):
                raise ValueError(f"ctrl_range: expected ({self.nu}, 2), got {c.ctrl_range.shape}")
            return c.ctrl_range[:, 0].copy(), c.ctrl_range[:, 1].copy()
        lo, hi = np.full(self.nu, -np.inf), np.full(self.nu, np.inf)
        if c.control_map is None:
            lim = np.asarray(m.actuator_ctrllimited, dtype=bool)
            lo[lim], hi[lim] = m.actuator_ctrlrange[lim, 0], m.actuator_ctrlrange[lim, 1]
        return lo, hi

    def _model_k(self, k: int):
        """The planning model with a k-times longer timestep (cached)."""
        if k not in self._models:
            mk = copy.copy(self.model)
            mk.opt.timestep = self.model.opt.timestep * k
            self._models[k] = mk
        return self._models[k]

    def _row_models(self, mk, k: int, B: int, N: int, R: int):
        """The model of each of B * N * R rollouts (instance, candidate, replica): ``mk`` while the
        planner's worlds share one model, else replica r of instance b runs validation world
        b * R + r's rows (every candidate of an instance on the same R worlds, so their costs
        compare), its timestep times k."""
        val = self.sims["validation"]
        if self.sims["rollout"]._own is not None:
            raise ValueError("sims['rollout']: the planner reads per-world model rows from sims['validation'] "
                             "(one world per instance and replica); set them there")
        if val._own is None:
            return mk
        if self.config.backend != "cpu":
            raise ValueError("backend: per-world model rows (set_random / set_const / set_scene) need backend 'cpu'")
        rows = val.models
        if k != 1:
            rows = [copy.copy(r) for r in rows]
            for r in rows:
                r.opt.timestep = r.opt.timestep * k
        return [rows[b * R + r] for b in range(B) for _ in range(N) for r in range(R)]

    def _segments(self, stage: Optional[SimMPCStage]):
        """[(first fine step, end fine step, factor k), ...] of a stage over the horizon."""
        H, dt = self.config.horizon_steps, float(self.model.opt.timestep)
        if stage is None:
            return [(0, H, 1)]
        out, a = [], 0
        for frac, sdt in stage.segments():
            b = int(round(frac * H))
            k = 1 if sdt is None else int(round(sdt / dt))
            if sdt is not None and (k < 1 or abs(k * dt - sdt) > 1e-9 * max(sdt, dt)):
                raise ValueError(f"stages.dt: {sdt} s is not an integer multiple of the model's timestep {dt} s")
            if b > a:
                out.append((a, b, k))
            a = b
        return out

    # --------------------------------------------------------------- rollouts
    def _ref_window(self, t0: int) -> np.ndarray:
        start = t0 - self.ctrl_ref_offset
        idx = np.clip(np.arange(start, start + self.config.horizon_steps), 0, self.ctrl_ref.shape[1] - 1)
        return self.ctrl_ref[:, idx]

    def _commands_of(self, nodes: np.ndarray, t0: int) -> np.ndarray:
        """(B, N, H, nu) clipped commands of candidate nodes (B, N, K, nu)."""
        U = self._ref_window(t0)[:, None] + np.einsum("hk,bnkc->bnhc", self.basis, nodes)
        return np.clip(U, self.lo, self.hi, out=U)

    def _evaluate(self, nodes: np.ndarray, x0r: np.ndarray, warm: np.ndarray, t0: int, segs, ends: bool = False):
        """(B, N) replica-averaged costs of candidate nodes (B, N, K, nu) from x0r (B, R, nstate);
        with ``ends``, also the rollouts' final qpos (B, N, nq), replica-averaged."""
        return self._evaluate_commands(self._commands_of(nodes, t0), x0r, warm, t0, segs, ends)

    def _evaluate_commands(self, U, x0r, warm, t0, segs=None, ends=False):
        """_evaluate of clipped commands U (B, N, H, nu) (or (B, H, nu): one candidate, costs (B,))."""
        if U.ndim == 3:
            return self._evaluate_commands(U[:, None], x0r, warm, t0, segs, ends)[:, 0]
        segs = segs or [(0, self.config.horizon_steps, 1)]
        B, N = U.shape[:2]
        R = x0r.shape[1]
        n = B * N * R
        x = np.broadcast_to(x0r[:, None], (B, N, R, x0r.shape[-1])).reshape(n, -1)
        w = np.broadcast_to(warm[:, None, None], (B, N, R, warm.shape[-1])).reshape(n, -1)
        lay, m = self._layout, self.model
        total = np.zeros(n)
        if self.config.control_map is not None:
            segs_data = self._mapped_rollouts(U, x, w, t0, R, segs)
        else:
            segs_data = self._plain_rollouts(U, x, w, segs, R)
        for j, (model, state, sens, ctrl, f, k) in enumerate(segs_data):
            batch = RolloutBatch(model=model, qpos=state[..., lay["qpos"]:lay["qpos"] + m.nq],
                                 qvel=state[..., lay["qvel"]:lay["qvel"] + m.nv], ctrl=ctrl, sensordata=sens,
                                 clock=t0 + f + k, ctrl_clock=t0 + f, t0=t0)
            last = j == len(segs_data) - 1
            for term, run, term_scale in self.config.terms:
                wrow = run * k.astype(np.float64)
                if last:
                    wrow[-1] = self.config.terminal_scale if term_scale is None else term_scale
                total += term.cost(batch) @ wrow
        costs = total.reshape(B, N, R).mean(axis=2)
        costs = np.where(np.isfinite(costs), costs, np.inf)
        if ends:
            state = segs_data[-1][1]
            q_end = state[:, -1, lay["qpos"]:lay["qpos"] + m.nq].reshape(B, N, R, m.nq).mean(axis=2)
            return costs, q_end
        return costs

    def _plain_rollouts(self, U, x, w, segs, R):
        B, N, _, nu = U.shape
        n = B * N * R
        out = []
        for a, b, k in segs:
            f = np.arange(a, b, k)
            ctrl = np.broadcast_to(U[:, :, None, a:b:k], (B, N, R, len(f), nu)).reshape(n, len(f), nu)
            state, sens = self.engine.run(self._row_models(self._model_k(k), k, B, N, R), x, w, ctrl)
            x = state[:, -1].copy()  # the next segment starts here (the buffers are reused)
            out.append((self._model_k(k), state, sens, ctrl, f, np.full(len(f), k)))
        return out

    def _mapped_rollouts(self, U, x, w, t0, R, segs):
        """Rollouts through the control map: ``control_map(sim, clock)`` is called before every
        (coarse) step with the rollout worlds' state there (a :class:`MapWorlds` view, as execute
        calls it), one mujoco.rollout call per step (the map runs in Python)."""
        c, m, lay = self.config, self.model, self._layout
        B, N, _, nc = U.shape
        n = B * N * R
        cmds = np.broadcast_to(U[:, :, None], (B, N, R) + U.shape[2:]).reshape(n, -1, nc)
        t_, q_, v_, a_ = (slice(lay[f], lay[f] + size) for f, size in
                          (("time", 1), ("qpos", m.nq), ("qvel", m.nv), ("act", m.na)))
        out, row = [], 0
        for a, b, k in segs:
            f = np.arange(a, b, k)
            mk = self._model_k(k)
            mrows = self._row_models(mk, k, B, N, R)
            states = np.empty((n, len(f), lay["size"]))
            sens, ctrl = np.empty((n, len(f), m.nsensordata)), np.empty((n, len(f), m.nu))
            for i, step in enumerate(f):
                ctrl[:, i] = map_commands(c.control_map, m, mrows, x[:, t_], x[:, q_], x[:, v_], x[:, a_],
                                          cmds[:, step], clock_of(t0 + int(step), row, int(k)))
                st, sd = self.engine.run(mrows, x, w, ctrl[:, i:i + 1])
                states[:, i], sens[:, i] = st[:, 0], sd[:, 0]
                x = st[:, 0].copy()
                row += 1
            out.append((mk, states, sens, ctrl, f, np.full(len(f), k)))
        return out

    def _replicas(self, x0: np.ndarray) -> np.ndarray:
        """(B, R, nstate) start states: each replica's qpos / qvel perturbed by qpos_std / qvel_std."""
        import mujoco

        c, m, lay = self.config, self.model, self._layout
        x = np.repeat(x0[:, None], c.num_replicas, axis=1)
        if np.any(np.asarray(c.qpos_std) > 0) or np.any(np.asarray(c.qvel_std) > 0):
            qs = np.broadcast_to(np.asarray(c.qpos_std, dtype=np.float64), (m.nq,))
            vs = np.broadcast_to(np.asarray(c.qvel_std, dtype=np.float64), (m.nv,))
            x[..., lay["qpos"]:lay["qpos"] + m.nq] += self.rng.standard_normal(x.shape[:2] + (m.nq,)) * qs
            x[..., lay["qvel"]:lay["qvel"] + m.nv] += self.rng.standard_normal(x.shape[:2] + (m.nv,)) * vs
            for row in x.reshape(-1, x.shape[-1]):
                q = row[lay["qpos"]:lay["qpos"] + m.nq].copy()
                mujoco.mj_normalizeQuat(m, q)
                row[lay["qpos"]:lay["qpos"] + m.nq] = q
        return x

    def _settle(self, x0: np.ndarray, warm: np.ndarray) -> np.ndarray:
        s = self.config.settle_steps
        if s == 0:
            return x0
        state, _ = self.engine.run(self.model, x0, warm, np.zeros((x0.shape[0], s, self.model.nu)))
        return state[:, -1].copy()

    # ------------------------------------------------------------------ plan
    def _shift(self, t0: int) -> None:
        if self._t_prev is None or t0 <= self._t_prev:
            return
        c, delta = self.config, t0 - self._t_prev
        K = c.num_nodes
        if isinstance(c.interpolation, np.ndarray):
            j = np.minimum(np.arange(K) + int(round(delta / c.node_steps)), K - 1)
            self.nodes = self.nodes[:, j].copy()
        else:
            W = basis_at(c.interpolation, delta + c.node_steps * np.arange(K), c.node_steps, K)
            self.nodes = np.einsum("jk,bkc->bjc", W, self.nodes)

    def _schedule(self) -> list:
        c = self.config
        per = [st for st in self.stages for _ in range(st.iters)]
        n = c.init_iterations if (self.num_plans == 0 and c.init_iterations > 0) else len(per)
        if n <= len(per):
            return per[len(per) - n:]
        return [per[0]] * (n - len(per)) + per

    def _auto_stages(self, x0r, warm, t0) -> None:
        """Pick the coarse stage of the first plan (config.stages None), see SimMPCConfig.stages."""
        c, H, dt = self.config, self.config.horizon_steps, float(self.model.opt.timestep)
        rng = np.random.default_rng([c.seed, 1])  # its own stream: the plans' draws stay the same
        eps = rng.standard_normal((c.batch_size, c.num_samples - 1) + self.nodes.shape[1:])
        cands = self.nodes[:, None] + eps * self._sigma[None, None]
        fine, q_fine = self._evaluate(cands, x0r, warm, t0, [(0, H, 1)], ends=True)
        ok = np.isfinite(fine) & np.all(np.isfinite(q_fine), axis=-1)
        if not ok.any(axis=1).all():
            self.stages = [SimMPCStage(c.max_iterations)]
            return
        # Spreads of the fine draws: their costs' range and their end positions' mean distance
        # from the mean end position.
        c_spread = np.array([np.ptp(f[o]) for f, o in zip(fine, ok)])
        q_spread = np.array([np.mean(np.linalg.norm(q[o] - q[o].mean(0), axis=-1)) for q, o in zip(q_fine, ok)])
        picked = None
        for k in _AUTO_FACTORS:
            if H - int(round(0.25 * H)) < k:
                continue
            stage = SimMPCStage(c.max_iterations, [(0.25, None), (1.0, k * dt)])
            coarse, q_coarse = self._evaluate(cands, x0r, warm, t0, self._segments(stage), ends=True)
            c_dev = np.array([np.mean(np.abs(cc[o] - f[o])) for cc, f, o in zip(coarse, fine, ok)])
            q_dev = np.array([np.mean(np.linalg.norm(qc[o] - qf[o], axis=-1))
                              for qc, qf, o in zip(q_coarse, q_fine, ok)])
            # The coarse draws must end where the fine ones do and cost what they cost.
            if np.all(c_dev <= _AUTO_TOLERANCE * c_spread) and np.all(q_dev <= _AUTO_TOLERANCE * q_spread) \
                    and np.all(c_spread > 0) and np.all(q_spread > 0):
                picked = stage
                break
        self.stages = [picked or SimMPCStage(c.max_iterations)]

    def plan(self, data, t0: int):
        """Refine every instance's plan from its state at sim step ``t0``; return its next commands.

        Args:
            data: each instance's state: a ``mujoco.MjData`` (batch_size 1), a list of batch_size
                MjData, an :class:`MjSim` with batch_size worlds, or a mapping of (batch_size, ...)
                arrays qpos, qvel and optional time, act, qacc_warmstart.
            t0: the state's sim step, which indexes ctrl_ref and the terms' references.

        Returns:
            (commands, infos): commands (ctrl_steps, batch_size, nu) before any control map, in a
            buffer the next call reuses (copy it to keep it); infos, one dict per instance: t0,
            iterations (run), plan_cost (the executed plan's cost at the fine step), best_cost (the
            cheapest candidate scored at the fine step), executed ("plan" | "best_draw"),
            temperature (last iteration's), std_scale, stages, rollout_steps (simulated this plan),
            wall_s (the plan's wall time), rollout_s (of it, inside mujoco.rollout), and per_iteration:
            [{iteration, dt, plan_cost, best_cost, mean_cost, temperature, std}] (costs of that
            iteration's candidates; plan_cost at the fine step).
        """
        if isinstance(t0, bool) or not isinstance(t0, (int, np.integer)) or t0 < 0:
            raise ValueError(f"t0: expected an integer sim step >= 0, got {t0!r}")
        t0 = int(t0)
        tic, steps0, roll0 = time.perf_counter(), self.engine.steps, self.engine.rollout_s
        c, B = self.config, self.config.batch_size
        x0, warm = as_states(self.model, data, B, self._scratch)
        x0 = self._settle(x0, warm)
        x0r = self._replicas(x0)
        if self.ilqr is not None:
            if self.sims["validation"]._own is not None or self.sims["rollout"]._own is not None:
                raise ValueError("planner: 'ilqr' linearises the first scene's model; per-world model rows "
                                 "(set_random / set_const / set_scene) need 'mppi' or 'cem'")
            return self._plan_ilqr(x0, warm, t0, tic, steps0, roll0)
        self._shift(t0)
        if self.stages is None:
            self._auto_stages(x0r, warm, t0)
        fine_segs = [(0, c.horizon_steps, 1)]
        schedule = self._schedule()
        carry = c.std_range is not None and len(schedule) == 1  # a one-iteration plan starts from the last refit
        std = (self._scale[:, None, None] if carry else np.ones((B, 1, 1))) * self._sigma[None]
        best_cost, best_nodes = np.full(B, np.inf), self.nodes.copy()
        per_iter = [[] for _ in range(B)]
        stall, stopped = np.zeros(B, dtype=int), np.zeros(B, dtype=bool)
        temperature = np.zeros(B)
        free = self._free[None, :, None]
        n_draw = c.num_samples - 1
        iters_run = np.zeros(B, dtype=int)
        for i, stage in enumerate(schedule):
            segs = self._segments(stage)
            is_fine = segs == fine_segs
            eps = self.rng.standard_normal((B, n_draw) + self.nodes.shape[1:])
            d = np.maximum(c.min_std, c.noise_decay ** i * std) * free
            if i == 0 and c.wide_ratio > 0:
                eps[:, :int(math.ceil(c.wide_ratio * n_draw - 1e-9))] *= c.wide_scale
            cands = self.nodes[:, None] + eps * d[:, None]
            if is_fine:  # the plan and the draws in one rollout call (a rollout does not depend on its batch)
                both = self._evaluate(np.concatenate([self.nodes[:, None], cands], axis=1), x0r, warm, t0, segs)
                plan_cost, costs = both[:, 0], both[:, 1:]
            else:  # coarse: the plan rides along with the draws (same metric for the elites); the plan
                # and the cheapest draw are scored at the fine step for the best-plan bookkeeping
                both = self._evaluate(np.concatenate([self.nodes[:, None], cands], axis=1), x0r, warm, t0, segs)
                plan_coarse, costs = both[:, 0], both[:, 1:]
                jb = np.argmin(costs, axis=1)
                fine2 = self._evaluate(np.stack([self.nodes, cands[np.arange(B), jb]], axis=1), x0r, warm, t0,
                                       fine_segs)
                plan_cost = fine2[:, 0]
            better = plan_cost < best_cost
            best_cost[better], best_nodes[better] = plan_cost[better], self.nodes[better]
            for b in range(B):
                if stopped[b]:
                    continue
                iters_run[b] += 1
                if is_fine:
                    allc = np.concatenate([self.nodes[b][None], cands[b]])
                    allcost = np.concatenate([[plan_cost[b]], costs[b]])
                    j = int(np.argmin(costs[b]))
                    if costs[b, j] < best_cost[b]:
                        best_cost[b], best_nodes[b] = costs[b, j], cands[b, j]
                else:
                    allc = np.concatenate([self.nodes[b][None], cands[b]])
                    allcost = np.concatenate([[plan_coarse[b]], costs[b]])
                    if fine2[b, 1] < best_cost[b]:
                        best_cost[b], best_nodes[b] = fine2[b, 1], cands[b, jb[b]]
                upd = elite_update(allc, allcost, c.elite_ratio, c.planner)
                temperature[b] = upd["temperature"]
                std[b] = ((1.0 - c.std_gamma) * std[b] + c.std_gamma * refit_std(allc, upd)) * self._free[:, None]
                self.nodes[b] = upd["mean"]
                fin = costs[b][np.isfinite(costs[b])]
                per_iter[b].append(dict(iteration=i, dt=stage.dt if stage is not None else None,
                                        plan_cost=float(plan_cost[b]), best_cost=float(np.min(costs[b])),
                                        mean_cost=float(fin.mean()) if fin.size else math.inf,
                                        temperature=upd["temperature"],
                                        std=float(np.sqrt(np.mean(std[b][self._free] ** 2)))))
                ref_cost = plan_cost[b] if is_fine else plan_coarse[b]  # the stage's own metric
                rel = (ref_cost - np.min(costs[b])) / max(abs(ref_cost), 1e-12)
                stall[b] = stall[b] + 1 if rel < c.min_improvement else 0
                stopped[b] = stall[b] >= c.patience
            if stopped.all():
                break
        final = self._evaluate(self.nodes[:, None], x0r, warm, t0, fine_segs)[:, 0]
        infos = []
        for b in range(B):
            executed = "plan"
            if final[b] < best_cost[b]:
                best_cost[b], best_nodes[b] = final[b], self.nodes[b]
            elif final[b] > best_cost[b] + c.best_draw_margin * temperature[b]:
                self.nodes[b] = best_nodes[b]
                executed, final[b] = "best_draw", best_cost[b]
            if carry:
                ratio = math.sqrt(np.mean(std[b][self._free] ** 2)
                                  / max(np.mean(self._sigma[self._free] ** 2), 1e-300))
                self._scale[b] = float(np.clip(ratio, *c.std_range))
            infos.append(dict(t0=t0, iterations=int(iters_run[b]), plan_cost=float(final[b]),
                              best_cost=float(best_cost[b]), executed=executed,
                              temperature=float(temperature[b]), std_scale=float(self._scale[b]),
                              stages=list(self.stages), per_iteration=per_iter[b]))
        self.plan_commands = self._commands_of(self.nodes[:, None], t0)[:, 0]
        return self._finish(infos, t0, tic, steps0, roll0)

    def _plan_ilqr(self, x0, warm, t0, tic, steps0, roll0):
        infos = self.ilqr.plan(self, x0, warm, t0)
        x0r = x0[:, None]
        final = self._evaluate_commands(self.plan_commands, x0r, warm, t0)
        for b, info in enumerate(infos):
            info.update(plan_cost=float(final[b]), best_cost=float(final[b]), temperature=0.0,
                        std_scale=float(self._scale[b]))
        return self._finish(infos, t0, tic, steps0, roll0)

    def _finish(self, infos, t0, tic, steps0, roll0):
        c = self.config
        self._commands[:] = np.swapaxes(self.plan_commands[:, :c.ctrl_steps], 0, 1)
        self._t_prev = t0
        self.num_plans += 1
        wall, steps = time.perf_counter() - tic, self.engine.steps - steps0
        for info in infos:
            info.update(rollout_steps=int(steps), wall_s=wall, rollout_s=self.engine.rollout_s - roll0)
        return self._commands, infos

    # ---------------------------------------------------------------- as a Task
    def resolve(self, var_values, context) -> None:
        """Keep each instance's state (its first world's time, qpos, qvel, act) and the CLOCK step."""
        super().resolve(var_values, context)
        c, m = self.config, self.model
        n, per = int(context[SimContext.NUM_INSTANCES]), int(context[SimContext.WORLDS_PER_INSTANCE])
        if n != c.batch_size:
            raise ValueError(f"context: NUM_INSTANCES {n} differs from the config's batch_size {c.batch_size}")
        take = lambda key, k: as_array(context[key]).reshape(n * per, k)[::per]  # noqa: E731
        state = {"qpos": take(SimContext.QPOS, m.nq), "qvel": take(SimContext.QVEL, m.nv)}
        if SimContext.TIME in context:
            state["time"] = as_array(context[SimContext.TIME]).reshape(-1)[::per]
        if m.na and SimContext.ACT in context:
            state["act"] = take(SimContext.ACT, m.na)
        if var_values is not None:
            state.update({k: np.asarray(v, dtype=np.float64) for k, v in var_values.items()})
        self._task_state = state
        self._task_t0 = int(as_array(context.get(SimContext.CLOCK, [0])).reshape(-1)[0])

    def compute_weighted_cost(self, var_values, out_cost) -> None:
        """Plan from the resolved states and add each instance's plan_cost to out_cost (batch_size,)."""
        if getattr(self, "_task_state", None) is None:
            raise ValueError("SimMPC: resolve(var_values, context) first")
        _, infos = self.plan(self._task_state, self._task_t0)
        as_array(out_cost)[...] += np.array([i["plan_cost"] for i in infos])

    def reset(self) -> None:
        """Forget the plans: zero node offsets, no shift, the configured noise (the seed's stream
        continues)."""
        self.nodes[:] = 0.0
        self._t_prev = None
        if self.ilqr is not None:
            self.ilqr.delta[:] = 0.0
            self.ilqr.t_prev = None
        self._scale[:] = 1.0

    # ---------------------------------------------------------------- execute
    def execute(self, sim: MjSim, num_steps: int, callback: Optional[Callable[[List[dict]], None]] = None,
                t0: int = 0):
        """Run the planner in closed loop on ``sim`` (one world per instance) for ``num_steps`` steps.

        Every control period plans from sim's state, then steps sim through the commands (mapped by
        the config's control map, clipped to the actuators' ctrlrange) and calls ``callback`` with
        every instance's plan info. ``t0``: the sim step of sim's current state.

        Returns (rows, plans): per instance, rows {time (num_steps,), qpos (num_steps, nq), qvel
        (num_steps, nv), ctrl (num_steps, nu), sensordata (num_steps, nsensordata)}, each after the
        step (sensordata recomputed there), and its list of plan infos (one per control period).
        """
        import mujoco

        c, B = self.config, self.config.batch_size
        if not isinstance(sim, MjSim) or sim.nworld != B or sim.substeps != 1:
            raise ValueError(f"sim: expected an MjSim with batch_size = {B} worlds and substeps 1")
        if isinstance(num_steps, bool) or not isinstance(num_steps, (int, np.integer)) or num_steps < 1:
            raise ValueError(f"num_steps: expected an integer >= 1, got {num_steps!r}")
        m = sim.mjm
        if m.nq != self.model.nq or m.nv != self.model.nv or m.nu != self.model.nu:
            raise ValueError("sim: its model's sizes (nq, nv, nu) differ from the planning model's")
        lim = np.asarray(m.actuator_ctrllimited, dtype=bool)
        alo = np.where(lim, m.actuator_ctrlrange[:, 0], -np.inf)
        ahi = np.where(lim, m.actuator_ctrlrange[:, 1], np.inf)
        rows = [dict(time=np.empty(num_steps), qpos=np.empty((num_steps, m.nq)), qvel=np.empty((num_steps, m.nv)),
                     ctrl=np.empty((num_steps, m.nu)), sensordata=np.empty((num_steps, m.nsensordata)))
                for _ in range(B)]
        plans = [[] for _ in range(B)]
        step = 0
        while step < num_steps:
            commands, infos = self.plan(sim, t0 + step)
            for b in range(B):
                plans[b].append(infos[b])
            if callback is not None:
                callback(infos)
            for j in range(min(c.ctrl_steps, num_steps - step)):
                cmd = commands[j]
                if c.control_map is not None:  # the same call the rollouts make before this step
                    ds = sim.data
                    cmd = map_commands(c.control_map, m, sim.models, [d.time for d in ds], [d.qpos for d in ds],
                                       [d.qvel for d in ds], [d.act for d in ds], cmd, clock_of(t0 + step, j, 1))
                for b, (mb, d) in enumerate(zip(sim.models, sim.data)):
                    d.ctrl[:] = np.clip(cmd[b], alo, ahi)
                    mujoco.mj_step(mb, d)  # the world's own model rows (set_random / set_scene)
                    mujoco.mj_forward(mb, d)
                    r = rows[b]
                    r["time"][step], r["qpos"][step], r["qvel"][step] = d.time, d.qpos, d.qvel
                    r["ctrl"][step], r["sensordata"][step] = d.ctrl, d.sensordata
                step += 1
        return rows, plans

    def close(self) -> None:
        """Stop the rollout threads (also done when the planner is collected)."""
        self.engine.close()

    def __del__(self):
        try:
            self.engine.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

