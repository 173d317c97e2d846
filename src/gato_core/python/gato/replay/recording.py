"""From a bag of the controller graph to the ticks a replay re-runs (ROS-free).

A :class:`Recording` holds, per MPC tick of the controller, what the tick solved from
and what it produced, in the SOLVER's joint order, plus every measured joint state and
every applied command (for the model-versus-reality comparison).

Where the inputs come from, best first:

1. ``/gato_controller/solve_input`` (gato_msgs/SolveInput, one per MPC tick): the
   measured state, the solver's reference, the warm start and the full configuration,
   exactly as the controller used them.
2. Reconstructed (a bag without SolveInput, e.g. an older recorder or a filtered
   ``ros2 bag record``): the configuration from ``/gato_recorder/parameter_snapshot``
   and later ``/parameter_events``; ticks from the stamped commands
   (``/gato_controller/command``, source mpc or fallback), the state from the joint
   state with the command's stamp, the reference window the controller would have
   used (the one stamped at the tick with reference_sync, else the latest logged
   before the command) and warm starts from the replay itself. Marked
   ``reconstructed``: a replay from these can differ from the recording where the
   rebuild guessed differently (which reference window, message loss).
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ..core import messages
from ..core.references import ReferenceWindow

__all__ = ["Tick", "Recording", "TOPICS", "REQUIRED_FIELDS", "load_recording", "stamp_ns"]

#: Topics of the controller graph a replay reads (the recorder's defaults).
TOPICS = {
    "joint_states": "/joint_states",
    "reference": "/ee_reference",
    "command": "/gato_controller/command",
    "solve_input": "/gato_controller/solve_input",
    "step_result": "/gato_controller/step_result",
    "plan": "/gato_controller/plan",
    "status": "/gato_controller/status",
    "snapshot": "/gato_recorder/parameter_snapshot",
    "parameter_events": "/parameter_events",
}

#: Fields the replay reads, per topic: a bag whose message version lacks one is reported.
REQUIRED_FIELDS = {
    TOPICS["joint_states"]: ["header", "name", "position", "velocity"],
    TOPICS["reference"]: ["header", "knot_dt", "positions"],
    TOPICS["command"]: ["header", "joint_names", "effort", "source", "tick"],
    TOPICS["solve_input"]: ["header", "tick", "joint_names", "x_measured", "reference", "warm_rows", "xu_warm",
                            "dt_elapsed", "budget_s", "reset", "config_json"],
    TOPICS["step_result"]: ["header", "u", "xu_best", "wall_s", "iterations", "budget_hit"],
    TOPICS["plan"]: ["header", "xu"],
}

CONTROLLER_NODE = "/gato_controller"


def stamp_ns(header) -> int:
    """A std_msgs/Header's stamp in integer nanoseconds."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


