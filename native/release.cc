// Background release of engine state that holds GPU memory (see gpu.h).
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "gpu.h"

namespace cusim {
namespace {

// One long-lived thread runs the releases in order. The object is never
// destroyed: at process exit, static destruction must neither free GPU
// memory after the CUDA runtime has gone nor destroy the mutex under a
// thread still waiting on it. Whatever is queued then is left to the OS.
class Releaser {
 public:
  bool Push(std::function<void()>& f) {
    std::lock_guard<std::mutex> lock(m_);
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
        id_ = thread_.get_id();
      } catch (...) {
        return false;
      }
    }
    try {
      queue_.push_back(std::move(f));
    } catch (...) {
      return false;
    }
    pending_++;
    cv_.notify_all();
    return true;
  }
  void Wait() {
    if (std::this_thread::get_id() == id_) return;  // a release waiting on itself
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
      {
        std::function<void()> f = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        try {
          f();
        } catch (...) {
        }
      }  // f and what it captured are gone before the count drops
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_;
  std::deque<std::function<void()>> queue_;
  size_t pending_ = 0;
  std::thread thread_;
  std::thread::id id_;
};

Releaser& TheReleaser() {
  static Releaser* r = new Releaser;  // never destroyed (see above)
  return *r;
}

}  // namespace

void ReleaseInBackground(std::function<void()> release) noexcept {
  if (TheReleaser().Push(release)) return;
  try {
    release();
  } catch (...) {
  }
}

void WaitForReleases() { TheReleaser().Wait(); }

}  // namespace cusim
