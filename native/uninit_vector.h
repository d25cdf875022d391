// A std::vector whose resize leaves trivially constructible elements unset, so
// a large buffer's pages are first touched by the parallel code that fills it
// rather than by a serial zero fill.
// Included by cuda/ through join.h: no napi.h, no CUDA headers.
#pragma once

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace cusim {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    if constexpr (sizeof...(A) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
  }
};

template <class T>
using UninitVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace cusim
