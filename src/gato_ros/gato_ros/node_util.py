"""Small rclpy helpers shared by the gato nodes: schema-driven parameter declaration,
QoS profiles and a main() wrapper with a clean SIGINT / SIGTERM exit."""
from __future__ import annotations

import signal
import sys

__all__ = ["declare_schema", "param_value", "run", "arm_exit_guard", "EXIT_GRACE_S", "EXIT_GUARD_CODE",
           "EXIT_GUARD_MARKER", "EXIT_GUARD_REPORT_ENV", "qos", "NODE_EXECUTABLES",
           "exit_on_startup_signal", "use_fastdds_profile", "FASTDDS_PROFILE", "detach_participant_listener",
           "DDS_DETACH_TIMEOUT_S"]

#: The node executables (console scripts) of gato_ros.
NODE_EXECUTABLES = ("controller_node", "sim_node", "reference_node", "recorder_node", "mujoco_startup",
                    "estimator_node")


def _startup_exit(signum, _frame):
    # os._exit, not SystemExit: an exception raised here lands inside whatever import is
    # running and leaves that module half-initialised; the interpreter's own shutdown then
    # re-imports it (CI saw numpy's "import failing" ImportError and exit 1 for a SIGTERM
    # 0.09 s into the controller's imports). Nothing is open yet, so there is nothing to close.
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # a closed or broken pipe: exiting anyway
            pass
    os._exit(0)


def exit_on_startup_signal(argv0: str | None = None) -> bool:
    """In a gato node executable (``argv0``'s name is one of :data:`NODE_EXECUTABLES`), make
    SIGINT / SIGTERM exit 0 at once while the node's modules are still being imported (there
    is nothing to clean up yet); :func:`run` installs the node's own handlers next. Elsewhere
    (tests, tools importing gato_ros) nothing changes. Returns True when installed."""
    import os

    name = os.path.splitext(os.path.basename(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")))[0]
    if name not in NODE_EXECUTABLES:
        return False
    try:
        signal.signal(signal.SIGINT, _startup_exit)
        signal.signal(signal.SIGTERM, _startup_exit)
    except ValueError:        # not the main thread
        return False
    return True


class _Stop:
    """SIGINT / SIGTERM handlers of a running node: the first signal only sets ``requested``
    (the spin loop ends after the callback in progress, so nothing publishes into a dead
    context); while the node is being built, the build finishes first and the node then exits
    (an exception raised in the middle of the build can land inside an import and leave a C
    extension half-initialised: CI saw numpy fail with an ImportError and exit 1); a second
    signal aborts whatever runs (KeyboardInterrupt)."""

    def __init__(self):
        self.requested = False
        self.previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, _frame):
        first = not self.requested
        self.requested = True
        if not first:
            raise KeyboardInterrupt

    def restore(self):
        for sig, h in self.previous.items():
            try:
                signal.signal(sig, h if h is not None else signal.SIG_DFL)
            except (ValueError, TypeError):
                pass


#: Seconds a node may take to exit after SIGINT / SIGTERM before its exit guard ends it (below ros2
#: launch's 5 s SIGINT-to-SIGTERM escalation and the launch runner's 10 s).
EXIT_GRACE_S = 4.0

#: The exit code of a node its exit guard ended (sysexits' EX_SOFTWARE, "internal software
#: error"): a node that did not stop by itself is a fault, never a clean exit (issue 32).
EXIT_GUARD_CODE = 70

#: The marker that starts the guard's error line on stderr (and the lines of its native stack).
EXIT_GUARD_MARKER = "GATO_EXIT_GUARD_FIRED"

#: Environment variable: a file the guard appends its error line to when it fires. The test
#: suite sets it (test/conftest.py) and fails the test during which the file grew.
EXIT_GUARD_REPORT_ENV = "GATO_EXIT_GUARD_REPORT"


def arm_exit_guard(name: str, grace_s: float = EXIT_GRACE_S) -> bool:
    """Make this process exit, with code :data:`EXIT_GUARD_CODE` (non-zero), at most ``grace_s``
    s after its first SIGINT / SIGTERM, even when its main thread is blocked in native code and
    never returns to Python (a DDS call that does not return: Python's signal handlers, and any
    watchdog thread in Python, would wait for it forever). A last resort that reports the fault,
    never one that hides it: a native thread (libgato_exit_guard.so, built with gato_ros) reads
    the signal numbers Python's C-level handler writes to :func:`signal.set_wakeup_fd`; when the
    grace runs out it prints an error line starting with :data:`EXIT_GUARD_MARKER` and naming
    ``name``, the main thread's native stack (``backtrace``, run on the main thread by a
    SIGRTMIN+4 handler: its frames name the blocked call) and every Python thread's stack
    (faulthandler, on SIGUSR2) to stderr, appends the error line to the file named by
    ``$GATO_EXIT_GUARD_REPORT`` if set, then calls ``_exit(EXIT_GUARD_CODE)``. Call it from the
    main thread, once. Returns False (nothing armed) where the library is not installed
    (gato_ros not built by colcon) or another wakeup fd is in use."""
    import ctypes
    import faulthandler
    import os

    if not grace_s or grace_s <= 0:
        raise ValueError(f"grace_s: expected a positive number of seconds, got {grace_s!r}")
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
        lib = os.path.join(get_package_prefix("gato_ros"), "lib", "libgato_exit_guard.so")
    except (ImportError, PackageNotFoundError):
        return False
    if not os.path.isfile(lib):
        return False
    r, w = os.pipe()
    os.set_blocking(w, False)
    if signal.set_wakeup_fd(w, warn_on_full_buffer=False) != -1:    # someone else's: leave it
        signal.set_wakeup_fd(-1)
        os.close(r)
        os.close(w)
        return False
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    dll = ctypes.CDLL(lib)
    dll.gato_exit_guard_arm.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_char_p]
    dll.gato_exit_guard_arm.restype = ctypes.c_int
    report = os.environ.get(EXIT_GUARD_REPORT_ENV, "")
    return dll.gato_exit_guard_arm(r, float(grace_s), name.encode(), EXIT_GUARD_CODE, int(signal.SIGUSR2),
                                   int(signal.SIGRTMIN) + 4, report.encode()) == 0


