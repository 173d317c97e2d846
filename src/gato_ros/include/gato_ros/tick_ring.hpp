// gato_ros::TickRing: a single-producer / single-consumer ring of per-tick records (what the
// plugin's update() read and commanded), preallocated at configure. The real-time thread
// pushes with two relaxed/acquire-release atomic operations and plain copies (no allocation,
// no lock, no throw); a non-real-time thread pops in order and publishes them in batches
// (gato_msgs/ControlTicks). When the consumer falls behind by the whole capacity the push is
// refused and counted (dropped()): the tick's sequence number then shows as a gap downstream.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gato_ros {

class TickRing {
 public:
  /// Preallocate `capacity` ticks of `n` joints (capacity >= 2). Not real-time.
  void allocate(std::size_t capacity, std::size_t n) {
    cap_ = std::max<std::size_t>(capacity, 2);
    n_ = n;
    seq_.assign(cap_, 0);
    stamp_.assign(cap_, 0);
    mode_.assign(cap_, 0);
    q_.assign(cap_ * n, 0.0);
    qd_.assign(cap_ * n, 0.0);
    tau_.assign(cap_ * n, 0.0);
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    dropped_.store(0, std::memory_order_relaxed);
  }

  std::size_t capacity() const noexcept { return cap_; }
  std::size_t joints() const noexcept { return n_; }

  /// Producer (real-time thread): store one tick; false (and counted) when the ring is full.
  /// q, qd, tau: n values each.
  bool push(std::uint64_t seq, std::int64_t stamp_ns, std::uint8_t mode, const double* q, const double* qd,
            const double* tau) noexcept {
    if (cap_ == 0) return false;
    const std::uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) >= cap_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    const std::size_t i = std::size_t(h % cap_);
    seq_[i] = seq;
    stamp_[i] = stamp_ns;
    mode_[i] = mode;
    std::copy(q, q + n_, q_.begin() + long(i * n_));
    std::copy(qd, qd + n_, qd_.begin() + long(i * n_));
    std::copy(tau, tau + n_, tau_.begin() + long(i * n_));
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  /// Consumer (non-real-time thread): call f(seq, stamp_ns, mode, q*, qd*, tau*) for up to
  /// `max` stored ticks in push order, then release their slots. Returns how many.
  template <class F>
  std::size_t pop(std::size_t max, F&& f) {
    const std::uint64_t t = tail_.load(std::memory_order_relaxed);
    const std::uint64_t h = head_.load(std::memory_order_acquire);
    const std::size_t k = std::size_t(std::min<std::uint64_t>(h - t, max));
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t i = std::size_t((t + j) % cap_);
      f(seq_[i], stamp_[i], mode_[i], q_.data() + i * n_, qd_.data() + i * n_, tau_.data() + i * n_);
    }
    tail_.store(t + k, std::memory_order_release);
    return k;
  }

  /// Ticks refused because the ring was full, since allocate().
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::size_t cap_ = 0, n_ = 0;
  std::vector<std::uint64_t> seq_;
  std::vector<std::int64_t> stamp_;
  std::vector<std::uint8_t> mode_;
  std::vector<double> q_, qd_, tau_;
  alignas(64) std::atomic<std::uint64_t> head_{0};   // next slot the producer writes
  alignas(64) std::atomic<std::uint64_t> tail_{0};   // next slot the consumer reads
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace gato_ros