@dataclass
class Tick:
    """One MPC tick. Arrays in the solver's joint order.

    ``x`` (nx,) [q; qd] rad, rad/s; ``reference`` (6N,) [m]; ``xu_warm`` (rows, S) or None
    (reconstructed: the replay's own); ``dt_elapsed`` / ``budget_s`` [s] or None;
    ``config``: the controller configuration in force. Recorded outputs (None when the
    bag lacks them): ``u_recorded`` (nu,) N*m as commanded (clamped), ``source`` ("mpc",
    "fallback"), ``xu_recorded`` (S,) the winning plan, ``wall_s`` [s], ``iterations``,
    ``budget_hit``. ``solver_state`` (B, K) the solver state the tick started from
    (:meth:`gato.BSQP.get_solver_state`) and the controller's ``capped_out`` /
    ``force_reseed`` flags, or None when the bag does not carry them (an older gato).
    ``wrench_hypotheses`` (B, 6) the external wrenches the tick solved under (world axes at
    the EE frame origin [N, N*m], ``hypotheses=estimator``), or None (no wrench hypotheses,
    or a bag of an older gato). ``orientation_weight`` [1/rad^2]: the EE orientation weight the
    tick solved with (slots [3:6] of ``reference`` the target rotation vectors; issue 30), 0 =
    position only (and bags of older gatos). ``posture_q`` / ``posture_weight`` (rows, nq) [rad,
    1/rad^2]: the joint posture targets and weights the tick solved with (rows N per knot, or 1:
    a joint trajectory or joint hold of the controller node, issue 31), None when its posture
    term was off; ``posture_recorded`` False when the bag's SolveInput has no posture fields (an
    older gato, or a reconstructed tick: whether it tracked joint targets is not known).
    """

    stamp_ns: int
    tick: int
    x: np.ndarray
    reference: np.ndarray
    xu_warm: np.ndarray | None
    dt_elapsed: float | None
    budget_s: float | None
    reset: bool
    config: dict
    u_recorded: np.ndarray | None = None
    source: str = ""
    xu_recorded: np.ndarray | None = None
    wall_s: float | None = None
    iterations: int | None = None
    budget_hit: bool = False
    solver_state: np.ndarray | None = None
    capped_out: bool = False
    force_reseed: bool = False
    wrench_hypotheses: np.ndarray | None = None
    orientation_weight: float = 0.0
    posture_q: np.ndarray | None = None
    posture_weight: np.ndarray | None = None
    posture_recorded: bool = True

    def solver_reference(self, dt: float):
        """The reference as the controller handed it to the solver: the flat (6N,) ``reference``
        for a position-only tick (as before issue 30), else a ReferenceWindow on the solver's
        grid (``dt`` [s]) with the recorded rotation vectors and ``orientation_weight``, so the
        replay's solver takes the same orientation weights (MPCController's window path)."""
        if not self.orientation_weight > 0:
            return self.reference
        a = self.reference.reshape(-1, 6)
        return ReferenceWindow(self.stamp_ns, float(dt), a[:, :3].copy(), orientations=a[:, 3:].copy(),
                               orientation_weight=self.orientation_weight)


@dataclass
class Recording:
    """What a bag holds for a replay.

    ``joint_names``: solver order. ``state_t_ns`` (T,) and ``states`` (T, nx): every
    distinct measured joint state (solver order); ``efforts`` (T, nv) the joint states'
    effort field [N*m] (NaN rows where absent). ``commands``: {stamp_ns: (effort (nu,)
    solver order N*m, source)} for every command (MPC, fallback and hold). ``problems``:
    what was missing or odd, in words.
    """

    ticks: list
    joint_names: list
    state_t_ns: np.ndarray
    states: np.ndarray
    commands: dict
    config: dict | None
    reconstructed: bool
    problems: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)   # invalid messages skipped (gato.core.messages.Skips.as_dict)
    robot: str | None = None
    efforts: np.ndarray | None = None


def _msgs(bag, key):
    return bag.messages.get(TOPICS[key], [])


def _param_value(v):
    """rcl_interfaces/ParameterValue -> Python value (None for PARAMETER_NOT_SET)."""
    t = int(v.type)
    table = {1: "bool_value", 2: "integer_value", 3: "double_value", 4: "string_value", 5: "byte_array_value",
             6: "bool_array_value", 7: "integer_array_value", 8: "double_array_value", 9: "string_array_value"}
    name = table.get(t)
    if name is None:
        return None
    val = getattr(v, name)
    if isinstance(val, np.ndarray):
        val = val.tolist()
    elif isinstance(val, (list, tuple)):
        val = list(val)
    elif isinstance(val, np.generic):
        val = val.item()
    return val


def _snapshots(bag, node: str) -> list:
    """[(log_ns, {name: value})]: the full parameter snapshots of ``node`` and every later
    change from /parameter_events, in log order (each entry a full configuration)."""
    events = [(t, m, True) for t, m in _msgs(bag, "snapshot")]
    events += [(t, m, False) for t, m in _msgs(bag, "parameter_events")]
    events.sort(key=lambda e: e[0])
    out, cur = [], None
    for t, m, full in events:
        if str(getattr(m, "node", "")) != node:
            continue
        vals = {p.name: _param_value(p.value) for p in list(m.new_parameters) + list(m.changed_parameters)}
        if full:
            cur = dict(vals)
        elif cur is None:
            continue          # a change before any snapshot: nothing to apply it to
        else:
            cur = {**cur, **vals}
        out.append((t, dict(cur)))
    return out


