// The lazy Adam update of optim.GridAdam for CPU tensors (built by optim/lazy_adam.py).
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <cmath>

#include <atomic>

namespace {

constexpr int32_t kSeen = int32_t(1) << 30;  // marks an element in its step count while indices are checked

// Whether `indices` (entries with a nonzero value) name each element at most once; the step counts are used as
// marks (their bit kSeen; counts stay far below it) and are left unchanged.
template <typename scalar_t>
bool unique_indices(int32_t* t, const int64_t* idx, const scalar_t* g, int64_t n) {
  std::atomic<bool> repeated{false};
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end && !repeated.load(std::memory_order_relaxed); ++j) {
      if (g[j] != scalar_t(0) && (__atomic_fetch_or(&t[idx[j]], kSeen, __ATOMIC_RELAXED) & kSeen)) repeated = true;
    }
  });
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) __atomic_fetch_and(&t[idx[j]], ~kSeen, __ATOMIC_RELAXED);
  });
  return !repeated;
}

}  // namespace

// Lazy Adam (tiny-cuda-nn's update of non-matrix parameters): elements whose gradient is exactly 0 are skipped,
// the others take torch.optim.Adam's update with their own step count in `steps`. The gradient is either
// `values` [M] at element `indices` [M], or dense (`values` like `param`, `indices` empty). Returns false, and
// changes nothing, when `indices` repeat an element (an uncoalesced gradient: coalesce it and call again).
bool lazy_adam(torch::Tensor param, torch::Tensor exp_avg, torch::Tensor exp_avg_sq, torch::Tensor steps,
               const torch::Tensor& indices, const torch::Tensor& values, double lr, double beta1, double beta2, double eps) {
  const bool dense = indices.numel() == 0;
  bool applied = true;
  AT_DISPATCH_FLOATING_TYPES(param.scalar_type(), "lazy_adam", [&] {
    scalar_t *p = param.data_ptr<scalar_t>(), *m = exp_avg.data_ptr<scalar_t>(), *v = exp_avg_sq.data_ptr<scalar_t>();
    int32_t* t = steps.data_ptr<int32_t>();
    const int64_t* idx = dense ? nullptr : indices.data_ptr<int64_t>();
    const scalar_t* g = values.data_ptr<scalar_t>();
    if (!dense && !unique_indices(t, idx, g, values.numel())) {
      applied = false;
      return;
    }
    at::parallel_for(0, values.numel(), 4096, [&](int64_t begin, int64_t end) {
      int32_t cached_step = 0;  // neighbouring elements mostly share a step count: reuse its bias corrections
      scalar_t step_size = 0, correction2_sqrt = 1;
      for (int64_t j = begin; j < end; ++j) {
        if (g[j] == scalar_t(0)) continue;
        const int64_t e = dense ? j : idx[j];
        const int32_t step = ++t[e];
        if (step != cached_step) {
          cached_step = step;
          step_size = static_cast<scalar_t>(lr / (1 - std::pow(beta1, step)));
          correction2_sqrt = static_cast<scalar_t>(std::sqrt(1 - std::pow(beta2, step)));
        }
        m[e] += (g[j] - m[e]) * static_cast<scalar_t>(1 - beta1);  // torch.optim.Adam's lerp
        v[e] = v[e] * static_cast<scalar_t>(beta2) + static_cast<scalar_t>(1 - beta2) * g[j] * g[j];
        p[e] -= step_size * m[e] / (std::sqrt(v[e]) / correction2_sqrt + static_cast<scalar_t>(eps));
      }
    });
  });
  return applied;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("lazy_adam", &lazy_adam); }
