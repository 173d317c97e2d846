// Reproducer of issue 32's shutdown hang through rmw_fastrtps (LD_PRELOAD into one node; used by
// test/dds/shutdown_hang_repro.py; build: g++ -O2 -shared -fPIC hold_discovery_callback.cpp -o
// libhold_discovery_callback.so -ldl): when rmw starts destroying the node's participant (destroy_participant), it waits (up to
// 1 s) until a participant-listener callback (a discovery event from churning peers, which
// calls rmw_dds_common::GraphCache on a Fast DDS thread) is in flight and holds that callback open
// 300 ms, so destroy_participant's set_listener(nullptr) finds a callback in flight, as it did by
// chance in CI. Nothing else changes. With no callback reaching rmw's listener within 1 s (the
// listener already detached), destroy_participant just proceeds.
#include <dlfcn.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
static std::atomic<int> armed{0}, held{0};
static void maybe_hold() {
  if (syscall(SYS_gettid) == getpid() || !armed.load()) return;
  int expected = 0;
  if (held.compare_exchange_strong(expected, 1)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
}
static void* dds_common() { return dlopen("librmw_dds_common.so", RTLD_NOLOAD | RTLD_LAZY); }
#define FWD(name, ret, params, args) \
  extern "C" ret name params { \
    using F = ret (*) params; static F real = (F)dlsym(dds_common(), #name); maybe_hold(); return real args; }
FWD(_ZN14rmw_dds_common10GraphCache10add_entityERK9rmw_gid_sRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESB_RK18rosidl_type_hash_sS3_RK17rmw_qos_profile_sb,
    bool, (void* s, const void* g, const void* t, const void* ty, const void* h, const void* pg, const void* q, bool r), (s, g, t, ty, h, pg, q, r))
FWD(_ZN14rmw_dds_common10GraphCache13remove_entityERK9rmw_gid_sb, bool, (void* s, const void* g, bool r), (s, g, r))
FWD(_ZN14rmw_dds_common10GraphCache15add_participantERK9rmw_gid_sRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE,
    void, (void* s, const void* g, const void* e), (s, g, e))
FWD(_ZN14rmw_dds_common10GraphCache18remove_participantERK9rmw_gid_s, bool, (void* s, const void* g), (s, g))
extern "C" int _ZN23rmw_fastrtps_shared_cpp19destroy_participantEP21CustomParticipantInfo(void* info) {
  using F = int (*)(void*);
  static F real = (F)dlsym(dlopen("librmw_fastrtps_shared_cpp.so", RTLD_NOLOAD | RTLD_LAZY),
                           "_ZN23rmw_fastrtps_shared_cpp19destroy_participantEP21CustomParticipantInfo");
  armed = 1;
  for (int i = 0; i < 100 && !held.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  fprintf(stderr, held.load() ? "HOLD: a discovery callback is in flight at destroy_participant\n" : "HOLD: no discovery callback reached the listener within 1 s\n");
  return real(info);
}