def _node_name(argv) -> str:
    """The node name of a ``--ros-args -r __node:=NAME`` remap in argv, else the program's name."""
    import os

    for a in argv:
        if a.startswith("__node:="):
            return a.split(":=", 1)[1]
    return os.path.basename(argv[0]) if argv else "gato node"


#: The Fast DDS profile of the gato nodes (share/gato_bringup/config/): Fast DDS's transports with a
#: 16 MB shared-memory segment (its default, 512 KB, holds ~10 controller ticks: a reader stalled for
#: ~0.1 s made the writer drop samples at the transport, which a keep-last(10) writer could not resend;
#: docs/replay.md "Lost ticks", docs/benchmarks_recording.md, issue 21).
FASTDDS_PROFILE = "fastdds_gato.xml"
_FASTDDS_RMWS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")


def use_fastdds_profile(environ=None, cwd: str | None = None) -> str | None:
    """Point Fast DDS at the gato profile (:data:`FASTDDS_PROFILE`) for this process, before
    rclpy.init creates its participant: sets ``FASTDDS_DEFAULT_PROFILES_FILE`` in ``environ``
    (default ``os.environ``) and returns the profile's path; returns None and changes nothing
    where the user chose otherwise: another RMW (``RMW_IMPLEMENTATION`` not Fast DDS), a profile
    of their own (``FASTDDS_DEFAULT_PROFILES_FILE`` set, or ``DEFAULT_FASTDDS_PROFILES.xml`` in
    ``cwd``, which Fast DDS loads by itself), ``GATO_FASTDDS_PROFILE=off``, or gato_bringup not
    installed. ``GATO_FASTDDS_PROFILE=<file>`` uses that file instead."""
    import os

    env = os.environ if environ is None else environ
    choice = env.get("GATO_FASTDDS_PROFILE", "").strip()
    if choice.lower() in ("off", "0", "false", "no"):
        return None
    if env.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") not in _FASTDDS_RMWS:
        return None
    if env.get("FASTDDS_DEFAULT_PROFILES_FILE"):
        return None
    if os.path.isfile(os.path.join(cwd if cwd is not None else os.getcwd(), "DEFAULT_FASTDDS_PROFILES.xml")):
        return None
    path = choice or None
    if path is None:
        try:
            from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
        except ImportError:
            return None
        try:
            path = os.path.join(get_package_share_directory("gato_bringup"), "config", FASTDDS_PROFILE)
        except PackageNotFoundError:
            return None
    if not os.path.isfile(path):
        if choice:
            raise ValueError(f"GATO_FASTDDS_PROFILE: {choice} is not a file")
        return None
    env["FASTDDS_DEFAULT_PROFILES_FILE"] = path
    return path


#: Seconds the teardown waits for a Fast DDS discovery callback in flight before it destroys the node
#: (:func:`detach_participant_listener`): below the exit guard's grace, so a callback that is itself
#: blocked still ends in the guard's report.
DDS_DETACH_TIMEOUT_S = 2