def _state_table(bag, joint_names, problems, skips=None, bounds=None):
    """(t_ns (T,), x (T, nx), effort (T, nv)) of the distinct joint states, solver order;
    effort rows are NaN where the message carried no (complete) effort array. Each message is
    validated once (gato.core.messages: arrays, stamp, the joints present, finite, within
    ``bounds``, not older than the newest state taken); a refused one is counted in ``skips``."""
    seen, ts, xs, es = set(), [], [], []
    skips = skips if skips is not None else messages.Skips()
    newest = None
    for t_log, m in _msgs(bag, "joint_states"):
        try:
            s, names, pos, vel, eff = messages.joint_state_arrays(m, now_ns=t_log)
            x = messages.joint_vector(names, pos, vel, joint_names, bounds)
            if newest is not None and s < newest:
                raise messages.Rejected("order", f"JointState: stamp {s / 1e9:.3f} s is older than the newest "
                                        f"state's ({newest / 1e9:.3f} s)")
        except messages.Rejected as e:
            skips.reject(TOPICS["joint_states"], m, e)
            continue
        if s in seen:            # lockstep re-sends
            continue
        seen.add(s)
        newest = s
        sel = [names.index(j) for j in joint_names]
        ts.append(s)
        xs.append(x)
        es.append(eff[sel] if len(eff) == len(names) else np.full(len(sel), np.nan))
    order = np.argsort(np.asarray(ts, dtype=np.int64), kind="stable")
    t = np.asarray(ts, dtype=np.int64)[order]
    nv = len(joint_names)
    x = np.asarray(xs, dtype=np.float64).reshape(len(ts), -1)[order] if xs else np.zeros((0, 2 * nv))
    e = np.asarray(es, dtype=np.float64).reshape(len(ts), nv)[order] if es else np.zeros((0, nv))
    return t, x, e


def _commands(bag, joint_names):
    out = {}
    for _, m in _msgs(bag, "command"):
        s = stamp_ns(m.header)
        if s in out:             # a lockstep duplicate carries the same command
            continue
        names = list(m.joint_names)
        eff = np.asarray(m.effort, dtype=np.float64)
        if len(names) != len(eff) or not all(j in names for j in joint_names):
            continue
        out[s] = (eff[[names.index(j) for j in joint_names]], str(m.source), int(m.tick))
    return out


def _by_stamp(bag, key):
    out = {}
    for _, m in _msgs(bag, key):
        out.setdefault(stamp_ns(m.header), m)
    return out


def _attach_outputs(ticks, bag, commands):
    steps, plans = _by_stamp(bag, "step_result"), _by_stamp(bag, "plan")
    for tk in ticks:
        c = commands.get(tk.stamp_ns)
        if c is not None:
            tk.u_recorded, tk.source = c[0], c[1]
        st = steps.get(tk.stamp_ns)
        if st is not None:
            tk.xu_recorded = np.asarray(st.xu_best, dtype=np.float64)
            tk.wall_s = float(st.wall_s)
            tk.iterations = int(st.iterations)
            tk.budget_hit = bool(st.budget_hit)
        elif tk.stamp_ns in plans:
            tk.xu_recorded = np.asarray(plans[tk.stamp_ns].xu, dtype=np.float64)


