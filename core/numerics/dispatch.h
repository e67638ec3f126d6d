// Calls a generic lambda with the C++ element type of a float32 / bfloat16 / float16 tensor.
#pragma once

#include <ATen/ATen.h>

#include <type_traits>

namespace quark {

template <typename T>
struct TypeTag {
  using type = T;
};

/// fn(TypeTag<float>{}) etc.; the caller has checked IsSupportedInputDtype(t).
template <typename Fn>
decltype(auto) DispatchFloating(at::ScalarType t, Fn&& fn) {
  if (t == at::kBFloat16) return fn(TypeTag<c10::BFloat16>{});
  if (t == at::kHalf) return fn(TypeTag<c10::Half>{});
  return fn(TypeTag<float>{});
}

}  // namespace quark
