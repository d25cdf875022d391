// Background release of engine state that holds GPU memory (see gpu.h).
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "gpu.h"

namespace cusim {
namespace {

// One long-lived thread runs the releases in order. Joined at exit, after
// the queue drains, so no release is cut short.
class Releaser {
 public:
  ~Releaser() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void Push(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(m_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    queue_.push_back(std::move(f));
    pending_++;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> f = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      try {
        f();
        f = nullptr;  // captured state goes here, off the lock
      } catch (...) {
      }
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_;
  std::deque<std::function<void()>> queue_;
  size_t pending_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

Releaser& TheReleaser() {
  static Releaser r;
  return r;
}

}  // namespace

void ReleaseInBackground(std::function<void()> release) { TheReleaser().Push(std::move(release)); }

void WaitForReleases() { TheReleaser().Wait(); }

}  // namespace cusim