def tick_from_solve_input(m, cfg_prev, problems, config=None):
    """(Tick or None, the configuration in force) from one SolveInput message; ``cfg_prev``: the
    configuration of the previous SolveInput (a message without one keeps it). What is wrong is
    appended to ``problems``; None when the tick has no configuration at all. ``config``: the
    already parsed ``config_json`` (the caller saw the same text before). Shared by the
    in-memory loader and the streaming replay (:mod:`gato.replay.stream`)."""
    key = TOPICS["solve_input"]
    try:
        cfg = config if config is not None else json.loads(str(m.config_json)) if str(m.config_json) else cfg_prev
    except json.JSONDecodeError as e:
        problems.append(f"{key}: tick {int(m.tick)} has an unreadable config_json ({e}); "
                        "the previous configuration is assumed")
        cfg = cfg_prev
    if cfg is None:
        problems.append(f"{key}: tick {int(m.tick)} carries no configuration: skipped")
        return None, cfg_prev
    w = np.asarray(m.xu_warm, dtype=np.float64)
    rows = int(m.warm_rows)
    if rows < 1 or w.size % rows:
        problems.append(f"{key}: tick {int(m.tick)}: xu_warm ({w.size} values) is not "
                        f"{rows} whole rows: its warm start is not checked")
        warm = None
    else:
        warm = w.reshape(rows, -1)
    # Solver state (newer SolveInput versions; absent fields read as "not carried").
    st = np.asarray(getattr(m, "solver_state", ()), dtype=np.float64)
    srows = int(getattr(m, "solver_state_rows", 0))
    state = None
    if srows > 0 and st.size and st.size % srows == 0:
        state = st.reshape(srows, -1)
    elif srows or st.size:
        problems.append(f"{key}: tick {int(m.tick)}: solver_state ({st.size} values) is "
                        f"not {srows} whole rows: not installed")
    # External-wrench hypotheses (newer SolveInput versions; absent: none recorded).
    wr = np.asarray(getattr(m, "wrench_hypotheses", ()), dtype=np.float64)
    wrows = int(getattr(m, "wrench_rows", 0))
    wrenches = None
    if wrows > 0 and wr.size == 6 * wrows:
        wrenches = wr.reshape(wrows, 6)
    elif wrows or wr.size:
        problems.append(f"{key}: tick {int(m.tick)}: wrench_hypotheses ({wr.size} values) are not {wrows} rows "
                        "of 6: replayed without them")
    # Joint posture targets and weights (issue 31; absent fields: an older gato, posture not known).
    pq = np.asarray(getattr(m, "posture_q", ()), dtype=np.float64)
    pw = np.asarray(getattr(m, "posture_weight", ()), dtype=np.float64)
    prows = int(getattr(m, "posture_rows", 0))
    posture = None
    if prows > 0 and pq.size and pq.size % prows == 0 and pw.size == pq.size:
        posture = (pq.reshape(prows, -1), pw.reshape(prows, -1))
    elif prows or pq.size or pw.size:
        problems.append(f"{key}: tick {int(m.tick)}: posture_q / posture_weight ({pq.size} / {pw.size} values) "
                        f"are not {prows} equal whole rows: replayed without the posture term")
    tk = Tick(stamp_ns=stamp_ns(m.header), tick=int(m.tick), x=np.asarray(m.x_measured, dtype=np.float64),
              reference=np.asarray(m.reference, dtype=np.float64), xu_warm=warm,
              dt_elapsed=float(m.dt_elapsed) or None, budget_s=float(m.budget_s) or None,
              reset=bool(m.reset), config=cfg, solver_state=state,
              capped_out=bool(getattr(m, "capped_out", False)),
              force_reseed=bool(getattr(m, "force_reseed", False)), wrench_hypotheses=wrenches,
              orientation_weight=float(getattr(m, "orientation_weight", 0.0)),
              posture_q=None if posture is None else posture[0], posture_weight=None if posture is None else posture[1],
              posture_recorded=hasattr(m, "posture_rows"))
    return tk, cfg


def _from_solve_inputs(bag, problems):
    ticks, seen = [], set()
    cfg_prev = None
    for _, m in _msgs(bag, "solve_input"):
        s = stamp_ns(m.header)
        if s in seen:
            continue
        seen.add(s)
        tk, cfg_prev = tick_from_solve_input(m, cfg_prev, problems)
        if tk is not None:
            ticks.append(tk)
    ticks.sort(key=lambda t: t.stamp_ns)
    return ticks


