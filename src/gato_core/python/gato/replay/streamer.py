"""The streaming replay's state machine (:class:`Streamer`): takes a bag's messages in log-time
order, holds each tick until its recorded outputs have been read (at most
:data:`LOOKAHEAD_MAX_S` of log time) and re-solves it, runs the model-vs-reality interval of each
pair of consecutive joint states, and keeps the per-tick scalars in a
:class:`gato.replay.rows.Rows` and only the worst-tick candidates whole
(:mod:`gato.replay.stream` drives it over a bag)."""
from __future__ import annotations

import bisect
import heapq

import numpy as np

from ..core import messages
from ..core.messages import Skips
from .gaps import TickGaps
from .prediction import Predictor, Residuals
from .recording import TOPICS, stamp_ns, tick_from_solve_input
from .resolve import TickReplayer
from .stream_run import StreamRun, tick_rows


#: How far [s of log time] a joint state is held before its model interval is computed (the
#: command that acted is logged around it; states logged out of stamp order within this window
#: are sorted).
LOOKAHEAD_S = 1.0
#: The longest a tick or joint state waits [s of log time] for what it needs (a tick: its
#: recorded command and step result; a state in command mode: a command at or after it): a
#: recorder starved on a loaded machine logs them late, a lost message never. Bounds the memory
#: of the look-ahead.
LOOKAHEAD_MAX_S = 10.0


class _TopK:
    """The ``k`` items with the largest keys (ties: the earlier pushed wins)."""

    def __init__(self, k: int):
        self.k, self.h = k, []

    def push(self, key, i: int, payload):
        item = (key, -i, payload)
        if self.k <= 0:
            return
        if len(self.h) < self.k:
            heapq.heappush(self.h, item)
        elif (key, -i) > self.h[0][:2]:
            heapq.heapreplace(self.h, item)

    def items(self) -> dict:
        return {-ni: p for _, ni, p in self.h}

    def ranked(self) -> list:
        """[(key, i, payload)], largest key first (ties: the earlier i first)."""
        return [(k, -ni, p) for k, ni, p in sorted(self.h, key=lambda e: (e[0], e[1]), reverse=True)]


