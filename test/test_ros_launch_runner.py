"""gato_ros.launch_runner: the supported subset of the XML / YAML launch formats, the
bringup launch files, and process management (shutdown escalation, on_exit, signals
to the runner, no orphans)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import import_or_skip, kill_tagged, processes_with_env

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
lr = import_or_skip("gato_ros.launch_runner", _HINT)


def load(tmp_path, text, name="test.launch.xml", **args):
    f = tmp_path / name
    f.write_text(textwrap.dedent(text))
    return lr.load(f, args, tmp_path)


def params_of(proc):
    """{name: value} of the inline parameter files of a process, in order."""
    import yaml

    out = {}
    cmd = proc.cmd
    for i, a in enumerate(cmd):
        if a == "--params-file":
            doc = yaml.safe_load(open(cmd[i + 1]))
            for v in doc.values():
                out.update(v["ros__parameters"])
    return out


def test_xml_subset_args_substitutions_conditions_params_remaps(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_TEST_VAR", "from_env")
    (tmp_path / "p.yaml").write_text("/**:\n  ros__parameters:\n    a: 1\n")
    (tmp_path / "inc.launch.yaml").write_text(textwrap.dedent("""\
        launch:
        - arg: {name: who, default: nobody}
        - node: {pkg: demo_pkg, exec: talker, name: $(var who), namespace: ns1}
        """))
    procs = load(tmp_path, """\
        <launch>
          <arg name="robot" default="iiwa14"/>
          <arg name="flag" default="false"/>
          <let name="tag" value="$(var robot)_x"/>
          <node pkg="demo_pkg" exec="listener" name="n1" args="--foo 1" on_exit="shutdown">
            <param from="$(dirname)/p.yaml"/>
            <param name="robot" value="$(var robot)"/>
            <param name="rate" value="100"/>
            <param name="gain" value="2.5"/>
            <param name="on" value="true"/>
            <param name="names" value="[a, b]"/>
            <param name="env" value="$(env GATO_TEST_VAR) $(env GATO_UNSET_VAR fallback)"/>
            <param name="cmd" value="$(command 'echo hello')"/>
            <remap from="chatter" to="/other"/>
            <env name="X" value="$(var tag)"/>
          </node>
          <node if="$(var flag)" pkg="demo_pkg" exec="skipped"/>
          <node unless="$(var flag)" pkg="demo_pkg" exec="kept"/>
          <group>
            <let name="robot" value="inner"/>
            <include file="$(dirname)/inc.launch.yaml">
              <arg name="who" value="$(var robot)"/>
            </include>
          </group>
          <node pkg="demo_pkg" exec="after" name="$(var robot)"/>
        </launch>
        """, robot="fr3")
    assert [p.name for p in procs] == ["n1", "kept", "inner", "fr3"]   # group scope did not leak
    n1 = procs[0]
    assert n1.cmd[:3] == ["demo_pkg/listener", "--foo", "1"]
    i = n1.cmd.index("--ros-args")
    assert n1.cmd[i + 1:i + 3] == ["-r", "__node:=n1"]
    assert str(tmp_path / "p.yaml") in n1.cmd
    assert n1.cmd[n1.cmd.index("chatter:=/other") - 1] == "-r"
    assert params_of(n1) == {"a": 1, "robot": "fr3", "rate": 100, "gain": 2.5, "on": True, "names": ["a", "b"],
                             "env": "from_env fallback", "cmd": "hello"}
    assert n1.env == {"X": "fr3_x"} and n1.on_exit == "shutdown"
    assert "__ns:=/ns1" in procs[2].cmd


def test_yaml_format_and_typed_values(tmp_path):
    procs = load(tmp_path, """\
        launch:
        - arg: {name: lockstep, default: "true"}
        - node:
            pkg: demo_pkg
            exec: sim
            name: sim
            on_exit: shutdown
            param:
            - {name: lockstep, value: $(var lockstep)}
            - {name: duration_s, value: 2.0}
            - {name: topics, value: [/a:pkg/msg/A, /b]}
        - group:
            if: $(var lockstep)
            children:
            - node: {pkg: demo_pkg, exec: ref, name: ref}
        """, name="t.launch.yaml", lockstep="false")
    assert [p.name for p in procs] == ["sim"]
    assert params_of(procs[0]) == {"lockstep": False, "duration_s": 2.0, "topics": ["/a:pkg/msg/A", "/b"]}


@pytest.mark.parametrize("text, match", [
    ('<launch><timer period="1"/></launch>', "unsupported launch entity 'timer'"),
    ('<launch><node pkg="p" exec="e" launch-prefix="gdb"/></launch>', "unsupported node attribute"),
    ('<launch><node pkg="p" exec="e" respawn="true" respawn_delay="-1"/></launch>', "respawn_delay must be >= 0"),
    ('<launch><node pkg="p" exec="$(anon x)"/></launch>', "unsupported substitution"),
    ('<launch><arg name="needed"/></launch>', "'needed' has no default"),
    ('<launch><node pkg="p" exec="e" if="maybe"/></launch>', "expected true/false"),
    ('<launch><node pkg="p" exec="$(var nope)"/></launch>', "launch configuration not set"),
    ('<launch><node pkg="p" exec="e"><param from="/no/such.yaml"/></node></launch>', "not found"),
    ('<launch><node pkg="p" exec="e" on_exit="restart"/></launch>', "only 'shutdown'"),
    ('<notlaunch/>', "expected <launch>"),
])
def test_unsupported_or_invalid_input_is_a_clear_error(tmp_path, text, match):
    with pytest.raises(lr.LaunchError, match=match):
        load(tmp_path, text)


def test_bringup_launch_files_resolve(tmp_path):
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        share = get_package_share_directory("gato_bringup")
    except PackageNotFoundError:
        pytest.skip("gato_bringup is not installed (source install/setup.bash)")
    procs = lr.load(f"{share}/launch/sim.launch.yaml", {"record": "true", "duration": "3"}, tmp_path)
    assert [p.name for p in procs] == ["gato_recorder", "gato_controller", "gato_reference", "gato_sim"]
    sim = procs[-1]
    assert sim.on_exit == "shutdown" and sim.cmd[0] == "gato_ros/sim_node"
    assert f"{share}/config/iiwa14.yaml" in sim.cmd
    assert params_of(sim)["duration_s"] == 3 and params_of(sim)["start_subscribers"] == 2   # controller + recorder
    no_rec = lr.load(f"{share}/launch/sim.launch.yaml", {}, tmp_path)
    assert [p.name for p in no_rec] == ["gato_controller", "gato_reference", "gato_sim"]
    assert params_of(no_rec[-1])["start_subscribers"] == 1
    assert params_of(procs[1])["use_sim_time"] is True and params_of(procs[1])["reference_sync"] is True
    for p in procs:                                     # every executable exists in the install
        assert os.path.isfile(lr.resolve_executable(p.cmd[0]))
    hw = lr.load(f"{share}/launch/hardware.launch.xml", {"robot": "ur5e"}, tmp_path)
    assert [p.name for p in hw] == ["robot_state_publisher", "controller_manager", "spawner_joint_state_broadcaster",
                                    "spawner_effort_controller", "gato_controller"]
    desc = params_of(hw[0])["robot_description"]
    assert "<ros2_control name=\"gato_ur5e\"" in desc and "mock_components/GenericSystem" in desc
    assert f"{share}/config/ur5e_controllers.yaml" in hw[1].cmd
    assert hw[2].cmd[1:4] == ["joint_state_broadcaster", "--controller-manager", "/controller_manager"]


# ------------------------------------------------------------------ process management
_CHILD = textwrap.dedent("""\
    import os, signal, subprocess, sys, time
    mode = sys.argv[1]
    if mode == "ignore_sigint":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if mode == "grandchild":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if mode == "exit_soon":
        time.sleep(1.0)
        sys.exit(0)
    if mode == "exit_later":
        time.sleep(4.0)
        sys.exit(0)
    if mode == "crash_once":
        flag = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crashed")
        if not os.path.exists(flag):
            open(flag, "w").close()
            sys.exit(3)
    try:
        print("ready", mode, flush=True)
        while True:
            time.sleep(0.1)
    except KeyboardInterrupt:
        sys.exit(0)
    """)


def _runner(tmp_path, xml, marker, *extra):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    launch = tmp_path / "procs.launch.xml"
    launch.write_text(xml.replace("CHILD", f"{sys.executable} {script}"))
    env = {**os.environ, "GATO_TEST_MARKER": marker}
    return subprocess.Popen([sys.executable, "-m", "gato_ros.launch_runner", str(launch), "--report",
                             str(tmp_path / "report.json"), "--sigint-timeout", "3", "--sigterm-timeout", "3",
                             *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _wait(proc, timeout=60):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"launch runner did not finish within {timeout} s:\n{out[-3000:]}")
    return out


def _wait_ready(proc, n, timeout=60):
    """Wait until n children printed 'ready' (reads the runner's stdout line by line)."""
    lines, end = [], time.monotonic() + timeout
    while sum("ready" in line for line in lines) < n and time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    return lines


def test_on_exit_shutdown_escalates_and_leaves_no_orphans(tmp_path):
    marker = uuid.uuid4().hex
    proc = _runner(tmp_path, """
        <launch>
          <executable cmd="CHILD polite" name="polite"/>
          <executable cmd="CHILD ignore_sigint" name="stubborn"/>
          <executable cmd="CHILD grandchild" name="parent"/>
          <executable cmd="CHILD exit_soon" name="timer" on_exit="shutdown"/>
        </launch>""", marker)
    try:
        out = _wait(proc)
        report = json.loads((tmp_path / "report.json").read_text())
        rc = report["returncodes"]
        assert rc["polite"] == 0 and rc["timer"] == 0 and rc["parent"] == 0, out
        assert rc["stubborn"] == -signal.SIGTERM, out          # ignored SIGINT: SIGTERM after the timeout
        assert proc.returncode == 1                             # not every process exited 0
        assert "timer exited (on_exit=shutdown)" in out
        time.sleep(0.5)
        assert processes_with_env("GATO_TEST_MARKER", marker) == [], "orphaned processes (e.g. the grandchild)"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_tagged("GATO_TEST_MARKER", marker)


def test_respawn_restarts_a_process_that_exits(tmp_path):
    """respawn="true": the process that died is started again after respawn_delay; the exit
    codes of the last runs decide the runner's, the earlier ones are in the report."""
    marker = uuid.uuid4().hex
    proc = _runner(tmp_path, """
        <launch>
          <executable cmd="CHILD crash_once" name="flaky" respawn="true" respawn_delay="0.5"/>
          <executable cmd="CHILD exit_later" name="timer" on_exit="shutdown"/>
        </launch>""", marker)
    try:
        out = _wait(proc)
        report = json.loads((tmp_path / "report.json").read_text())
        assert "flaky exited with code 3; respawning in 0.5 s" in out and "respawned flaky (run 2)" in out, out
        assert report["respawns"] == {"flaky": [3]} and report["returncodes"] == {"flaky": 0, "timer": 0}, report
        assert proc.returncode == 0, out
        time.sleep(0.3)
        assert processes_with_env("GATO_TEST_MARKER", marker) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_tagged("GATO_TEST_MARKER", marker)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_runner_shuts_everything_down_cleanly(tmp_path, sig):
    marker = uuid.uuid4().hex
    proc = _runner(tmp_path, """
        <launch>
          <executable cmd="CHILD a" name="a"/>
          <executable cmd="CHILD b" name="b"/>
        </launch>""", marker)
    try:
        _wait_ready(proc, 2)
        proc.send_signal(sig)
        out = _wait(proc)
        assert proc.returncode == 0, out
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["returncodes"] == {"a": 0, "b": 0} and report["shutdown_reason"] == sig.name
        time.sleep(0.3)
        assert processes_with_env("GATO_TEST_MARKER", marker) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        kill_tagged("GATO_TEST_MARKER", marker)


def test_children_die_with_a_killed_runner(tmp_path):
    marker = uuid.uuid4().hex
    proc = _runner(tmp_path, """
        <launch>
          <executable cmd="CHILD a" name="a"/>
        </launch>""", marker)
    try:
        _wait_ready(proc, 1)
        assert len(processes_with_env("GATO_TEST_MARKER", marker)) == 2    # runner + child
        proc.kill()                                                        # no chance to clean up
        proc.wait()
        deadline = time.monotonic() + 10
        while processes_with_env("GATO_TEST_MARKER", marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with_env("GATO_TEST_MARKER", marker) == [], "PR_SET_PDEATHSIG did not take the child down"
    finally:
        kill_tagged("GATO_TEST_MARKER", marker)


def test_print_mode_and_launch_error_exit_code(tmp_path):
    f = tmp_path / "x.launch.xml"
    f.write_text('<launch><node pkg="demo" exec="e" name="n"><param name="k" value="1"/></node></launch>')
    r = subprocess.run([sys.executable, "-m", "gato_ros.launch_runner", str(f), "--print"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["name"] == "n"
    f.write_text('<launch><bogus/></launch>')
    r = subprocess.run([sys.executable, "-m", "gato_ros.launch_runner", str(f)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "unsupported launch entity 'bogus'" in r.stderr
