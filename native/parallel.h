// The CPU backends' one parallel-for: a process-wide pool over all cores.
#pragma once

#include <cstddef>
#include <functional>

namespace cusim {

// Calls fn(begin, end) over [0, n) in chunks of at least `grain`, on the pool
// and the calling thread. Nested calls (from inside fn) run inline, so engines
// may compose without deadlock. Exceptions thrown by fn are rethrown here.
void ParallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

// Threads used by ParallelFor, the caller included. Defaults to
// CUSIM_THREADS or the hardware concurrency.
size_t NumThreads();
void SetNumThreads(size_t n);

}  // namespace cusim
