/* alloc_probe: an LD_PRELOAD library that counts heap, blocking-lock and throw calls made on
 * a thread between gato_alloc_probe_begin() and gato_alloc_probe_end() (test_ros_plugin).
 *
 * The gato plugin calls the two markers around its update() when GATO_ALLOC_PROBE is set at
 * configure time and this library is preloaded (it looks them up with dlsym); nothing else
 * (the controller_manager's loop around update(), other threads) is counted. Counted:
 *   allocs   malloc, calloc, realloc, memalign, aligned_alloc, posix_memalign, valloc (operator
 *            new and std::string / std::vector growth end up in malloc)
 *   frees    free of a non-null pointer
 *   locks    blocking pthread_mutex_lock, pthread_rwlock_rdlock / wrlock
 *   trylocks pthread_mutex_trylock, pthread_rwlock_tryrdlock / trywrlock (allowed: they never wait)
 *   throws   __cxa_throw
 * Each counted call is attributed by its call stack: to ros2_control when a frame between it
 * and the plugin's own code (the first gato_ros:: frame) belongs to ros2_control (a symbol in
 * hardware_interface::, joint_limits::, controller_interface::, controller_manager::, or an
 * object libhardware_interface / a joint limiter library: Kilted runs the command limiter of
 * enforce_command_limits inside CommandInterface::set_value), else to the plugin's side
 * (the plugin, gato_core, realtime_tools, rclcpp...).
 * Totals over all probed update() calls go to the file named by GATO_ALLOC_PROBE_OUT as one
 * line "updates allocs frees locks trylocks throws first_alloc_size first_alloc_update
 * fw_allocs fw_frees fw_locks fw_throws" (the first six counts exclude ros2_control's, fw_* are
 * ros2_control's)
 * (fixed width, rewritten in place every 100 updates, whenever a count other than updates and
 * trylocks grew, and at exit), written after the end marker so the write itself is not counted.
 * The next lines name where the first few counted calls came from (a call stack each, as
 * "kind: symbol+offset <- ..." with dladdr), for the failure message.
 * Build: cc -shared -fPIC -O2 -o alloc_probe.so alloc_probe.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

/* initial-exec TLS: no __tls_get_addr (which may allocate) in a preloaded library. */
static __thread int t_active __attribute__((tls_model("initial-exec")));

static atomic_ullong g_updates, g_allocs, g_frees, g_locks, g_trylocks, g_throws;
static atomic_ullong g_fw_allocs, g_fw_frees, g_fw_locks, g_fw_throws;
static atomic_ullong g_first_size, g_first_update; /* first counted allocation (0: none) */
static unsigned long long g_written_bad = ~0ULL;
static int g_fd = -1;

/* The call stacks of the first few counted calls (taken with the probe off: backtrace may allocate). */
#define N_TRACES 6
#define TRACE_DEPTH 40
static void* g_trace[N_TRACES][TRACE_DEPTH];
static int g_trace_len[N_TRACES];
static const char* g_trace_kind[N_TRACES];
static atomic_int g_n_traces;

static int ros2_control_frame(const Dl_info* in) {
  const char* f = in->dli_fname ? in->dli_fname : "";
  const char* s = in->dli_sname ? in->dli_sname : "";
  return strstr(f, "libhardware_interface") || strstr(f, "joint_limit") || strstr(f, "joint_saturation") ||
         strstr(s, "18hardware_interface") || strstr(s, "12joint_limits") || strstr(s, "20controller_interface") ||
         strstr(s, "18controller_manager");
}

/* 1 when the call came from ros2_control's hardware_interface / joint limiters; records the
 * stack of the first N_TRACES calls. Runs with the probe off (backtrace, dladdr may allocate). */
