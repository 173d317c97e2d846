"""Reproducer of the shutdown hang of issue 32 (not part of the suite: minutes, and a hang by design).

A gato node (gato_ros.node_util.run, a publisher, a subscription and a 20 Hz timer) is started,
SIGINTed after a seeded random delay and counted as hung when its exit guard ends it (exit code
70, GRACE s after the signal). K peer processes create and destroy endpoints in a loop, so
discovery callbacks reach the node's participant listener all the time. With
TARGET_PRELOAD=<libhold_discovery_callback.so> (hold_discovery_callback.cpp) the node holds the
first discovery callback after rmw starts destroying its participant open for 300 ms, so a
callback is in flight at rmw's set_listener(nullptr) whenever one arrives within 1 s (each run's
stderr then says so; "held" counts them), which only happens by chance without it.

    source scripts/activate.sh     # ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
    g++ -O2 -shared -fPIC test/dds/hold_discovery_callback.cpp -o /tmp/libhold.so -ldl
    python test/dds/shutdown_hang_repro.py N SEED [K] [TARGET_PRELOAD=/tmp/libhold.so] [PIN=0]

TARGET=rsp: the node is a C++ one instead, robot_state_publisher (rclcpp's teardown, which gato
cannot change), SIGINTed 1-2 s after its start, counted as hung when it has not exited GRACE s
after the signal (it has no exit guard; it is then SIGKILLed). TARGET_PRELOAD may then name two
libraries, colon-separated: the hold library and the interposer the launch files preload into the
C++ nodes (libgato_fastdds_preload.so, gato_ros.fastdds_preload):

    python test/dds/shutdown_hang_repro.py 10 51 TARGET=rsp TARGET_PRELOAD=/tmp/libhold.so
    python test/dds/shutdown_hang_repro.py 10 51 TARGET=rsp \
        TARGET_PRELOAD=/tmp/libhold.so:install/gato_ros/lib/libgato_fastdds_preload.so
"""
import os
import random
import signal
import subprocess
import sys
import time

_TARGET = """
import sys
from gato_ros.node_util import run, qos

def make():
    from rclpy.node import Node
    from std_msgs.msg import String
    n = Node("dds_target")
    n.pub = n.create_publisher(String, "churn", qos())
    n.sub = n.create_subscription(String, "churn", lambda m: None, qos())
    n.create_timer(0.05, lambda: n.pub.publish(String(data="x")))
    print("READY", flush=True)
    return n

sys.exit(run(make, argv=["dds_target"], exit_grace_s=float(sys.argv[1])))
"""

_CHURN = """
import sys
import rclpy
from std_msgs.msg import String
rclpy.init()
n = rclpy.create_node(f"churn_{sys.argv[1]}")
i = 0
while True:
    p = n.create_publisher(String, f"c{i % 50}", 10)
    s = n.create_subscription(String, f"c{i % 50}", lambda m: None, 10)
    n.destroy_publisher(p)
    n.destroy_subscription(s)
    i += 1
"""


_URDF = '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="fixed"><parent link="a"/>' \
        '<child link="b"/></joint></robot>'


def _rsp_exe() -> str:
    from ament_index_python.packages import get_package_prefix
    return os.path.join(get_package_prefix("robot_state_publisher"), "lib", "robot_state_publisher",
                        "robot_state_publisher")


def main():
    n, seed = int(sys.argv[1]), int(sys.argv[2])
    k = int(sys.argv[3]) if len(sys.argv) > 3 and "=" not in sys.argv[3] else 2
    env = dict(os.environ)
    for kv in sys.argv[3:]:
        if "=" in kv:
            key, value = kv.split("=", 1)
            env[key] = value
    if env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") != "LOCALHOST":
        sys.exit("run with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (source scripts/activate.sh)")
    grace = 6.0
    rng = random.Random(seed)
    churn = [subprocess.Popen([sys.executable, "-c", _CHURN, str(j)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for j in range(k)]
    hangs = held = 0
    codes = {}
    try:
        time.sleep(2)
        for it in range(n):
            tenv = dict(env)
            if env.get("TARGET_PRELOAD"):
                tenv["LD_PRELOAD"] = env["TARGET_PRELOAD"]
            pin = ["taskset", "-c", env["PIN"]] if env.get("PIN") else []
            if env.get("TARGET") == "rsp":
                t = subprocess.Popen(pin + [_rsp_exe(), "--ros-args", "-p", f"robot_description:={_URDF}"], env=tenv,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                time.sleep(rng.uniform(1.0, 2.0))
                t.send_signal(signal.SIGINT)
                try:
                    _, err = t.communicate(timeout=grace)
                    hung = False
                except subprocess.TimeoutExpired:
                    t.kill()
                    _, err = t.communicate()
                    hung = True
            else:
                t = subprocess.Popen(pin + [sys.executable, "-c", _TARGET, str(grace)], env=tenv,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                t.stdout.readline()
                time.sleep(rng.uniform(0.2, 1.0))
                t.send_signal(signal.SIGINT)
                _, err = t.communicate()
                hung = t.returncode == 70
            hangs += hung
            held += "in flight" in err
            codes[t.returncode] = codes.get(t.returncode, 0) + 1
            print(f"run {it}: exit {t.returncode}{' (hung: killed)' if hung else ''}", flush=True)
    finally:
        for p in churn:
            p.kill()
    what = "not exited GRACE s after SIGINT" if env.get("TARGET") == "rsp" else "exit guard, 70"
    print(f"seed {seed} N {n} K {k} target {env.get('TARGET', 'gato')}: hung ({what}) {hangs}/{n}, "
          f"callback held at the destroy {held}, exit codes {codes}")


if __name__ == "__main__":
    main()
