// Marching rays through an occupancy grid on CPU: each ray walks its steps from `first` and keeps the first
// `max_samples` whose point lies in an occupied cell, in one pass per ray (inr_enc/nerf/march_kernel.py says
// why; occupancy.py's and unbounded.py's torch windows are the reference, step for step, in float32 as they
// compute).
//
// Two kinds of steps:
//   box (occupancy.py): t_k = near + (k + offset) * h, kept while t_k < far; the interval [t_k - h/2, t_k + h/2],
//     the point at t_k; cells floor((x - lo) / (hi - lo) * R), none outside [0, R).
//   cone (unbounded.py): start_k = b[k] + offset * (b[k+1] - b[k]), end_k = start_{k+1}, for k < K - 2 (K =
//     bounds.size(0)), walked while start_k < far and kept where start_k >= near; the point at the middle;
//     cells of the contracted point y = x (2 - 1/r) / r, x = (p - c) / s, r = max(1, |x|) (L-inf or L2),
//     floor((y + 2) R / 4) clamped to [0, R).
#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <cmath>

namespace {

constexpr int64_t kBox = 0, kLinf = 1, kL2 = 2;

struct Grid {
  const bool* occupied;
  int64_t resolution, kind;
  float a[3], b[3];  // box: lo, hi; contracted: centre, (scale, unused, unused)

  bool occupied_at(const float p[3]) const {
    const int64_t r = resolution;
    int64_t ijk[3];
    if (kind == kBox) {
      for (int i = 0; i < 3; ++i) {
        const float u = std::floor((p[i] - a[i]) / (b[i] - a[i]) * static_cast<float>(r));
        if (!(u >= 0.f && u < static_cast<float>(r))) return false;
        ijk[i] = static_cast<int64_t>(u);
      }
    } else {
      float x[3], norm = 0.f;
      for (int i = 0; i < 3; ++i) x[i] = (p[i] - a[i]) / b[0];
      if (kind == kLinf) {
        for (int i = 0; i < 3; ++i) norm = std::max(norm, std::fabs(x[i]));
      } else {
        norm = std::sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
      }
      norm = std::max(norm, 1.f);
      const float factor = (2.f - 1.f / norm) / norm;
      for (int i = 0; i < 3; ++i) {
        const int64_t cell = static_cast<int64_t>((x[i] * factor + 2.f) * (static_cast<float>(r) / 4.f));
        ijk[i] = std::min(std::max(cell, int64_t{0}), r - 1);
      }
    }
    return occupied[(ijk[0] * r + ijk[1]) * r + ijk[2]];
  }
};

}  // namespace

// Rays [A]: origins, directions [A, 3]; near, far, offset [A] float32; first [A] int64 (each ray's next step).
// box: step h = `step`, bounds unused; cone: bounds [K] float32. -> (counts [A] int64: samples kept per ray,
// starts [A, S], ends [A, S], points [A, S, 3] (the first counts[i] of row i are set), next [A] int64: the step
// after the last one walked, more [A] bool: whether the ray has steps left), S = max_samples.
std::vector<torch::Tensor> occupied_steps(const torch::Tensor& origins, const torch::Tensor& directions,
                                          const torch::Tensor& near, const torch::Tensor& far,
                                          const torch::Tensor& offset, const torch::Tensor& first,
                                          const torch::Tensor& bounds, double step, const torch::Tensor& occupied,
                                          int64_t resolution, int64_t kind, std::vector<double> a,
                                          std::vector<double> b, int64_t max_samples) {
  TORCH_CHECK(origins.scalar_type() == torch::kFloat32 && directions.scalar_type() == torch::kFloat32,
              "occupied_steps: float32 rays");
  TORCH_CHECK(occupied.scalar_type() == torch::kBool && occupied.numel() == resolution * resolution * resolution,
              "occupied_steps: occupied must be bool [resolution^3]");
  const int64_t n = origins.size(0), s = max_samples;
  auto f32 = origins.options();
  auto counts = torch::zeros({n}, first.options());
  auto starts = torch::empty({n, s}, f32), ends = torch::empty({n, s}, f32), points = torch::empty({n, s, 3}, f32);
  auto next = first.clone();
  auto more = torch::zeros({n}, occupied.options());
  Grid grid{occupied.data_ptr<bool>(), resolution, kind, {}, {}};
  for (int i = 0; i < 3; ++i) grid.a[i] = static_cast<float>(a[i]), grid.b[i] = static_cast<float>(b[i]);
  const float *o = origins.data_ptr<float>(), *d = directions.data_ptr<float>();
  const float *lo_t = near.data_ptr<float>(), *hi_t = far.data_ptr<float>(), *off = offset.data_ptr<float>();
  const float* bd = kind == kBox ? nullptr : bounds.data_ptr<float>();
  const int64_t n_intervals = kind == kBox ? 0 : bounds.size(0) - 2;  // interval k ends at b[k + 1] + u (b[k + 2] - ..)
  const float h = static_cast<float>(step);
  int64_t *count = counts.data_ptr<int64_t>(), *nx = next.data_ptr<int64_t>();
  float *st = starts.data_ptr<float>(), *en = ends.data_ptr<float>(), *pt = points.data_ptr<float>();
  bool* mo = more.data_ptr<bool>();
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t ray = begin; ray < end; ++ray) {
      const float* ro = o + 3 * ray;
      const float* rd = d + 3 * ray;
      const float t_near = lo_t[ray], t_far = hi_t[ray], u = off[ray];
      int64_t k = nx[ray], kept = 0;
      bool left = false;  // whether step k exists (is within the ray's range) after the loop
      while (true) {
        float t0, t1, mid;
        if (kind == kBox) {
          mid = t_near + (static_cast<float>(k) + u) * h;
          if (!(mid < t_far)) break;
          t0 = mid - h / 2.f, t1 = mid + h / 2.f;
        } else {
          if (k >= n_intervals) break;
          t0 = bd[k] + u * (bd[k + 1] - bd[k]);
          if (!(t0 < t_far)) break;
          t1 = bd[k + 1] + u * (bd[k + 2] - bd[k + 1]);
          mid = (t0 + t1) / 2.f;
        }
        if (kept == s) {
          left = true;
          break;
        }
        const float p[3] = {ro[0] + mid * rd[0], ro[1] + mid * rd[1], ro[2] + mid * rd[2]};
        if ((kind == kBox || t0 >= t_near) && grid.occupied_at(p)) {
          const int64_t at = ray * s + kept++;
          st[at] = t0, en[at] = t1;
          for (int i = 0; i < 3; ++i) pt[3 * at + i] = p[i];
        }
        ++k;
      }
      count[ray] = kept, nx[ray] = k, mo[ray] = left;
    }
  });
  return {counts, starts, ends, points, next, more};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("occupied_steps", &occupied_steps); }