static int from_framework(const char* kind) {
  t_active = 0;
  void* fr[TRACE_DEPTH];
  const int n = backtrace(fr, TRACE_DEPTH);
  int fw = 0;
  for (int k = 1; k < n && !fw; ++k) {
    Dl_info in;
    if (!dladdr(fr[k], &in)) continue;
    if (in.dli_sname && strstr(in.dli_sname, "8gato_ros")) break;  /* reached the plugin */
    fw = ros2_control_frame(&in);
  }
  /* the stacks of the first few calls of the caller's own, of at most 2 of ros2_control's */
  static atomic_int n_fw_traces;
  const int i = (!fw || atomic_fetch_add(&n_fw_traces, 1) < 2) ? atomic_fetch_add(&g_n_traces, 1) : N_TRACES;
  if (i < N_TRACES) {
    memcpy(g_trace[i], fr, sizeof(void*) * (size_t)n);
    g_trace_len[i] = n;
    g_trace_kind[i] = fw ? "ros2_control" : kind;
  }
  t_active = 1;
  return fw;
}

static void count_alloc(size_t n) {
  if (!t_active) return;
  if (from_framework("alloc")) {
    atomic_fetch_add(&g_fw_allocs, 1);
    return;
  }
  if (atomic_fetch_add(&g_allocs, 1) == 0) {
    atomic_store(&g_first_size, (unsigned long long)n);
    atomic_store(&g_first_update, atomic_load(&g_updates) + 1);
  }
}

void* malloc(size_t n) { count_alloc(n); return __libc_malloc(n); }
void* calloc(size_t a, size_t b) { count_alloc(a * b); return __libc_calloc(a, b); }
void* realloc(void* p, size_t n) { count_alloc(n); return __libc_realloc(p, n); }
void* memalign(size_t al, size_t n) { count_alloc(n); return __libc_memalign(al, n); }
void* aligned_alloc(size_t al, size_t n) { count_alloc(n); return __libc_memalign(al, n); }
void* valloc(size_t n) { count_alloc(n); return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), n); }
int posix_memalign(void** out, size_t al, size_t n) {
  count_alloc(n);
  *out = __libc_memalign(al, n);
  return *out ? 0 : 12; /* ENOMEM */
}
void free(void* p) {
  if (t_active && p) atomic_fetch_add(from_framework("free") ? &g_fw_frees : &g_frees, 1);
  __libc_free(p);
}

/* Locks and throws forward to the next definition (glibc / libstdc++), looked up once. */
typedef int (*lock_fn)(void*);
static lock_fn real_mutex_lock, real_mutex_trylock, real_rd, real_wr, real_tryrd, real_trywr;
typedef void (*throw_fn)(void*, void*, void (*)(void*));
static throw_fn real_throw;