class Streamer:
    """One streamed replay of a bag (:mod:`gato.replay.stream`): :meth:`feed` each message in
    log-time order, then :meth:`finish` returns the :class:`gato.replay.stream_run.StreamRun`."""

    def __init__(self, bs, *, robot, urdf, torque_source, tol, worst, progress, max_gap_s=0.5):
        if torque_source not in ("auto", "effort", "command"):
            raise ValueError(f"torque_source: expected 'auto', 'effort' or 'command', got {torque_source!r}")
        self.bs, self.robot_arg, self.urdf_arg = bs, robot, urdf
        self.torque_source, self.tol, self.worst, self.progress = torque_source, tol, worst, progress
        self.max_gap_ns = int(max_gap_s * 1e9)
        self.max_gap_s = max_gap_s
        self.la = int(LOOKAHEAD_S * 1e9)
        self.la_max = int(LOOKAHEAD_MAX_S * 1e9)
        self.now = None
        self.cmd_max = None                   # the latest command stamp seen
        self.has = with_messages(bs)          # a tick waits only for outputs the bag has
        self.run = StreamRun(storage=bs.storage)
        self.problems = self.run.problems
        self.started = False
        self.early: list = []                 # (topic, t, msg) before the first configured tick
        self.cfg_prev = None
        self.cfg_text = None                  # the config_json text cfg_prev was parsed from
        self.seen_ticks: set = set()
        self.pending_ticks: list = []         # [(stamp, seq, log_t, Tick)] sorted by stamp
        self.seen_states: set = set()
        self.pending_states: list = []        # [(stamp, seq, log_t, x, effort)]
        self.seq = 0
        self.commands: dict = {}              # stamp -> (u, source)
        self.cmd_t: list = []                 # sorted stamps of self.commands
        self.steps: dict = {}
        self.plans: dict = {}
        self.skips = Skips()                  # joint states and EE references refused (gato.core.messages)
        self.state_bounds = None              # plausible [q; qd] in the solver's joint order, once known
        self.newest_state = None              # stamp of the newest joint state taken
        self.rows = None                      # per-tick outputs (tick_rows), once the controller is known
        self.nan_u = None
        self.top_du = _TopK(worst)
        self.top_norm = _TopK(2 * worst)
        self.await_norm: dict = {}            # tick stamp -> (i, Tick, TickResult) awaiting its interval
        self.norm_at: dict = {}               # interval start stamp -> norm, awaiting its tick
        self.last_interval_start = None
        self.last_tick_stamp = None
        # model vs reality
        self.pred = None
        self.prev_state = None
        self.use_eff = None
        self.res = None                       # Residuals, once the joints are known
        self.n_prune = 0
        self.p_skipped = 0
        self.resolver = None
        self.n_state = self.n_wrench = 0
        self.n_posture = self.n_posture_unknown = 0   # ticks with posture tables / without the fields
        self.ee = None         # EE tracking (gato.replay.tracking), from the first tick on
        self.t_range = (None, None)           # log-time range of the replayed part: progress fraction
        self.gaps = TickGaps(commands=TOPICS["command"] in self.has)
        # A window of a thinned bag re-solves silently from the key tick before it: messages logged
        # before ``report_from`` (log ns) only bring the controller up to the window's first tick.
        self.report_from = None

    # -------------------------------------------------------------- messages
    def feed(self, topic, t, m):
        if topic == TOPICS["reference"]:
            self._reference(m, t)
            return
        if self.report_from is not None and t < self.report_from:
            self._preroll(topic, t, m)
            return
        if not self.started:
            if topic == TOPICS["solve_input"]:
                tk = self._tick(m, t)
                if tk is not None:
                    self._start(m, tk)
                    for e in self.early:
                        self._msg(*e)
                    self.early = None
                    self._queue_tick(tk, t)
                return
            if topic in (TOPICS["step_result"], TOPICS["plan"]):
                self._msg(topic, t, m)
            else:
                self.early.append((topic, t, m))
            return
        self._msg(topic, t, m)
        self.now = t
        self._release(t)

    def _preroll(self, topic, t, m):
        """A message logged before the window, in a silent re-solve from an earlier key tick: the
        ticks, their commands (recorded u, no gap counting) and step results / plans (the
        iterations a budget-stopped solve did) are kept; joint states are not (the model-vs-reality
        intervals are the window's)."""
        if topic == TOPICS["solve_input"]:
            tk = self._tick(m, t)
            if tk is None:
                return
            tk.silent = True
            if not self.started:
                self._start(m, tk)
                for e in self.early:          # the commands logged before it (all the pre-roll keeps)
                    self._command(e[2], count=False)
                self.early = []
            self._queue_tick(tk, t)
        elif topic == TOPICS["command"]:
            if self.started:
                self._command(m, count=False)
            else:
                self.early.append((topic, t, m))
            return
        elif topic in (TOPICS["step_result"], TOPICS["plan"]):
            self._msg(topic, t, m)
        else:
            return
        if self.started:
            self.now = t
            self._release(t)

    def _msg(self, topic, t, m):
        if topic == TOPICS["solve_input"]:
            tk = self._tick(m, t)
            if tk is not None:
                self._queue_tick(tk, t)
        elif topic == TOPICS["command"]:
            self._command(m)
        elif topic == TOPICS["joint_states"]:
            self._state(m, t)
        elif topic == TOPICS["step_result"]:
            self.steps.setdefault(stamp_ns(m.header), m)
        elif topic == TOPICS["plan"]:
            self.plans.setdefault(stamp_ns(m.header), m)

    def _tick(self, m, t_log):
        """A Tick from a SolveInput (as recording._from_solve_inputs), or None (duplicate / unusable)."""
        s = stamp_ns(m.header)
        if s in self.seen_ticks:
            return None
        self.seen_ticks.add(s)
        text = str(m.config_json)
        if text and text == self.cfg_text:   # the same configuration as the previous tick: not parsed again
            tk, cfg = tick_from_solve_input(m, self.cfg_prev, self.problems, config=self.cfg_prev)
        else:
            n_problems = len(self.problems)
            tk, cfg = tick_from_solve_input(m, self.cfg_prev, self.problems)
            if tk is not None and self.cfg_prev is not None and cfg == self.cfg_prev:
                tk.config = cfg = self.cfg_prev  # one object per configuration: the replayer compares by identity
            if tk is not None and text and len(self.problems) == n_problems:   # parsed without a problem
                self.cfg_text = text
        self.cfg_prev = cfg
        return tk

    def _start(self, m, tk):
        from ..planners import controller_setup as setup
        from ..core.bsqp import robot_urdf

        self.started = True
        run = self.run
        run.config = tk.config
        robot = self.robot_arg
        if robot is not None and tk.config.get("robot") != robot:
            self.problems.append(f"--robot {robot} given, but the bag's controller ran {tk.config.get('robot')}: "
                                 "using the bag's")
        run.robot = tk.config.get("robot", robot)
        run.joint_names = list(m.joint_names)
        from pathlib import Path

        self.urdf = Path(self.urdf_arg) if self.urdf_arg else (robot_urdf(run.robot) if run.robot else None)
        run.urdf = self.urdf
        if self.urdf is not None and tk.config.get("urdf_sha256"):
            local = setup.urdf_sha256(self.urdf)
            run.urdf_matches = local == tk.config["urdf_sha256"]
        try:
            self.resolver = TickReplayer(tk.config, urdf=self.urdf)
        except ValueError as e:
            run.resolve_error = str(e)
        nu = self.resolver.nu if self.resolver is not None else 0
        self.rows = run.rows = tick_rows(nu)
        self.ee = _ee_tracking(self.urdf, run.robot)
        run.resolved = self.resolver is not None
        self.nan_u = np.full(nu, np.nan)
        if self.urdf is not None:
            try:
                self.pred = Predictor(self.urdf, run.joint_names)
            except ValueError as e:
                run.prediction_error = str(e)
            try:
                import pinocchio as pin

                self.state_bounds = messages.state_bounds(pin.buildModelFromUrdf(str(self.urdf)), run.joint_names)
            except Exception:  # noqa: BLE001 - joints the URDF lacks: no range check (the names are checked)
                self.state_bounds = None
        if self.torque_source == "command":
            self.use_eff = False

    def _command(self, m, count=True):
        s = stamp_ns(m.header)
        if s in self.commands:
            # a second command for a stamp (a hold answering a refused joint state that repeated the
            # last stamp) is not compared, but its tick number counts: it is no gap
            if count:
                self.gaps.see(int(m.tick), s, str(m.source))
            return
        names = list(m.joint_names)
        eff = np.asarray(m.effort, dtype=np.float64)
        jn = self.run.joint_names
        if len(names) != len(eff) or not all(j in names for j in jn):
            return
        self.commands[s] = (eff[[names.index(j) for j in jn]], str(m.source))
        bisect.insort(self.cmd_t, s)
        self.cmd_max = s if self.cmd_max is None else max(self.cmd_max, s)
        if count:
            self.gaps.see(int(m.tick), s, str(m.source))

    def _state(self, m, t_log):
        """A joint state, validated once (gato.core.messages: arrays, stamp, the controlled joints
        present, finite and plausible, not older than the newest one taken, the rules of the
        controller); a refused one is skipped and counted (summary ``skipped``)."""
        jn = self.run.joint_names
        try:
            s, names, pos, vel, eff = messages.joint_state_arrays(m, now_ns=t_log)
            x = messages.joint_vector(names, pos, vel, jn, self.state_bounds)
            if self.newest_state is not None and s < self.newest_state:
                raise messages.Rejected("order", f"JointState: stamp {s / 1e9:.3f} s is older than the newest "
                                        f"state's ({self.newest_state / 1e9:.3f} s)")
        except messages.Rejected as e:
            self.skips.reject(TOPICS["joint_states"], m, e)
            return
        if s in self.seen_states:
            return
        self.seen_states.add(s)
        self.newest_state = s
        sel = [names.index(j) for j in jn]
        e = eff[sel] if len(eff) == len(names) else np.full(len(sel), np.nan)
        self.seq += 1
        bisect.insort(self.pending_states, (s, self.seq, t_log, x, e))
        self.run.n_states += 1

    def _reference(self, m, t_log):
        """An EE reference window: not used (each tick carries its own), but validated like the
        controller does, so the report names the windows the controller refused."""
        try:
            messages.reference_window(m, now_ns=t_log)
        except messages.Rejected as e:
            self.skips.reject(TOPICS["reference"], m, e)

    def _queue_tick(self, tk, t_log):
        self.seq += 1
        bisect.insort(self.pending_ticks, (tk.stamp_ns, self.seq, t_log, tk))

    # -------------------------------------------------------------- processing
    def _release(self, now):
        """Process the held states and ticks that have what they need (or waited long enough), in
        stamp order; ``now``: the current log time (None: the end of the bag, everything)."""
        while self.pending_states and (now is None or self._state_ready(self.pending_states[0], now)):
            s, _, _, x, e = self.pending_states.pop(0)
            self._interval(s, x, e)
        while self.pending_ticks and (now is None or self._tick_ready(self.pending_ticks[0], now)):
            _, _, t_log, tk = self.pending_ticks.pop(0)
            self._solve(tk, t_log)
        self._prune()

    def _state_ready(self, item, now) -> bool:
        s, _, t_log, _, _ = item
        if now - t_log < self.la:
            return False
        if now - t_log >= self.la_max or self.use_eff or TOPICS["command"] not in self.has:
            return True
        prev = self.prev_state[0] if self.prev_state is not None else s
        return self.cmd_max is not None and self.cmd_max >= prev

    def _tick_ready(self, item, now) -> bool:
        s, _, t_log, _ = item
        if now - t_log >= self.la_max:
            return True
        if TOPICS["command"] in self.has and s not in self.commands:
            return False
        if TOPICS["step_result"] in self.has and s not in self.steps:
            return False
        return not (TOPICS["step_result"] not in self.has and TOPICS["plan"] in self.has and s not in self.plans)

    def _interval(self, s, x, e):
        prev, self.prev_state = self.prev_state, (s, x, e)
        if prev is None or self.pred is None:
            return
        s0, x0, _ = prev
        self.last_interval_start = s0
        k = int(bisect.bisect_right(self.cmd_t, s0)) - 1
        dt = (s - s0) / 1e9
        if self.use_eff is None:        # auto: efforts while every joint state carries them
            self.use_eff = bool(np.all(np.isfinite(e)))
        if self.use_eff and not np.all(np.isfinite(e)):
            if self.torque_source == "effort":
                self.p_skipped += 1
                self._no_norm(s0)
                return
            self.problems.append(f"model vs reality: the joint state at t={s / 1e9:.3f} s carries no effort: "
                                 "the controller's commands are the torque from there on")
            self.use_eff = False
        if not 0 < dt <= self.max_gap_s or (not self.use_eff and (k < 0 or (s0 - self.cmd_t[k]) / 1e9
                                                                  > self.max_gap_s)):
            self.p_skipped += 1
            self._no_norm(s0)
            return
        u = e if self.use_eff else np.asarray(self.commands[self.cmd_t[k]][0], dtype=np.float64)
        e_q, e_qd, tau = self.pred.interval(s0, x0, s, x, u)
        if self.res is None:
            self.res = Residuals(len(e_q))
        self.res.add(s0 / 1e9, e_q, e_qd, tau)
        norm = float(np.linalg.norm(tau))
        if s0 in self.await_norm:
            i, tk, r = self.await_norm.pop(s0)
            self.top_norm.push(norm, i, (tk, r))
        else:
            self.norm_at[s0] = norm

    def _no_norm(self, s0):
        self.await_norm.pop(s0, None)

    def _solve(self, tk, t_log):
        silent = getattr(tk, "silent", False)
        if not silent:
            self.gaps.solved(tk.tick)
        c = self.commands.get(tk.stamp_ns)
        if c is not None:
            tk.u_recorded, tk.source = c[0], c[1]
        st = self.steps.pop(tk.stamp_ns, None)
        plan = self.plans.pop(tk.stamp_ns, None)
        if st is not None:
            tk.xu_recorded = np.asarray(st.xu_best, dtype=np.float64)
            tk.wall_s = float(st.wall_s)
            tk.iterations = int(st.iterations)
            tk.budget_hit = bool(st.budget_hit)
        elif plan is not None:
            tk.xu_recorded = np.asarray(plan.xu, dtype=np.float64)
        if silent:   # before the window: re-solved only to reach its first tick's controller state
            if self.resolver is not None:
                self.resolver.step(tk)
            return
        i = self.rows.n
        self.last_tick_stamp = tk.stamp_ns
        if tk.solver_state is not None:
            self.n_state += 1
        self.n_wrench += tk.wrench_hypotheses is not None
        self.n_posture += tk.posture_q is not None
        self.n_posture_unknown += not tk.posture_recorded
        if self.ee is not None:
            self.ee.add(tk)
        wall_rec = tk.wall_s if tk.wall_s is not None else np.nan
        has_u = tk.u_recorded is not None
        if self.resolver is None:
            self.rows.add(tick=tk.tick, stamp_ns=tk.stamp_ns, wall_rec=wall_rec, has_u=has_u, u=self.nan_u,
                          du=np.nan, dplan=np.nan, dwarm=np.nan, dstate=np.nan, wall_s=np.nan, anchored=False,
                          state_anchored=False)
            return
        r = self.resolver.step(tk)
        self.rows.add(tick=tk.tick, stamp_ns=tk.stamp_ns, wall_rec=wall_rec, has_u=has_u, u=r.u, du=r.du,
                      dplan=r.dplan, dwarm=r.dwarm, dstate=r.dstate, wall_s=r.wall_s, anchored=r.anchored,
                      state_anchored=r.state_anchored)
        if self.worst > 0:
            du = -1.0 if np.isnan(r.du) else r.du
            if du > self.tol:
                self.top_du.push(du, i, (tk, r))
            if self.pred is not None:
                if tk.stamp_ns in self.norm_at:
                    self.top_norm.push(self.norm_at.pop(tk.stamp_ns), i, (tk, r))
                elif self.last_interval_start is None or tk.stamp_ns > self.last_interval_start:
                    self.await_norm[tk.stamp_ns] = (i, tk, r)
        if self.progress is not None:
            lo, hi = self.t_range
            self.progress(i + 1, (t_log - lo) / max(1, hi - lo) if lo is not None and hi is not None else 0.0)

    def _prune(self):
        """Forget what no later message can need (every 256 messages: the scans cost): commands
        older than the held messages by more than the hold gap and the longest wait, duplicate
        outputs and the dedup stamps of that age, residuals whose tick has passed."""
        self.n_prune += 1
        if self.n_prune % 256:
            return
        heads = [p[0] for p in (self.pending_states[:1] + self.pending_ticks[:1])]
        if self.prev_state is not None:
            heads.append(self.prev_state[0])
        if not heads:
            return
        lo = min(heads)
        cut = lo - self.max_gap_ns - self.la_max
        if self.cmd_t and self.cmd_t[0] < cut:
            n = bisect.bisect_left(self.cmd_t, cut)
            for s in self.cmd_t[:n - 1]:   # keep the latest older one: it may still be held
                del self.commands[s]
            del self.cmd_t[:n - 1]
        for d in (self.steps, self.plans):
            for s in [s for s in d if s < cut]:
                del d[s]
        for st in (self.seen_ticks, self.seen_states):
            for s in [s for s in st if s < cut]:
                st.discard(s)
        if self.last_tick_stamp is not None:
            for s in [s for s in self.norm_at if s < self.last_tick_stamp - self.la_max]:
                del self.norm_at[s]
        if self.last_interval_start is not None:
            for s in [s for s in self.await_norm if s < self.last_interval_start]:
                del self.await_norm[s]

    def finish(self):
        if self.started:
            self._release(None)
        run = self.run
        run.n_state, run.n_wrench = self.n_state, self.n_wrench
        run.n_posture, run.n_posture_unknown = self.n_posture, self.n_posture_unknown
        run.ee = None if getattr(self, "ee", None) is None else self.ee.summary()
        if self.resolver is not None:
            run.notes = self.resolver.finish()
            run.effort_limit = self.resolver.effort_limit
        run.gaps = self.gaps.finish()
        run.skipped = self.skips.as_dict()
        self.problems.extend(self.skips.notes())
        kept = self.top_du.items()
        kept.update(self.top_norm.items())
        run.kept = kept
        run.picks = self._picks()
        if self.pred is not None:
            res = self.res if self.res is not None else Residuals(len(run.joint_names))
            run.prediction = res.summary(run.joint_names, skipped=self.p_skipped, max_substep=self.pred.max_substep,
                                         torque_source="effort" if self.use_eff else "command")
        return run

    def _picks(self) -> list:
        """The worst ticks, as :func:`gato.replay._worst` picks them from whole columns: the largest
        command differences over the tolerance, then the largest model residuals."""
        picks, seen = [], set()
        for du, i, _ in self.top_du.ranked():
            if len(picks) == self.worst:
                return picks
            picks.append((i, f"replayed command differs by {du:.3g} N*m"))
            seen.add(i)
        for norm, i, _ in self.top_norm.ranked():
            if len(picks) == self.worst:
                break
            if i not in seen:
                picks.append((i, f"model residual {norm:.3g} N*m (largest misprediction)"))
                seen.add(i)
        return picks


def with_messages(bs) -> set:
    """The bag's topics that hold messages: where the index counts them, those it counts on (a
    topic recorded with no message, e.g. a filtered copy, is not waited for); else all."""
    return {t for t in bs.msgtypes if bs.listed.get(t, 1) > 0}


def _ee_tracking(urdf, robot):
    """The run's EE tracking (:class:`gato.replay.tracking.EETracking`), or None without a URDF
    or a registered robot."""
    from ..core.bsqp import robot_info
    from .tracking import EETracking

    if urdf is None or not robot:
        return None
    try:
        return EETracking(urdf, robot_info(robot)["ee_frame"])
    except (KeyError, ValueError):
        return None
