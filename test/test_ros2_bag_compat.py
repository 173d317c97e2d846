"""``gato replay`` reads what the real recorder writes: ``ros2 bag record`` (the overlay's
rosbag2, or a system ROS 2's) in MCAP and sqlite3 storage, without compression and with
zstd compression per file and per message, recording all topics (``-a``) or a topic list,
all at once from one lockstep ``ros2 launch`` of sim.launch.yaml. Every bag is read
completely (``gato.bagio``), identified by its storage, and replays to 1e-9 N*m.
"""
import os
import signal
import subprocess
import time
import uuid

import pytest

from conftest import import_or_skip, kill_tagged, processes_with_env, require_ros2_tools
from launch_graph import sigint_and_wait

import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
import_or_skip("gato_msgs.msg", "build the workspace (scripts/setup.sh; source scripts/activate.sh)")

pytestmark = [pytest.mark.ros, pytest.mark.slow]

GRAPH = ["/joint_states", "/ee_reference", "/gato_controller/solve_input", "/gato_controller/command",
         "/gato_controller/step_result", "/parameter_events"]
# rosbag2 drops a message (or file) when more than --compression-queue-size (default 1) wait
# for the compressor: on a loaded machine that loses messages, so the queue is made long.
_ZQ = ["--compression-queue-size", "10000"]
# name -> ros2 bag record options (besides -o)
RECORDINGS = {
    "mcap_all": ["-s", "mcap", "-a"],
    "mcap_zstd_file": ["-s", "mcap", "-a", "--compression-mode", "file", "--compression-format", "zstd", *_ZQ],
    "mcap_zstd_message": ["-s", "mcap", "-a", "--compression-mode", "message", "--compression-format", "zstd", *_ZQ],
    "mcap_topics": ["-s", "mcap", "--topics", *GRAPH],
    "sqlite3_all": ["-s", "sqlite3", "-a"],
    "sqlite3_zstd_file": ["-s", "sqlite3", "-a", "--compression-mode", "file", "--compression-format", "zstd", *_ZQ],
    "sqlite3_zstd_message": ["-s", "sqlite3", "--compression-mode", "message", "--compression-format", "zstd", *_ZQ,
                             "--topics", *GRAPH],
}


def _wait_for_line(logs, line, timeout) -> list:
    """Waits until every log file in ``logs`` (name -> path) holds ``line``; returns the names
    that still lack it after ``timeout`` s."""
    end = time.monotonic() + timeout
    missing = list(logs)
    while missing and time.monotonic() < end:
        missing = [n for n in missing if line not in logs[n].read_text(errors="replace")]
        if missing:
            time.sleep(0.2)
    return missing