def _windows(bag, skips=None):
    """[(log ns, ReferenceWindow)] of the valid EE reference windows (gato.core.messages, the
    controller's rules); a refused one is counted in ``skips``."""
    out = []
    for t_log, m in _msgs(bag, "reference"):
        try:
            out.append((t_log, messages.reference_window(m, now_ns=t_log)))
        except messages.Rejected as e:
            if skips is not None:
                skips.reject(TOPICS["reference"], m, e)
    return out


def _reconstruct(bag, snaps, joint_names, states_t, states, commands, problems):
    """Ticks rebuilt from commands, joint states, reference windows and parameter snapshots."""
    windows = _windows(bag)      # invalid windows were counted by load_recording
    by_stamp = {w.stamp_ns: w for _, w in windows}
    w_log = [tl for tl, _ in windows]          # log order: the latest window before a time by bisection
    s_log = [t for t, _ in snaps]
    log_of_cmd = {}
    for t_log, m in _msgs(bag, "command"):
        log_of_cmd.setdefault(stamp_ns(m.header), t_log)
    st_index = {int(t): i for i, t in enumerate(states_t)}
    ticks, prev_stamp, after_hold = [], None, True
    n_noref = n_nostate = 0
    for s in sorted(commands):
        u, source, tick_no = commands[s]
        if source == "hold":
            after_hold = True
            continue
        if source not in ("mpc", "fallback"):
            continue
        t_log = log_of_cmd.get(s, s)
        cfg = snaps[max(bisect.bisect_right(s_log, t_log) - 1, 0)][1]
        i = st_index.get(s)
        if i is None:
            n_nostate += 1
            continue
        w = by_stamp.get(s) if cfg.get("reference_sync") else None
        if w is None:
            k = bisect.bisect_right(w_log, t_log) - 1
            w = windows[k][1] if k >= 0 else None
        if w is None:
            n_noref += 1
            continue
        ref = w.solver_reference(s, int(cfg["N"]), float(cfg["dt"]))
        dt_el = None if (after_hold or prev_stamp is None) else (s - prev_stamp) / 1e9
        ticks.append(Tick(stamp_ns=s, tick=tick_no, x=states[i].copy(), reference=ref, xu_warm=None,
                          dt_elapsed=dt_el, budget_s=float(cfg.get("budget_s", 0.0)) or None, reset=after_hold,
                          config=cfg, orientation_weight=0.0 if w.orientations is None else
                          float(cfg.get("orientation_weight", 0.0)), posture_recorded=False))
        prev_stamp, after_hold = s, False
    if n_nostate:
        problems.append(f"reconstruction: {n_nostate} MPC commands have no joint state with their stamp: skipped")
    if n_noref:
        problems.append(f"reconstruction: {n_noref} MPC commands have no EE reference window before them: skipped")
    return ticks


def _robot_joints(robot):
    import pinocchio as pin

    from ..core.bsqp import robot_urdf

    return list(pin.buildModelFromUrdf(str(robot_urdf(robot))).names)[1:]


