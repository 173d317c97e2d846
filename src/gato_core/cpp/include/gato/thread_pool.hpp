// A small fixed thread pool for the batch dimension: run(count, fn) calls
// fn(i) for i in [0, count), each index claimed by whichever thread is free
// (one shared atomic counter), so a thread that runs slower -- the vCPUs of a
// shared host do, and not always the same one -- does fewer entries instead
// of holding the others up. Nothing is allocated per call. The entries own
// their workspaces, so which thread runs an entry changes no result.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace gato {

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : n_(threads < 1 ? 1 : threads) {
    for (int t = 1; t < n_; ++t) workers_.emplace_back([this] { worker(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
      ++generation_;
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
      next_.store(0, std::memory_order_relaxed);
      pending_ = n_ - 1;
      ++generation_;
    }
    cv_.notify_all();
    for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count;) fn(i);
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [this] { return pending_ == 0; });
  }

 private:
  template <typename F>
  static void trampoline(void* ctx, int i) { (*static_cast<F*>(ctx))(i); }

  void worker() {
    unsigned long seen = 0;
    for (;;) {
      void (*task)(void*, int);
      void* ctx;
      int count;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        task = task_;
        ctx = ctx_;
        count = count_;
      }
      // The task was published under m_; results are published by the
      // decrement of pending_ under m_, so the claim itself can be relaxed.
      for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < count;) task(ctx, i);
      {
        std::lock_guard<std::mutex> lk(m_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  unsigned long generation_ = 0;
  bool stop_ = false;
  void (*task_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  int count_ = 0;
  int pending_ = 0;
  alignas(64) std::atomic<int> next_{0};  // next unclaimed index (own cache line)
  char pad_[64 - sizeof(std::atomic<int>)] = {};
};

}  // namespace gato
