#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cusim {
namespace {

thread_local bool tInsideParallel = false;

// One ParallelFor call. Chunks are claimed dynamically so uneven rows balance.
struct Job {
  const std::function<void(size_t, size_t)>* fn;
  size_t n, chunk, chunks;
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  std::atomic<bool> failed{false};
  std::mutex m;
  std::condition_variable cv;
  std::exception_ptr error;

  bool exhausted() const { return next.load(std::memory_order_relaxed) >= chunks; }

  bool runOne() {
    size_t c = next.fetch_add(1);
    if (c >= chunks) return false;
    if (!failed.load(std::memory_order_relaxed)) {
      try {
        size_t b = c * chunk;
        (*fn)(b, std::min(n, b + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
    if (finished.fetch_add(1) + 1 == chunks) {
      std::lock_guard<std::mutex> lock(m);
      cv.notify_all();
    }
    return true;
  }
};

size_t DefaultThreads() {
  if (const char* env = std::getenv("CUSIM_THREADS")) {
    long v = std::strtol(env, nullptr, 10);
    if (v > 0) return size_t(v);
  }
  return std::max<size_t>(1, std::thread::hardware_concurrency());
}

class Pool {
 public:
  explicit Pool(size_t threads) : threads_(threads) {
    for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { Loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  size_t threads() const { return threads_; }

  void Run(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(m_);
      jobs_.push_back(job);
    }
    cv_.notify_all();
    tInsideParallel = true;
    while (job->runOne()) {
    }
    tInsideParallel = false;
    std::unique_lock<std::mutex> lock(job->m);
    job->cv.wait(lock, [&] { return job->finished.load() == job->chunks; });
  }

 private:
  void Loop() {
    tInsideParallel = true;
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] {
          while (!jobs_.empty() && jobs_.front()->exhausted()) jobs_.pop_front();
          return stop_ || !jobs_.empty();
        });
        if (jobs_.empty()) return;  // stop_ and nothing left
        job = jobs_.front();
      }
      while (job->runOne()) {
      }
    }
  }

  size_t threads_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stop_ = false;
};

std::mutex gPoolMutex;
std::shared_ptr<Pool> gPool;
size_t gThreads = 0;

std::shared_ptr<Pool> GetPool() {
  std::lock_guard<std::mutex> lock(gPoolMutex);
  if (gThreads == 0) gThreads = DefaultThreads();
  if (!gPool || gPool->threads() != gThreads) gPool = std::make_shared<Pool>(gThreads);
  return gPool;
}

}  // namespace

size_t NumThreads() {
  std::lock_guard<std::mutex> lock(gPoolMutex);
  if (gThreads == 0) gThreads = DefaultThreads();
  return gThreads;
}

void SetNumThreads(size_t n) {
  std::lock_guard<std::mutex> lock(gPoolMutex);
  gThreads = n == 0 ? DefaultThreads() : n;
}

void ParallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t threads = NumThreads();
  if (tInsideParallel || threads <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // Several chunks per thread so that uneven work still balances.
  size_t chunk = std::max(grain, (n + threads * 8 - 1) / (threads * 8));
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunk = chunk;
  job->chunks = (n + chunk - 1) / chunk;
  auto pool = GetPool();
  pool->Run(job);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace cusim
