// Exit deadline of the gato rclpy nodes (gato_ros.node_util.run): a last resort that reports.
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
// to exit by itself. If it has not, that is a fault, not a normal exit (issue 32: the guard must
// never make a hang look like a clean stop), so it
//   1. writes one error line to stderr, starting with the marker "GATO_EXIT_GUARD_FIRED",
//   2. has the main thread print its own native stack (a signal handler on the main thread runs
//      backtrace(): the frames name the call it is blocked in, e.g. pthread_mutex_lock or a
//      DDS wait), then raises the dump signal (faulthandler prints every Python thread's stack),
//   3. appends the same line to report_path when one is given (the test suite's record: a test
//      in which a guard fired fails, see test/conftest.py),
//   4. and calls _exit(code) with a non-zero code.
#include <execinfo.h>
#include <fcntl.h>

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
  int code = 70;
  int dump_signal = 0;
  int stack_signal = 0;
  pthread_t main_thread{};
  char name[128] = {0};
  char report_path[512] = {0};
};

Guard g_guard;
bool g_armed = false;

void sleep_s(double s) {
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - static_cast<double>(static_cast<time_t>(s))) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// Runs on the blocked main thread (the signal interrupts the blocking call; SA_RESTART resumes
// it). backtrace() was called once at arm time, so libgcc is loaded and it does not allocate;
// backtrace_symbols_fd writes without malloc.
void native_stack_handler(int) {
  int saved = errno;
  static const char head[] = "GATO_EXIT_GUARD native stack of the main thread (innermost first):\n";
  write_all(STDERR_FILENO, head, sizeof head - 1);
  void* frames[64];
  int n = backtrace(frames, 64);
  // frames[0..1]: this handler and the kernel's signal trampoline; the blocked call follows
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  static const char tail[] = "GATO_EXIT_GUARD end of native stack\n";
  write_all(STDERR_FILENO, tail, sizeof tail - 1);
  errno = saved;
}

void* guard_main(void*) {
  unsigned char sig = 0;
  for (;;) {  // other signals with Python handlers land here too: wait for a stop signal
    ssize_t n = read(g_guard.fd, &sig, 1);
    if (n == 1 && (sig == SIGINT || sig == SIGTERM)) break;
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return nullptr;  // pipe closed
  }
  sleep_s(g_guard.grace_s);
  char msg[768];
  int len = std::snprintf(msg, sizeof msg,
                          "GATO_EXIT_GUARD_FIRED [%s] error: still running %.1f s after the stop signal: the main "
                          "thread is blocked in native code (for instance a DDS call that does not return); a fault, "
                          "exiting with code %d. Its native stack and the Python stacks follow.\n",
                          g_guard.name, g_guard.grace_s, g_guard.code);
  if (len < 0) len = 0;
  if (len >= static_cast<int>(sizeof msg)) len = static_cast<int>(sizeof msg) - 1;
  write_all(STDERR_FILENO, msg, static_cast<size_t>(len));
  if (g_guard.report_path[0] != '\0') {
    int rfd = open(g_guard.report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (rfd >= 0) {
      write_all(rfd, msg, static_cast<size_t>(len));
      close(rfd);
    }
  }
  if (g_guard.stack_signal > 0) {
    pthread_kill(g_guard.main_thread, g_guard.stack_signal);
    sleep_s(0.3);
  }
  if (g_guard.dump_signal > 0) {
    kill(getpid(), g_guard.dump_signal);
    sleep_s(0.3);
  }
  _exit(g_guard.code);
}

}  // namespace

extern "C" {

// Start the guard thread once per process, from the main thread (the one whose native stack is
// reported). read_fd: the read end of the pipe whose write end is Python's signal wakeup fd;
// grace_s > 0 [s]; name: the node's name for the message; code: the exit code (non-zero);
// dump_signal: a signal faulthandler dumps the Python stacks on (0: none); stack_signal: a free
// signal for the main thread's native-stack handler (0: none); report_path: a file the error
// line is appended to (NULL or "": none). Returns 0, or an errno value (EINVAL for bad
// arguments, EALREADY when armed before).
int gato_exit_guard_arm(int read_fd, double grace_s, const char* name, int code, int dump_signal, int stack_signal,
                        const char* report_path) {
  if (g_armed) return EALREADY;
  if (read_fd < 0 || !(grace_s > 0.0) || code == 0) return EINVAL;
  g_guard.fd = read_fd;
  g_guard.grace_s = grace_s;
  g_guard.code = code;
  g_guard.dump_signal = dump_signal;
  g_guard.main_thread = pthread_self();
  std::snprintf(g_guard.name, sizeof g_guard.name, "%s", name ? name : "gato node");
  std::snprintf(g_guard.report_path, sizeof g_guard.report_path, "%s", report_path ? report_path : "");
  if (stack_signal > 0) {
    void* warm[2];
    backtrace(warm, 2);  // loads libgcc_s now, so the handler never allocates
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = native_stack_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(stack_signal, &sa, nullptr) != 0) return errno;
    g_guard.stack_signal = stack_signal;
  }
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