def load_recording(bag, *, robot: str | None = None) -> Recording:
    """The ticks, states and commands of a bag (a :class:`gato.bagio.BagContents`).

    ``robot`` names the robot when the bag carries no configuration (only the
    model-versus-reality part can then be reported). Never raises for missing topics:
    what is missing is listed in ``problems``.
    """
    problems: list = []
    problems += bag.require({t: f for t, f in REQUIRED_FIELDS.items() if t in bag.msgtypes})
    for key in ("joint_states", "command"):
        if TOPICS[key] not in bag.msgtypes:
            problems.append(f"{TOPICS[key]}: not in the bag")
    reconstructed = False
    unusable = {t for t in REQUIRED_FIELDS if t in bag.msgtypes and _lacks_fields(bag, t)}
    for t in sorted(unusable):
        problems.append(f"{t}: another message version (fields missing, listed above): not used")
    if unusable:   # the rest of the loader sees the usable topics only
        bag = SimpleNamespace(messages={t: m for t, m in bag.messages.items() if t not in unusable},
                              msgtypes={t: ty for t, ty in bag.msgtypes.items() if t not in unusable})
    ticks = _from_solve_inputs(bag, problems) if TOPICS["solve_input"] in set(bag.msgtypes) - unusable else []
    config = ticks[0].config if ticks else None
    snaps = _snapshots(bag, CONTROLLER_NODE)
    if config is None and snaps:
        config = snaps[0][1]
    if config is None and robot is None:
        robot = _guess_robot(bag)
    if config is not None and robot is not None and config.get("robot") != robot:
        problems.append(f"--robot {robot} given, but the bag's controller ran {config.get('robot')}: using the bag's")
    robot = (config or {}).get("robot", robot)
    if robot is None:
        problems.append("no controller configuration in the bag (neither /gato_controller/solve_input nor "
                        "/gato_recorder/parameter_snapshot) and the robot could not be told from the joint names: "
                        "pass --robot")
        return Recording([], [], np.zeros(0, np.int64), np.zeros((0, 0)), {}, None, False, problems,
                         efforts=np.zeros((0, 0)))
    joint_names = _solver_joints(bag) or _robot_joints(robot)
    skips = messages.Skips()
    _windows(bag, skips)
    states_t, states, efforts = _state_table(bag, joint_names, problems, skips, _bounds(robot, joint_names))
    commands = _commands(bag, joint_names)
    if not ticks and config is not None and commands:
        problems.append(f"{TOPICS['solve_input']}: not in the bag: tick inputs are reconstructed from the joint "
                        "states, reference windows, commands and parameter snapshots (the replay may differ where "
                        "the reconstruction guessed: reference window choice, lost messages)")
        ticks = _reconstruct(bag, snaps or [(0, config)], joint_names, states_t, states, commands, problems)
        reconstructed = True
    elif not ticks and config is None:
        problems.append("no controller configuration in the bag (neither /gato_controller/solve_input nor "
                        f"/gato_recorder/parameter_snapshot): re-solving is skipped; model vs reality for {robot}")
    _attach_outputs(ticks, bag, {s: c[:2] for s, c in commands.items()})
    if ticks and not any(t.u_recorded is not None for t in ticks):
        problems.append(f"{TOPICS['command']}: no recorded command matches a tick: commands are not compared")
    counts = {k: len(_msgs(bag, k)) for k in TOPICS}
    problems += skips.notes()
    return Recording(ticks=ticks, joint_names=joint_names, state_t_ns=states_t, states=states,
                     commands={s: c[:2] for s, c in commands.items()}, config=config, reconstructed=reconstructed,
                     problems=problems, counts=counts, robot=robot, efforts=efforts, skipped=skips.as_dict())


def _bounds(robot, joint_names):
    """The plausible [q; qd] of ``joint_names`` (gato.core.messages.state_bounds), or None
    when the robot's URDF does not have them (then the names and finiteness are still checked)."""
    try:
        import pinocchio as pin

        from ..core.bsqp import robot_urdf

        return messages.state_bounds(pin.buildModelFromUrdf(str(robot_urdf(robot))), joint_names)
    except Exception:  # noqa: BLE001
        return None


def _lacks_fields(bag, topic) -> bool:
    names = getattr(bag, "fielddefs", {}).get(bag.msgtypes[topic])
    if names is None:
        msgs = bag.messages.get(topic) or []
        if not msgs:
            return False
        names = [f for f in REQUIRED_FIELDS[topic] if hasattr(msgs[0][1], f)]
    return any(f not in names for f in REQUIRED_FIELDS[topic])


def _solver_joints(bag):
    for _, m in _msgs(bag, "solve_input"):
        return list(m.joint_names)
    return []


def _guess_robot(bag):
    """The registered robot whose joints all appear in the first joint state, or None."""
    from ..robots.registry import all_robots

    js = _msgs(bag, "joint_states")
    if not js:
        return None
    names = set(js[0][1].name)
    for r, meta in sorted(all_robots().items()):
        if meta.get("floating_base", False):
            continue
        try:
            if set(_robot_joints(r)) <= names:
                return r
        except (ValueError, FileNotFoundError, RuntimeError):
            continue
    return None