@pytest.fixture(scope="module")
def bags(tmp_path_factory, ros_env):
    """Every RECORDINGS bag of one 8 s lockstep run (the recorders start first)."""
    require_ros2_tools()
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        get_package_share_directory("gato_bringup")
    except PackageNotFoundError:
        pytest.skip("gato_bringup is not installed (scripts/setup.sh; source scripts/activate.sh)")
    root = tmp_path_factory.mktemp("ros2_bags")
    marker = uuid.uuid4().hex
    env = {**ros_env, "GATO_TEST_MARKER": marker}
    recs, logs, files = {}, {}, []
    launch = None
    try:
        for name, opts in RECORDINGS.items():
            # Output to files, not pipes: a recorder never blocks on a full pipe, and the test
            # can read its progress while it runs.
            logs[name] = root / f"{name}.log"
            files.append(open(logs[name], "w"))
            recs[name] = subprocess.Popen(["ros2", "bag", "record", *opts, "-o", str(root / name)], env=env,
                                          stdout=files[-1], stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True)
        # "Recording..." = the recorder is up and polling the graph. It subscribes to a topic
        # (its own list or, with -a, everything) only once a publisher makes the topic's type
        # known, so there is nothing more to wait for before the graph starts.
        missing = _wait_for_line(logs, "Recording...", 120)
        assert not missing, {n: logs[n].read_text()[-2000:] for n in missing}
        # 8 s (800 ticks): the -a recorders subscribe only once a topic exists, which on a loaded
        # machine can miss the first second or more of the run (seen in CI: 87-93 of 200 ticks
        # in the zstd file-mode bags of a 2 s run); and a recorder that lost the controller's
        # endpoint announcement matches its topics only when Fast DDS repairs that, seconds later
        # (seen in CI: two sqlite3 recorders of a 4 s run, about 2 s of wall clock, got every joint
        # state and no controller message); the checks below need >= 100 per topic.
        launch = subprocess.Popen(["ros2", "launch", "gato_bringup", "sim.launch.yaml", "duration:=8.0"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True)
        out_launch, _ = launch.communicate(timeout=600)
        assert launch.returncode == 0, out_launch[-3000:]
        time.sleep(1.0)                          # the last messages reach the recorders
        for name, p in recs.items():
            rc, _ = sigint_and_wait(p, 60)
            assert rc == 0, f"ros2 bag record ({name}) exited {rc}: {logs[name].read_text()[-2000:]}"
        left = processes_with_env("GATO_TEST_MARKER", marker)
        assert left == [], f"processes left behind: {left}"
    finally:
        for p in [launch, *recs.values()]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        kill_tagged("GATO_TEST_MARKER", marker)
        for f in files:
            f.close()
    return root


def _cut_zstd_files(bag) -> list:
    """The bag's whole-file zstd storage files that the zstd tool itself finds cut or broken
    (`zstd -t`: an independent check of what the recorder wrote); [] without the tool."""
    import shutil

    if shutil.which("zstd") is None:
        return []
    return [f.name for f in sorted(bag.glob("*.zstd"))
            if subprocess.run(["zstd", "-t", "-q", str(f)], capture_output=True, timeout=120).returncode != 0]


@pytest.mark.parametrize("name", list(RECORDINGS))
def test_gato_replay_reads_what_ros2_bag_record_writes(bags, name, ros_env, tmp_path):
    from gato.bagio import read_bag
    from gato.replay import replay_bag

    bag = bags / name
    info = subprocess.run(["ros2", "bag", "info", str(bag)], env=ros_env, capture_output=True, text=True, timeout=60)
    assert info.returncode == 0, info.stderr           # the real tool reads it back, too
    b = read_bag(bag, GRAPH)
    cut = _cut_zstd_files(bag)
    if cut and not b.complete:
        # ros2 bag record itself wrote a zstd file that ends early (seen once in CI: sqlite3, file mode,
        # exit code 0, `zstd -t`: "premature end"; rosbag2's known fault, ros2/ros2#1476): gato must say
        # so by file and read what is there; the replay checks below need the whole run.
        assert any("the zstd stream ends early or is broken" in p for p in b.problems), b.problems
        assert sum(b.counts.values()) > 0, (b.counts, b.problems)
        pytest.xfail(f"ros2 bag record wrote a cut zstd file ({cut}; zstd -t agrees): gato reported it "
                     f"and read {sum(b.counts.values())} messages")
    assert b.complete and b.storage == RECORDINGS[name][1], (b.storage, b.problems)
    for topic in GRAPH[:5]:
        assert b.counts.get(topic, 0) >= 100, (topic, b.counts, b.problems)
    s = replay_bag(bag, tmp_path / "replay", tol=1e-9, worst=0, log=None)
    assert s["ticks"] >= 100 and s["compared"] >= 100, s
    assert s["matched"] and s["max_du"] <= 1e-9, s
    assert s["solver_state"] == "recorded" and not s["reconstructed"], s


@pytest.mark.parametrize("name", [n for n in RECORDINGS if "zstd" in n])
def test_compressed_bags_read_without_their_metadata(bags, name, tmp_path):
    """What the damaged-bag readers do with compressed bags (a recorder killed before it wrote
    metadata.yaml, or a metadata.yaml lost): per-message zstd frames and whole zstd files are
    decompressed by gato.bagio itself; every message is still read."""
    import shutil

    from gato.bagio import read_bag

    intact = read_bag(bags / name, GRAPH)
    bare = tmp_path / name
    shutil.copytree(bags / name, bare)
    (bare / "metadata.yaml").unlink()
    b = read_bag(bare, GRAPH)
    assert b.storage == intact.storage
    assert b.counts == intact.counts and sum(b.counts.values()) > 500, (b.counts, b.problems)
    assert any("no metadata.yaml" in p for p in b.problems), b.problems
    assert not any("could not be decoded" in p for p in b.problems), b.problems
    if "file" in name:                       # the storage files themselves are zstd files
        (f,) = [p for p in bare.iterdir()]
        assert f.name.endswith(".zstd")
        single = read_bag(f, GRAPH)          # one compressed storage file, given directly
        assert single.counts == intact.counts, single.problems


def test_hardware_launch_record_uses_ros2_bag_record(tmp_path, ros_env):
    """hardware.launch.xml record:=true (recorder:=auto) where rosbag2 is installed: the
    controller graph is recorded by `ros2 bag record` (mock hardware, the gato reference
    node); the bag is closed cleanly on SIGINT and replays to 1e-9 N*m."""
    require_ros2_tools()
    from gato.bagio import read_bag
    from gato.replay import replay_bag

    marker = uuid.uuid4().hex
    env = {**ros_env, "GATO_TEST_MARKER": marker}
    bag = tmp_path / "hw_bag"
    launch = subprocess.Popen(["ros2", "launch", "gato_bringup", "hardware.launch.xml", "reference:=true",
                               "controller:=node", "record:=true", f"bag:={bag}"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        end = time.monotonic() + 240
        while time.monotonic() < end and not (bag / f"{bag.name}_0.mcap").exists():
            time.sleep(0.5)
        time.sleep(12.0)                          # start-up (controller_manager, spawners, solver) + ticks
        rc, out = sigint_and_wait(launch, 90)
        time.sleep(1.0)
        left = processes_with_env("GATO_TEST_MARKER", marker)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
        kill_tagged("GATO_TEST_MARKER", marker)
    assert "ros2_bag_record" in out and "gato_recorder" not in out, out[-3000:]
    assert rc == 0 and left == [], (rc, left, out[-3000:])
    assert (bag / "metadata.yaml").is_file(), out[-3000:]     # closed cleanly by ros2 bag record
    b = read_bag(bag, GRAPH)
    assert b.complete and b.counts.get("/gato_controller/solve_input", 0) >= 20, (b.counts, b.problems)
    s = replay_bag(bag, tmp_path / "replay", tol=1e-9, worst=0, log=None)
    assert s["compared"] >= 20 and s["matched"] and s["max_du"] <= 1e-9, s
