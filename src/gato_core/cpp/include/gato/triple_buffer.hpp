// A wait-free single-writer / single-reader handoff of the latest value (the
// classic triple buffer): the writer fills its back slot and publishes it; the
// reader takes the newest published slot when there is one. Neither side ever
// blocks, allocates or waits on the other, so one side may be a real-time loop.
// Values published while the reader did not look are overwritten (latest wins).
#pragma once

#include <atomic>
#include <cstdint>

namespace gato {

template <typename T>
class TripleBuffer {
 public:
  TripleBuffer() = default;
  TripleBuffer(const TripleBuffer&) = delete;
  TripleBuffer& operator=(const TripleBuffer&) = delete;

  /// Calls init(slot) on the three slots (preallocation; not thread-safe, call
  /// before the two sides start) and forgets anything published.
  template <typename F>
  void init(F&& init_slot) {
    for (auto& s : slots_) init_slot(s);
    back_ = 0;
    middle_.store(1, std::memory_order_relaxed);
    front_ = 2;
  }

  /// Writer: the slot to fill next (owned by the writer until publish()).
  T& back() { return slots_[back_]; }
  /// Writer: hands the filled back slot to the reader; returns the new back slot.
  T& publish() {
    back_ = middle_.exchange(static_cast<std::uint8_t>(back_ | kFresh), std::memory_order_acq_rel) & kIndex;
    return slots_[back_];
  }

  /// Reader: swaps in the newest published slot; false when nothing new was
  /// published since the last call (front() is then unchanged).
  bool take() {
    if (!(middle_.load(std::memory_order_acquire) & kFresh)) return false;
    front_ = middle_.exchange(front_, std::memory_order_acq_rel) & kIndex;
    return true;
  }
  /// Reader: the slot last taken (owned by the reader until the next take()).
  T& front() { return slots_[front_]; }
  const T& front() const { return slots_[front_]; }

 private:
  static constexpr std::uint8_t kIndex = 0x3, kFresh = 0x4;
  T slots_[3];
  std::uint8_t back_ = 0, front_ = 2;
  std::atomic<std::uint8_t> middle_{1};
};

}  // namespace gato