def detach_participant_listener(node, timeout_s: int = DDS_DETACH_TIMEOUT_S) -> int | None:
    """Detach the Fast DDS participant listener of ``node``'s context before the node is
    destroyed, with a bounded wait for a discovery callback in flight (libgato_dds_listener.so,
    built with gato_ros; issue 32). Returns 0 when detached, 1 when there was nothing to detach,
    -1 when a callback still ran after ``timeout_s`` (an error line on stderr names the call; the
    node is destroyed anyway and the exit guard reports if that blocks), None where it does not
    apply (another RMW than rmw_fastrtps_cpp, or the library not built).

    Why: destroying a context's last node destroys its DomainParticipant, and rmw_fastrtps first
    calls ``DomainParticipant::set_listener(nullptr)`` without a timeout. In the Fast DDS 3.2 of
    the ros-fastdds wheel that wait spins instead of sleeping (libstdc++'s generic
    ``condition_variable::wait_until`` overflows converting ``steady_clock::time_point::max()``
    to the system clock, so every ``pthread_cond_timedwait`` returns at once) while holding the
    participant's listener mutex, and the discovery thread that must take that mutex to end the
    callback in flight is starved: the node never exits (CI: ``set_listener`` ->
    ``steady_clock::now``). The same call with a finite timeout sleeps, the callback ends, and
    rmw's later call finds no callback in flight. Detaching only stops graph updates (``ros2 node
    list`` as this node sees it), which a node being destroyed no longer needs."""
    import ctypes
    import os

    try:
        from rclpy.utilities import get_rmw_implementation_identifier

        if get_rmw_implementation_identifier() != "rmw_fastrtps_cpp":
            return None
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix

        lib = os.path.join(get_package_prefix("gato_ros"), "lib", "libgato_dds_listener.so")
    except (ImportError, PackageNotFoundError):
        return None
    if not os.path.isfile(lib):
        return None
    fn = ctypes.CDLL(lib).gato_dds_detach_participant_listener
    fn.argtypes = [ctypes.c_void_p, ctypes.c_long]
    fn.restype = ctypes.c_int
    with node.handle:
        ret = fn(node.handle.pointer, int(timeout_s))
    if ret == -1:
        print(f"[gato_ros] error: [{node.get_name()}] Fast DDS DomainParticipant::set_listener: a discovery callback "
              f"was still running {int(timeout_s)} s after the stop; destroying the node anyway", file=sys.stderr,
              flush=True)
    return ret


