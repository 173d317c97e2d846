// The shutdown hang of issue 32, reproduced in the installed libfastdds (test/test_exit_guard_dds.py
// builds and runs this): participant A's listener is inside a discovery callback (B's arrival,
// held open 300 ms) when the main thread detaches the listener, as rmw_fastrtps's
// destroy_participant does when a node's participant is destroyed.
//   mode inf: set_listener(nullptr), no timeout (rmw_fastrtps's call);
//   mode fin: set_listener(nullptr, seconds(5)) (libgato_dds_listener, gato's teardown).
// A watchdog ends the process with code 3 and the line HUNG when set_listener has not returned
// 3 s after the callback ended (it only waits for that callback: any return is immediate).
// Usage: set_listener_wait inf|fin DOMAIN_ID
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/domain/DomainParticipantListener.hpp>
#include <fastdds/rtps/transport/shared_mem/SharedMemTransportDescriptor.hpp>
using namespace eprosima::fastdds::dds;
std::atomic<int> entered{0};
std::atomic<long> left_ns{0};
struct L : DomainParticipantListener {
  void on_participant_discovery(DomainParticipant*, eprosima::fastdds::rtps::ParticipantDiscoveryStatus,
                                const ParticipantBuiltinTopicData&, bool& ignore) override {
    ignore = false;
    if (entered.fetch_add(1) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      left_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    }
  }
};
int main(int argc, char** argv) {
  bool inf = argc > 1 && !strcmp(argv[1], "inf");
  int domain = argc > 2 ? atoi(argv[2]) : 77;
  auto* f = DomainParticipantFactory::get_instance();
  L l;
  // shared memory only: discovery never leaves this machine (the ROS processes of the suite run
  // with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST; these are plain Fast DDS participants)
  DomainParticipantQos qos = PARTICIPANT_QOS_DEFAULT;
  qos.transport().use_builtin_transports = false;
  qos.transport().user_transports.push_back(
    std::make_shared<eprosima::fastdds::rtps::SharedMemTransportDescriptor>());
  DomainParticipant* a = f->create_participant(domain, qos, &l);
  DomainParticipant* b = f->create_participant(domain, qos);
  if (a == nullptr || b == nullptr) { printf("no participant\n"); return 2; }
  while (!entered) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread([] {
    while (!left_ns) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    printf("HUNG: set_listener had not returned 3 s after the callback ended\n"); fflush(stdout); _exit(3);
  }).detach();
  ReturnCode_t rc = inf ? a->set_listener(nullptr) : a->set_listener(nullptr, std::chrono::seconds(5));
  printf("set_listener(%s) returned %d\n", inf ? "no timeout" : "5 s", (int)rc); fflush(stdout);
  f->delete_participant(b); f->delete_participant(a);
  return rc == RETCODE_OK ? 0 : 1;
}
