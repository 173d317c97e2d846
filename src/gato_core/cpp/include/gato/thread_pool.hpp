// A small fixed thread pool for the batch dimension: run(count, fn) calls
// fn(i) for i in [0, count), each index claimed by whichever thread is free,
// so a thread that runs slower -- the vCPUs of a shared host do, and not
// always the same one -- does fewer entries instead of holding the others up.
// Even threads (the caller is thread 0) claim from the front, odd ones from
// the back, so two threads work on entries far apart in memory (adjacent
// entries' heap blocks can share a cache line) until they meet.
// Waits spin for a bounded time before they sleep (yielding the CPU after the
// first 50 us): a worker for the next run (the caller's Python work between
// two solves is tens of microseconds), the caller for the last worker's entry. Waking a sleeping thread on another
// vCPU costs an inter-processor interrupt and the scheduler's latency, twice
// per run, where one B = 32 two-thread run is ~2 ms (issue 37).
// Nothing is allocated per call. The entries own their workspaces, so which
// thread runs an entry changes no result.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace gato {

class ThreadPool {
 public:
  /// How long a worker polls for the next run before it sleeps, and how long
  /// the caller polls for the workers' last entries before it sleeps.
  static constexpr std::chrono::microseconds kWorkerSpin{300};
  static constexpr std::chrono::microseconds kCallerSpin{2000};
  static constexpr std::chrono::microseconds kPauseSpin{50};

  explicit ThreadPool(int threads) : n_(threads < 1 ? 1 : threads) {
    for (int t = 1; t < n_; ++t) workers_.emplace_back([this, t] { worker(t); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }

  /// Calls fn(i) for every i in [0, count); returns when all calls are done.
  template <typename F>
  void run(int count, F& fn) {
    if (n_ == 1 || count <= 1) {
      for (int i = 0; i < count; ++i) fn(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      task_ = &trampoline<F>;
      ctx_ = &fn;
      count_ = count;
      claimed_.store(0, std::memory_order_relaxed);
      front_.store(0, std::memory_order_relaxed);
      back_.store(count - 1, std::memory_order_relaxed);
      pending_.store(n_ - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    if (sleeping_.load(std::memory_order_acquire) > 0) cv_.notify_all();
    for (int i; claim(0, count, i);) fn(i);
    // The workers' results are published by their release-decrement of pending_.
    if (spin_until(kCallerSpin, [this] { return pending_.load(std::memory_order_acquire) == 0; })) return;
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }

 private:
  template <typename F>
  static void trampoline(void* ctx, int i) { (*static_cast<F*>(ctx))(i); }

  static void cpu_relax() {
#if !defined(__CUDACC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#endif
  }

  /// Polls done() for up to `limit`; true as soon as it holds. After kPauseSpin it yields
  /// between polls, so that on a loaded host a runnable thread of this CPU (maybe the one
  /// being waited for) gets it.
  template <typename D>
  static bool spin_until(std::chrono::microseconds limit, D done) {
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      for (int k = 0; k < 64; ++k) {
        if (done()) return true;
        cpu_relax();
      }
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited >= limit) return done();
      if (waited >= kPauseSpin) std::this_thread::yield();
    }
  }

  /// The next unclaimed index for thread t (even: from the front, odd: from the back).
  /// At most `count` claims succeed, so the two ends never hand out the same index.
  bool claim(int t, int count, int& i) {
    if (claimed_.fetch_add(1, std::memory_order_relaxed) >= count) return false;
    i = (t & 1) ? back_.fetch_sub(1, std::memory_order_relaxed) : front_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  void worker(int t) {
    unsigned long seen = 0;
    for (;;) {
      void (*task)(void*, int);
      void* ctx;
      int count;
      spin_until(kWorkerSpin, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock<std::mutex> lk(m_);
        if (generation_.load(std::memory_order_relaxed) == seen) {
          sleeping_.fetch_add(1, std::memory_order_relaxed);
          cv_.wait(lk, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
          sleeping_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = generation_.load(std::memory_order_relaxed);
        if (stop_) return;
        task = task_;
        ctx = ctx_;
        count = count_;
      }
      // The task was published under m_ (read here under m_ too); the claims themselves
      // can be relaxed.
      for (int i; claim(t, count, i);) task(ctx, i);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Taking m_ orders this notify after a caller that checked pending_ under m_ and
        // went to sleep (no lost wake-up).
        std::lock_guard<std::mutex> lk(m_);
        done_cv_.notify_one();
      }
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::atomic<unsigned long> generation_{0};  // written under m_
  std::atomic<int> sleeping_{0};              // workers in cv_.wait (changed under m_)
  bool stop_ = false;
  void (*task_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  int count_ = 0;
  alignas(64) std::atomic<int> pending_{0};  // workers still running this run
  alignas(64) std::atomic<int> claimed_{0};  // claims made (own cache lines: every claim writes them)
  alignas(64) std::atomic<int> front_{0};
  alignas(64) std::atomic<int> back_{0};
  char pad_[64 - sizeof(std::atomic<int>)] = {};
};

}  // namespace gato
