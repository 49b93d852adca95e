// pool3d.max_pooling_3d_backward: element type and layout dispatch.
#include "kernels.h"
#include "layouts.h"
#include "shared_kernels/dispatch.h"
#include "shared_kernels/element_types.h"

namespace pool3d {
namespace {

template <class T>
void Dispatch(const Geom& g, const void* go, const void* x, const void* y,
              void* dx) {
  using M = typename T::M;
  auto* gm = static_cast<const M*>(go);
  auto* xm = static_cast<const M*>(x);
  auto* ym = static_cast<const M*>(y);
  auto* dm = static_cast<M*>(dx);
  if (g.in_cl != g.out_cl) return BackwardGeneric<T>(g, xm, ym, gm, dm);
  if (g.in_cl) return BackwardNdhwc<T>(g, xm, ym, gm, dm);
  return BackwardNcdhw<T>(g, xm, ym, gm, dm);
}

}  // namespace

void MaxPool3dBackward(const Geom& g, ElementType t, const CallOperands& ops) {
  ForElementType(t, [&](auto tag) {
    Dispatch<decltype(tag)>(g, ops.go, ops.x, ops.y_in, ops.dx);
  });
}

}  // namespace pool3d
