// Detach the Fast DDS participant listener of an rclpy node before rclpy destroys the node
// (gato_ros.node_util.detach_participant_listener loads this with ctypes; issue 32).
//
// Why: rmw_fastrtps destroys a context's DomainParticipant when its last node goes
// (rmw_destroy_node -> decrement_context_impl_ref_count -> destroy_participant), and the first
// thing destroy_participant does is participant->set_listener(nullptr): the overload with no
// timeout, which waits for the participant-listener callback in flight (a discovery event:
// a peer's participant or endpoint arriving or leaving) to finish. In the Fast DDS 3.2.2 the
// ros-fastdds wheel ships, that wait never sleeps: libfastdds was built with libstdc++'s generic
// condition_variable::wait_until (no pthread_cond_clockwait), which converts the steady-clock
// deadline time_point::max() to the system clock, overflows to a time in the past, and so
// returns from pthread_cond_timedwait at once, again and again. The waiting thread spins holding
// the participant's listener mutex nearly all the time; the discovery thread that must take
// that mutex to end its callback (Fast DDS's Sentry destructor) is starved, so the callback never
// ends and the spin never stops (the CI stacks: set_listener -> steady_clock::now ->
// clock_gettime). Every C++ or Python node of this Fast DDS can hit it when a discovery callback
// runs at the moment its participant is destroyed; robot_state_publisher did in CI.
//
// The overload with a finite timeout computes a finite deadline and sleeps properly (the mutex
// is free while it waits, the callback ends and notifies it). Once it returns the listener is
// null and no callback can start (Fast DDS marks the counter -1), so rmw's own unbounded call
// later finds nothing in flight and returns at once.
#include <chrono>

#include "fastdds/dds/domain/DomainParticipant.hpp"
#include "rcl/node.h"
#include "rmw/rmw.h"
#include "rmw_fastrtps_cpp/get_participant.hpp"

extern "C" {

// rcl_node: the node's rcl_node_t (rclpy's node.handle.pointer); timeout_s: how long to wait
// for a callback in flight (>= 1). Returns 0 when the listener is detached, 1 when the node is
// not a Fast DDS (rmw_fastrtps_cpp) node or has no participant (nothing done), -1 when a
// callback was still running after timeout_s (nothing changed: the callback is itself blocked).
__attribute__((visibility("default"))) int gato_dds_detach_participant_listener(const void * rcl_node,
                                                                                 long timeout_s)
{
  if (rcl_node == nullptr) {
    return 1;
  }
  rmw_node_t * rmw_node = rcl_node_get_rmw_handle(static_cast<const rcl_node_t *>(rcl_node));
  if (rmw_node == nullptr) {
    return 1;
  }
  eprosima::fastdds::dds::DomainParticipant * participant = rmw_fastrtps_cpp::get_domain_participant(rmw_node);
  if (participant == nullptr) {
    return 1;
  }
  if (timeout_s < 1) {
    timeout_s = 1;
  }
  return participant->set_listener(nullptr, std::chrono::seconds(timeout_s)) == eprosima::fastdds::dds::RETCODE_OK
         ? 0 : -1;
}

}  // extern "C"
