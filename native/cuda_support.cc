#include "cuda_support.h"

#include <sstream>

namespace cusim {

std::string CudaVersion(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

int MinimumDriverBranch(int major) {
  switch (major) {
    case 11: return 450;
    case 12: return 525;
    case 13: return 580;
    default: return 0;
  }
}

std::string DriverTooOld(int driverVersion, int runtimeVersion, const std::string& release) {
  const int major = runtimeVersion / 1000;
  if (driverVersion > 0 && driverVersion / 1000 >= major) return "";
  const int branch = MinimumDriverBranch(major);
  const std::string need = branch > 0 ? "an NVIDIA driver of the R" + std::to_string(branch) + " branch or newer"
                                      : "an NVIDIA driver for CUDA " + std::to_string(major) + ".0 or newer";
  std::ostringstream s;
  if (driverVersion <= 0) {
    s << "no driver: no NVIDIA driver (libcuda.so.1) was found; this addon's CUDA " << CudaVersion(runtimeVersion)
      << " runtime needs " << need << ". Install it to use the GPU; until then every engine runs on the CPU";
    return s.str();
  }
  s << "driver too old: the NVIDIA driver" << (release.empty() ? "" : " " + release) << " supports CUDA "
    << CudaVersion(driverVersion) << ", but this addon's CUDA " << CudaVersion(runtimeVersion) << " runtime needs "
    << need << ". Update the driver to use the GPU; until then every engine runs on the CPU";
  return s.str();
}

bool ArchSupported(int major, int minor, const std::string& archs) {
  const int cc = major * 10 + minor;
  std::string list = archs;
  for (char& c : list)
    if (c == ',') c = ';';
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ';')) {
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    const std::string num = item.substr(0, dash);
    const std::string kind = dash == std::string::npos ? "" : item.substr(dash + 1);
    int arch = 0;
    size_t used = 0;
    try {
      arch = std::stoi(num, &used);
    } catch (...) {
      continue;
    }
    // A family or feature suffix ("90a", "100f") binds SASS to its own GPUs.
    const bool plain = used == num.size();
    const bool sass = kind.empty() || kind == "real";
    const bool ptx = kind.empty() || kind == "virtual";
    if (sass && (plain ? arch / 10 == major && arch <= cc : arch == cc)) return true;
    if (ptx && plain && arch <= cc) return true;
  }
  return false;
}

}  // namespace cusim