static void resolve(void) {
  real_mutex_lock = (lock_fn)dlsym(RTLD_NEXT, "pthread_mutex_lock");
  real_mutex_trylock = (lock_fn)dlsym(RTLD_NEXT, "pthread_mutex_trylock");
  real_rd = (lock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_rdlock");
  real_wr = (lock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
  real_tryrd = (lock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_tryrdlock");
  real_trywr = (lock_fn)dlsym(RTLD_NEXT, "pthread_rwlock_trywrlock");
  real_throw = (throw_fn)dlsym(RTLD_NEXT, "__cxa_throw");
}
__attribute__((constructor)) static void probe_init(void) { resolve(); }

#define FORWARD_LOCK(name, type, real, kind)                                     \
  int name(type* m) {                                                            \
    if (!real) resolve();                                                        \
    if (t_active) atomic_fetch_add(from_framework(kind) ? &g_fw_locks : &g_locks, 1); \
    return real((void*)m);                                                       \
  }
#define FORWARD_TRYLOCK(name, type, real)                                        \
  int name(type* m) {                                                            \
    if (!real) resolve();                                                        \
    if (t_active) atomic_fetch_add(&g_trylocks, 1);                              \
    return real((void*)m);                                                       \
  }
FORWARD_LOCK(pthread_mutex_lock, pthread_mutex_t, real_mutex_lock, "mutex_lock")
FORWARD_LOCK(pthread_rwlock_rdlock, pthread_rwlock_t, real_rd, "rwlock_rdlock")
FORWARD_LOCK(pthread_rwlock_wrlock, pthread_rwlock_t, real_wr, "rwlock_wrlock")
FORWARD_TRYLOCK(pthread_mutex_trylock, pthread_mutex_t, real_mutex_trylock)
FORWARD_TRYLOCK(pthread_rwlock_tryrdlock, pthread_rwlock_t, real_tryrd)
FORWARD_TRYLOCK(pthread_rwlock_trywrlock, pthread_rwlock_t, real_trywr)

void __cxa_throw(void* obj, void* type, void (*dest)(void*)) {
  if (!real_throw) resolve();
  if (t_active) atomic_fetch_add(from_framework("throw") ? &g_fw_throws : &g_throws, 1);
  real_throw(obj, type, dest);
  __builtin_unreachable();
}

static void write_counts(void) {
  if (g_fd < 0) {
    const char* path = getenv("GATO_ALLOC_PROBE_OUT");
    if (!path || !*path) return;
    g_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g_fd < 0) return;
  }
  char line[512];
  const int n = snprintf(line, sizeof line,
                         "%20llu %20llu %20llu %20llu %20llu %20llu %20llu %20llu %20llu %20llu %20llu %20llu\n",
                         atomic_load(&g_updates), atomic_load(&g_allocs), atomic_load(&g_frees),
                         atomic_load(&g_locks), atomic_load(&g_trylocks), atomic_load(&g_throws),
                         atomic_load(&g_first_size), atomic_load(&g_first_update), atomic_load(&g_fw_allocs),
                         atomic_load(&g_fw_frees), atomic_load(&g_fw_locks), atomic_load(&g_fw_throws));
  if (n <= 0) return;
  off_t off = n;
  (void)!pwrite(g_fd, line, (size_t)n, 0);
  const int nt = atomic_load(&g_n_traces) < N_TRACES ? atomic_load(&g_n_traces) : N_TRACES;
  for (int i = 0; i < nt; ++i) {
    if (!g_trace_kind[i]) continue;
    char buf[4096];
    int len = snprintf(buf, sizeof buf, "%s:", g_trace_kind[i]);
    for (int k = 1; k < g_trace_len[i] && len < (int)sizeof buf - 200; ++k) {  /* frame 0: from_framework */
      Dl_info info;
      if (dladdr(g_trace[i][k], &info) && info.dli_sname)
        len += snprintf(buf + len, sizeof buf - len, " %s+0x%lx", info.dli_sname,
                        (unsigned long)((char*)g_trace[i][k] - (char*)info.dli_saddr));
      else if (dladdr(g_trace[i][k], &info) && info.dli_fname)
        len += snprintf(buf + len, sizeof buf - len, " %s+0x%lx", info.dli_fname,
                        (unsigned long)((char*)g_trace[i][k] - (char*)info.dli_fbase));
      else
        len += snprintf(buf + len, sizeof buf - len, " %p", g_trace[i][k]);
    }
    len += snprintf(buf + len, sizeof buf - len, "\n");
    (void)!pwrite(g_fd, buf, (size_t)len, off);
    off += len;
  }
}

/* The final counts at a normal exit (SIGINT through rclcpp's handler). */
__attribute__((destructor)) static void probe_fini(void) { write_counts(); }

void gato_alloc_probe_begin(void) { t_active = 1; }

void gato_alloc_probe_end(void) {
  t_active = 0;
  const unsigned long long updates = atomic_fetch_add(&g_updates, 1) + 1;
  const unsigned long long bad = atomic_load(&g_allocs) + atomic_load(&g_frees) + atomic_load(&g_locks) +
                                 atomic_load(&g_throws) + atomic_load(&g_fw_allocs) + atomic_load(&g_fw_frees) +
                                 atomic_load(&g_fw_throws);
  if (updates % 100 == 0 || bad != g_written_bad) {
    g_written_bad = bad;
    write_counts();
  }
}
