#include "core/numerics/observer.h"

#include "absl/strings/str_cat.h"
#include "core/config/e8m0_tiles.h"
#include "core/numerics/histogram_observer.h"
#include "core/numerics/imatrix_mse_observer.h"
#include "core/numerics/minmax_observer.h"
#include "core/numerics/quant_layout.h"

namespace quark {

absl::StatusOr<std::unique_ptr<Observer>> MakeObserver(const QuantSpec& spec, TensorRole role) {
  if (auto st = ValidateSpecForNumerics(spec); !st.ok()) return st;
  if (spec.is_dynamic) return absl::InvalidArgumentError("is_dynamic: dynamic tensors are not observed");
  if (IsCastType(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("dtype: ", std::string(Name(spec.dtype)), " is a cast and needs no observer"));
  }
  // #30 E8M0 tiles observe each tile's min/max (their scale is then made a power of two), not MX blocks.
  if (IsOcpMx(spec)) return std::unique_ptr<Observer>(std::make_unique<MxBlockObserver>(spec, role));
  switch (spec.observer) {
    case ObserverKind::kPercentile:
      return std::unique_ptr<Observer>(std::make_unique<PercentileObserver>(spec));
    case ObserverKind::kMse:
      return std::unique_ptr<Observer>(std::make_unique<MseObserver>(spec));
    case ObserverKind::kMinMax:
    case ObserverKind::kMxBlock:
      return std::unique_ptr<Observer>(std::make_unique<MinMaxObserver>(spec, role));
    case ObserverKind::kImatrixMse:
      // Its parameters need the layer's importance (imatrix_mse_pass.h); without one ComputeParams refuses.
      return std::unique_ptr<Observer>(std::make_unique<ImatrixMseObserver>(spec));
  }
  return absl::InvalidArgumentError("observer: unknown value");
}

}  // namespace quark
