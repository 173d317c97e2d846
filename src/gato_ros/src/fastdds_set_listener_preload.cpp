// LD_PRELOAD interposer for the C++ nodes of a bringup (robot_state_publisher, ros2_control_node,
// ros2 bag record; issue 32): Fast DDS DomainParticipant::set_listener(listener), the overload with
// no timeout, becomes the overload with a finite one, repeated until it succeeds.
//
// Why: rmw_fastrtps destroys a context's participant when its last node goes, and first calls
// participant->set_listener(nullptr) (the unbounded overload). In the ros-fastdds 3.2.2 wheel that
// wait spins instead of sleeping when a discovery callback is in flight (libstdc++'s generic
// condition_variable::wait_until converts steady_clock::time_point::max() to the system clock and
// overflows: pthread_cond_timedwait returns at once, again and again), holding the listener mutex
// the callback needs to finish: the node never exits (dds_listener.cpp has the whole story). gato's
// rclpy nodes detach the listener themselves (gato_ros.node_util.detach_participant_listener); a
// C++ node's teardown is rclcpp's, which gato cannot change without rebuilding the overlay, so the
// launch files preload this library into those processes instead (gato_ros.fastdds_preload: only
// where the Fast DDS rmw is in use).
//
// What it does: the interposed one-argument overload calls the two-argument one (listener,
// seconds(T)), whose wait has a finite deadline and so sleeps; the callback in flight then ends
// and the call returns. Should a callback really be blocked for T, it says so on stderr (naming
// the call) and waits T again: the semantics of the unbounded call (never return while a callback
// may still use the listener, which rmw deletes right after) are kept, the spin is not.
// T: GATO_FASTDDS_SET_LISTENER_TIMEOUT_S (default 2 s, at least 1).
//
// Nothing else is interposed; no Fast DDS symbol is linked (the real overload is found with
// dlsym(RTLD_NEXT)), so a process without Fast DDS never calls into this library.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

// eprosima::fastdds::dds::ReturnCode_t is an int32_t in Fast DDS 3; RETCODE_OK is 0. The
// participant and the listener are only passed through. std::chrono::seconds (a trivially
// copyable duration<long>) is passed like a long in the x86-64 / AArch64 calling conventions.
using ReturnCode = int32_t;
using BoundedSetListener = ReturnCode (*)(void * participant, void * listener, std::chrono::seconds timeout);

constexpr const char * kOneArg =
  "_ZN8eprosima7fastdds3dds17DomainParticipant12set_listenerEPNS1_25DomainParticipantListenerE";
constexpr const char * kBounded =
  "_ZN8eprosima7fastdds3dds17DomainParticipant12set_listenerEPNS1_25DomainParticipantListenerE"
  "NSt6chrono8durationIlSt5ratioILl1ELl1EEEE";

long timeout_s()
{
  const char * v = std::getenv("GATO_FASTDDS_SET_LISTENER_TIMEOUT_S");
  long t = v != nullptr ? std::strtol(v, nullptr, 10) : 2;
  return t < 1 ? 1 : t;
}

BoundedSetListener bounded()
{
  static BoundedSetListener fn = reinterpret_cast<BoundedSetListener>(dlsym(RTLD_NEXT, kBounded));
  return fn;
}

}  // namespace

// The one-argument overload, under its mangled name (DomainParticipant::set_listener(
// DomainParticipantListener*)), so the dynamic linker binds rmw_fastrtps's call to it.
extern "C" __attribute__((visibility("default"))) ReturnCode gato_fastdds_set_listener_one_arg(
  void * participant, void * listener) __asm__(
  "_ZN8eprosima7fastdds3dds17DomainParticipant12set_listenerEPNS1_25DomainParticipantListenerE");

extern "C" ReturnCode gato_fastdds_set_listener_one_arg(void * participant, void * listener)
{
  BoundedSetListener fn = bounded();
  if (fn == nullptr) {
    // No bounded overload in this Fast DDS: call the real one-argument overload unchanged.
    using OneArg = ReturnCode (*)(void *, void *);
    static OneArg real = reinterpret_cast<OneArg>(dlsym(RTLD_NEXT, kOneArg));
    return real != nullptr ? real(participant, listener) : 1;   // 1: RETCODE_ERROR
  }
  const long t = timeout_s();
  for (long waited = 0;; waited += t) {
    const auto t0 = std::chrono::steady_clock::now();
    ReturnCode rc = fn(participant, listener, std::chrono::seconds(t));
    if (rc != 0 && std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500 * t)) {
      return rc;                       // an error that is not the wait expiring: passed on as it is
    }
    if (rc == 0) {
      if (waited > 0) {
        std::fprintf(stderr, "[gato_fastdds_preload] DomainParticipant::set_listener returned after %ld s\n",
                     waited + t);
      }
      return rc;
    }
    std::fprintf(stderr,
                 "[gato_fastdds_preload] ERROR: Fast DDS DomainParticipant::set_listener(%s): a participant "
                 "listener callback is still running after %ld s; waiting %ld s more\n",
                 listener == nullptr ? "nullptr" : "listener", waited + t, t);
    std::fflush(stderr);
  }
}
