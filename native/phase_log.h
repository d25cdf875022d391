// Opt-in wall-clock phase timings and resident memory on stderr (CUSIM_PROFILE=1): the host side
// of a call is tuned on a GPU host reached only in batch, with no profiler
// that sees host threads. Off, a PhaseLog costs one branch per mark.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

namespace cusim {

class PhaseLog {
 public:
  explicit PhaseLog(const char* scope) : scope_(scope), on_(Enabled()), last_(Clock::now()) {
    if (!on_) return;
    start_ = last_;
    Since(start_);  // the process's origin: the first PhaseLog made
  }
  PhaseLog(const PhaseLog&) = delete;
  PhaseLog& operator=(const PhaseLog&) = delete;
  ~PhaseLog() {
    if (!on_ || phases_.empty()) return;
    std::string line = "cusim " + scope_ + ":";
    char buf[96];
    // When, on one clock for the process: lines of calls that overlap (blocks
    // in flight) read as a timeline.
    std::snprintf(buf, sizeof buf, " [%.1f-%.1f ms]", Since(start_), Since(last_));
    line += buf;
    for (const auto& p : phases_) {
      std::snprintf(buf, sizeof buf, " %s %.2f ms (%u; RSS %.0f MB)", p.name, p.ms, p.calls, p.rssMB);
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
    const double rss = ResidentMB();
    for (auto& p : phases_)
      if (p.name == phase) {
        p.ms += ms;
        p.calls++;
        p.rssMB = rss;
        return;
      }
    phases_.push_back({phase, ms, 1, rss});
  }
  // Restarts the clock without charging anything (time between calls).
  void Skip() {
    if (on_) last_ = Clock::now();
  }

 private:
  using Clock = std::chrono::steady_clock;
  // Milliseconds from the first PhaseLog of the process to t.
  static double Since(Clock::time_point t) {
    static const Clock::time_point origin = Clock::now();
    return std::chrono::duration<double, std::milli>(t - origin).count();
  }
  struct Phase {
    const char* name;  // a literal: compared by address
    double ms;
    unsigned calls;
    double rssMB;  // the process's resident memory at the phase's (last) end
  };
  // Resident memory now (Linux /proc/self/statm; 0 elsewhere): where a
  // large job's memory goes, phase by phase.
  static double ResidentMB() {
    double mb = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      unsigned long long size = 0, resident = 0;
      if (std::fscanf(f, "%llu %llu", &size, &resident) == 2)
        mb = double(resident) * double(sysconf(_SC_PAGESIZE)) / 1048576.0;
      std::fclose(f);
    }
    return mb;
  }
  std::string scope_;
  Clock::time_point start_;
  bool on_;
  Clock::time_point last_;
  std::vector<Phase> phases_;
};

}  // namespace cusim
