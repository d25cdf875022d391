// Whether this host can run the addon's CUDA kernels, decided from the
// versions and capabilities the driver reports. Plain functions of their
// inputs, without CUDA calls, so that tests inject the versions of hosts they
// cannot be run on (the addon exports them as cudaSupport).
#pragma once

#include <string>

namespace cusim {

// "13.0" for 13000: CUDA versions as cudaDriverGetVersion and
// cudaRuntimeGetVersion report them.
std::string CudaVersion(int version);

// CUDA versions as cudaDriverGetVersion and cudaRuntimeGetVersion give them:
// 1000 * major + 10 * minor (0 from the driver: none is installed).
// `release` is the driver's own version ("550.54.14") where known, else "".
// Empty when the driver can run this runtime: from CUDA 11 on, a runtime runs
// on any driver of its major version or newer (minor version compatibility).
// Otherwise the reason, naming both versions and the fix.
std::string DriverTooOld(int driverVersion, int runtimeVersion, const std::string& release);

// The oldest driver branch that runs runtime major version `major`
// (CUDA 11: R450, 12: R525, 13: R580), 0 where unknown.
int MinimumDriverBranch(int major);

// Whether a GPU of compute capability major.minor runs kernels built for
// `archs`, CMake's CUDA_ARCHITECTURES list ("75-real;80-real;...;120", or
// with commas): SASS
// for X.y runs on X.z with z >= y; PTX for X.y (a bare or "-virtual" entry) is
// compiled by the driver for any GPU of X.y or newer.
bool ArchSupported(int major, int minor, const std::string& archs);

// Whether the tensor-core kernel families (mma.sync on int8 and 1-bit
// fragments of sm_80, cp.async) run on this compute capability; older GPUs
// run the CUDA-core families.
inline bool TensorCoreKernels(int ccMajor) { return ccMajor >= 8; }

}  // namespace cusim
