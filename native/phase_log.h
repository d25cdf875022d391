// Opt-in wall-clock phase timings on stderr (CUSIM_PROFILE=1): the host side
// of a call is tuned on a GPU host reached only in batch, with no profiler
// that sees host threads. Off, a PhaseLog costs one branch per mark.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cusim {

class PhaseLog {
 public:
  explicit PhaseLog(const char* scope) : scope_(scope), on_(Enabled()), last_(Clock::now()) {}
  PhaseLog(const PhaseLog&) = delete;
  PhaseLog& operator=(const PhaseLog&) = delete;
  ~PhaseLog() {
    if (!on_ || phases_.empty()) return;
    std::string line = "cusim " + scope_ + ":";
    char buf[96];
    for (const auto& p : phases_) {
      std::snprintf(buf, sizeof buf, " %s %.2f ms (%u)", p.name, p.ms, p.calls);
      line += buf;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  static bool Enabled() {
    static const bool on = [] {
      const char* e = std::getenv("CUSIM_PROFILE");
      return e && e[0] == '1';
    }();
    return on;
  }

  // Charges the time since the previous mark (or construction) to `phase`;
  // repeated phases add up, so a per-batch loop reports totals.
  void Mark(const char* phase) {
    if (!on_) return;
    const auto now = Clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
    for (auto& p : phases_)
      if (p.name == phase) {
        p.ms += ms;
        p.calls++;
        return;
      }
    phases_.push_back({phase, ms, 1});
  }
  // Restarts the clock without charging anything (time between calls).
  void Skip() {
    if (on_) last_ = Clock::now();
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Phase {
    const char* name;  // a literal: compared by address
    double ms;
    unsigned calls;
  };
  std::string scope_;
  bool on_;
  Clock::time_point last_;
  std::vector<Phase> phases_;
};

}  // namespace cusim