def qos(depth: int = 10):
    """Reliable, volatile, keep-last(depth): what joint_state_broadcaster and the forward
    command controllers use (SystemDefaultsQoS), so the nodes interoperate with them."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def param_value(kind: str, value):
    """A parameter's value as the node's logic takes it: arrays as lists (rclpy gives
    array.array / tuples); for the array kinds (``double_array``, ``string_array``) an unset
    value (None) or an empty array of any element type is []."""
    if isinstance(value, tuple) or type(value).__name__ == "array":
        value = list(value)
    if kind in ("double_array", "string_array") and (value is None or (isinstance(value, list) and not value)):
        return []
    return value


def declare_schema(node, params_schema) -> dict:
    """Declare every parameter of ``params_schema`` on ``node`` with its descriptor.

    The ``robot`` parameter is declared first (default iiwa14); robot-specific defaults
    (joint names, start pose) follow from its value. Values given by a parameter file or
    ``-p`` override the defaults. Returns {name: value}. Raises ValueError when a given
    value violates the schema (range, choices, type), naming the parameter.
    """
    from rclpy.parameter import Parameter

    from . import params as schema

    specs = schema.by_name(params_schema)
    # Start-up values that YAML typed differently from the schema are converted where the
    # intent is unambiguous (rclpy would refuse the type): an integer for a double
    # (duration:=5), an unquoted off for a choice parameter (limits:=off).
    overrides = getattr(node, "_parameter_overrides", None)
    if isinstance(overrides, dict):
        for p in params_schema:
            ov = overrides.get(p.name)
            if ov is not None and p.type == "double" and ov.type_ == Parameter.Type.INTEGER:
                overrides[p.name] = Parameter(p.name, Parameter.Type.DOUBLE, float(ov.value))
            elif ov is not None and p.type == "double_array" and ov.type_ == Parameter.Type.INTEGER_ARRAY:
                overrides[p.name] = Parameter(p.name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in ov.value])
            elif ov is not None and p.type == "string" and ov.type_ == Parameter.Type.BOOL and p.choices \
                    and ("off" if not ov.value else "on") in p.choices:
                # YAML 1.1 reads an unquoted off / on as a bool (limits:=off, <param value="off"/>)
                overrides[p.name] = Parameter(p.name, Parameter.Type.STRING, "off" if not ov.value else "on")
    # the arms' schemas default the robot per file (a callable): iiwa14; the floating nodes' to go2
    robot_default = specs["robot"].default if not callable(specs["robot"].default) else "iiwa14"
    robot = node.declare_parameter("robot", robot_default, schema.descriptor(specs["robot"])).value
    values = {"robot": robot}
    for p in params_schema:
        if p.name == "robot":
            continue
        default = p.default_for(robot)
        desc = schema.descriptor(p)
        if p.type in ("double_array", "string_array") and len(default) == 0:
            # An empty list has no element type: rclpy types [] BYTE_ARRAY, and a parameter file's []
            # leaves rcl's value unset. A statically typed parameter declared without a value is
            # "uninitialized", and rclpy's get_parameters then answers NO value for a request naming
            # it (the recorder's snapshot, `ros2 param dump`, rqt saw none of the node's parameters).
            # Declared dynamically typed instead: unset reads as NOT_SET, `ros2 param set ... "[]"`
            # (a BYTE_ARRAY) is accepted, and param_value() turns both into [] for the node; the
            # schema's validation refuses any other type by name.
            desc.dynamic_typing = True
            default = None
        values[p.name] = param_value(p.type, node.declare_parameter(p.name, default, desc).value)
    for name, value in values.items():
        reason = schema.validate(params_schema, name, values[name], allow_read_only=True)
        if reason:
            raise ValueError(f"parameter {reason}")
    return values


def run(make_node, argv=None, exit_grace_s: float | None = EXIT_GRACE_S, executor: str = "single") -> int:
    """rclpy.init, build the node with ``make_node()``, spin until SIGINT / SIGTERM or until
    the node sets ``node.done = True``; then close / destroy it and shut down. Returns the
    exit code: ``node.exit_code`` (default 0); 0 after SIGINT / SIGTERM, whenever it arrives
    (while the node is built, in a callback, during shutdown); 1 if the node could not be
    built for a configuration error (ValueError, one line on stderr).

    The signals are handled here, not by rclpy (``SignalHandlerOptions.NO``): rclpy's handler
    invalidates the context at once, so a callback publishing at that moment failed with
    ``RCLError: publisher's context is invalid`` (exit 1). Here the first signal lets the
    callback in progress finish, then the loop ends and the node is closed in order.

    ``exit_grace_s``: the exit guard (:func:`arm_exit_guard`): a node still running that long
    after the first signal (blocked in native code) is ended with an error line, its stacks and
    exit code :data:`EXIT_GUARD_CODE` (a fault, not a clean stop); None: no guard (the
    recorder: closing its bag may take longer and must not be cut).

    ``executor``: ``single`` (rclpy's SingleThreadedExecutor) or ``events`` (rclpy's
    EventsExecutor, C++: for a node of many small callbacks, the live view: the single-threaded
    executor rebuilds its wait set in Python for every callback).

    Before the node is destroyed its Fast DDS participant listener is detached with a bounded wait
    (:func:`detach_participant_listener`): rmw_fastrtps's own unbounded wait spins forever when a
    discovery callback is in flight at that moment (issue 32)."""
    if executor not in ("single", "events"):
        raise ValueError(f"executor: must be single or events, got {executor!r}")
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    stop = _Stop()
    if exit_grace_s is not None:
        arm_exit_guard(_node_name(argv if argv is not None else sys.argv), exit_grace_s)
    node = None
    code = 0
    try:
        try:
            try:
                use_fastdds_profile()      # before rclpy.init: Fast DDS reads it when the participant is made
            except ValueError as e:
                print(f"[gato_ros] error: {e}", file=sys.stderr, flush=True)
                return 1
            rclpy.init(args=argv if argv is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
            try:
                node = make_node()
            except ValueError as e:  # configuration errors: one clear line, no traceback
                print(f"[gato_ros] error: {e}", file=sys.stderr, flush=True)
                return 1
            if stop.requested:
                return 0
            if executor == "events":
                from rclpy.experimental import EventsExecutor

                ex = EventsExecutor()
            else:
                ex = SingleThreadedExecutor()
            ex.add_node(node)
            while not stop.requested and rclpy.ok() and not getattr(node, "done", False):
                ex.spin_once(timeout_sec=0.1)
            code = 0 if stop.requested else int(getattr(node, "exit_code", 0))
        except (KeyboardInterrupt, ExternalShutdownException):
            code = 0
        finally:
            if node is not None:
                close = getattr(node, "close", None)
                if callable(close):
                    close()
                try:
                    detach_participant_listener(node)     # before rmw's unbounded wait can spin (issue 32)
                except Exception as e:                    # never in the way of the destroy itself
                    print(f"[gato_ros] error: detaching the Fast DDS participant listener: {e!r}", file=sys.stderr,
                          flush=True)
                node.destroy_node()
            rclpy.try_shutdown()
    except KeyboardInterrupt:   # a second signal during the clean-up: already closing
        code = 0
    finally:
        stop.restore()
    return code
