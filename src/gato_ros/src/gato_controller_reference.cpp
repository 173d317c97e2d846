// gato_ros/GatoController's EE reference input (embedded mode): the gato_msgs/EEReference
// subscription's callback, checked as the Python readers check it, into the window the solver
// thread samples (positions and, issue 30, the optional orientations). Apart from
// gato_controller.cpp so each file keeps one job.
#include "gato_ros/gato_controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gato_ros {

void GatoController::on_reference(const gato_msgs::msg::EEReference& m) {
  // The limits of the Python readers (gato_ros.inputs): targets within 100 m of the world
  // origin, knot_dt in [1e-6, 3600] s (the ns knot grid neither degenerates nor overflows),
  // a stamp at most 10 s ahead of the node clock (a future window would pin the reference);
  // orientations (issue 30) empty (position only) or n_knots finite unit quaternions xyzw (norm
  // within gato::kQuatUnitTol of 1, gato.references.orientations_of).
  const int n = m.n_knots;
  const std::int64_t stamp = std::int64_t(m.header.stamp.sec) * 1000000000LL + std::int64_t(m.header.stamp.nanosec);
  const bool ok = n >= 1 && n <= ref_in_.capacity() && m.positions.size() == size_t(3) * size_t(n) &&
                  std::isfinite(m.knot_dt) && m.knot_dt >= 1e-6 && m.knot_dt <= 3600.0 &&
                  std::all_of(m.positions.begin(), m.positions.end(),
                              [](double v) { return std::isfinite(v) && std::abs(v) <= 100.0; }) &&
                  stamp - get_node()->get_clock()->now().nanoseconds() <= 10 * 1000000000LL;
  if (!ok) {
    ++refs_rejected_;
    RCLCPP_ERROR_THROTTLE(get_node()->get_logger(), *get_node()->get_clock(), 2000,
                          "EE reference rejected: n_knots=%d, %zu positions, knot_dt=%g, stamp %.3f s (expected "
                          "1 <= n_knots <= %d, 3 n_knots finite positions within 100 m, 1e-6 <= knot_dt <= 3600 s, "
                          "a stamp at most 10 s ahead of the clock)", n, m.positions.size(), m.knot_dt,
                          double(stamp) * 1e-9, ref_in_.capacity());
    return;
  }
  const size_t no = m.orientations.size();
  if (no != 0 && (no != size_t(4) * size_t(n) || !gato::unit_quaternions(m.orientations.data(), size_t(n)))) {
    ++refs_rejected_;
    RCLCPP_ERROR_THROTTLE(get_node()->get_logger(), *get_node()->get_clock(), 2000,
                          "EE reference rejected: orientations holds %zu values for n_knots=%d (expected none, or "
                          "4 n_knots: finite unit quaternions x, y, z, w, norm within %g of 1)", no, n,
                          gato::kQuatUnitTol);
    return;
  }
  std::lock_guard<std::mutex> lk(ref_mutex_);
  ref_in_.stamp_ns = stamp;
  ref_in_.knot_dt = m.knot_dt;
  ref_in_.n_knots = n;
  std::copy(m.positions.begin(), m.positions.end(), ref_in_.p.begin());
  ref_in_.set_orientations_xyzw(m.orientations.data(), no ? n : 0);  // checked above: cannot fail
  ref_in_valid_ = true;
}

}  // namespace gato_ros
