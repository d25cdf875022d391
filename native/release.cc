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
// The thread runs the addon's code, so it must not outlive the addon: Node
// unloads the addon when the last environment using it ends (a worker that
// loaded it, with the main thread never having done so), and Stop() ends the
// thread there (see EnvEnded, napi_util.h).
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
  // Runs what is queued (and whatever those releases queue), then joins the
  // thread; the next Push starts a new one. Only the releases themselves can
  // push meanwhile (no environment is left to), and they find the thread
  // still joinable, so nothing queued is stranded.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!thread_.joinable() || std::this_thread::get_id() == id_) return;
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::lock_guard<std::mutex> lock(m_);
    stop_ = false;
    id_ = std::thread::id();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;  // stopping, and nothing left
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
  bool stop_ = false;
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

void StopReleases() { TheReleaser().Stop(); }

}  // namespace cusim
