// Exit deadline of the gato rclpy nodes (gato_ros.node_util.run).
//
// A node asked to stop (SIGINT / SIGTERM) ends its spin loop, closes and exits. That takes the
// main thread returning to Python. A main thread blocked in native code never does: a DDS call
// that does not return (CI saw gato_sim ignore SIGINT and SIGTERM for 15 s until the launcher's
// SIGKILL, after a peer was SIGKILLed) leaves Python's signal handler pending forever, and a
// watchdog written in Python needs the interpreter lock that blocked call may hold.
//
// This thread needs neither: Python's C-level signal handler writes the signal number to the
// wakeup fd (signal.set_wakeup_fd) the moment the signal arrives, whatever the main thread does.
// The thread reads that pipe; from the first SIGINT / SIGTERM it gives the node grace_s seconds
// to exit by itself, then writes one line to stderr, raises the dump signal (faulthandler prints
// every Python thread's stack: where the node was stuck) and calls _exit(code).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <unistd.h>

namespace {

struct Guard {
  int fd = -1;
  double grace_s = 4.0;
  int code = 0;
  int dump_signal = 0;
  char name[128] = {0};
};

Guard g_guard;
bool g_armed = false;

void sleep_s(double s) {
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - static_cast<double>(static_cast<time_t>(s))) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void* guard_main(void*) {
  unsigned char sig = 0;
  for (;;) {  // other signals with Python handlers land here too: wait for a stop signal
    ssize_t n = read(g_guard.fd, &sig, 1);
    if (n == 1 && (sig == SIGINT || sig == SIGTERM)) break;
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return nullptr;  // pipe closed
  }
  sleep_s(g_guard.grace_s);
  char msg[512];
  int len = std::snprintf(msg, sizeof msg,
                          "[%s] still running %.1f s after the stop signal: the main thread is blocked in native "
                          "code (for instance a DDS call that does not return); exiting without it (exit code %d). Python "
                          "stacks follow.\n",
                          g_guard.name, g_guard.grace_s, g_guard.code);
  if (len > 0) {
    ssize_t w = write(STDERR_FILENO, msg, static_cast<size_t>(len < static_cast<int>(sizeof msg) ? len : sizeof msg - 1));
    (void)w;
  }
  if (g_guard.dump_signal > 0) {
    kill(getpid(), g_guard.dump_signal);
    sleep_s(0.3);
  }
  _exit(g_guard.code);
}

}  // namespace

extern "C" {

// Start the guard thread once per process. read_fd: the read end of the pipe whose write end is
// Python's signal wakeup fd; grace_s > 0 [s]; name: the node's name for the message; code: the
// exit code; dump_signal: a signal faulthandler dumps the stacks on (0: none). Returns 0, or an
// errno value (EINVAL for bad arguments, EALREADY when armed before).
int gato_exit_guard_arm(int read_fd, double grace_s, const char* name, int code, int dump_signal) {
  if (g_armed) return EALREADY;
  if (read_fd < 0 || !(grace_s > 0.0)) return EINVAL;
  g_guard.fd = read_fd;
  g_guard.grace_s = grace_s;
  g_guard.code = code;
  g_guard.dump_signal = dump_signal;
  std::snprintf(g_guard.name, sizeof g_guard.name, "%s", name ? name : "gato node");
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The thread must not take a stop signal itself (Python's handler runs on the main thread).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_t th;
  int rc = pthread_create(&th, &attr, guard_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc == 0) g_armed = true;
  return rc;
}

}  // extern "C"
