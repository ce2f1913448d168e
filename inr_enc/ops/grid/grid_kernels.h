// Shared parts of the fused CPU grid kernels (grid_cpu.cpp): level constants, cell location, corner lookups
// with prefetching, and the level-parallel scatter of the backward.
#pragma once
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace inr_enc {

constexpr int kMaxDims = 7;
enum Interpolation { kLinear = 0, kNearest = 1, kSmoothstep = 2 };

struct Levels {
  const float* scale;           // [L]
  const int64_t* offset;        // [L] first row of each level
  const int64_t* dense_strides; // [n_dense, d]
  const int64_t* dense_size;    // [n_dense]
  const int64_t* primes;        // [d]
  int64_t n_levels, n_dense, hash_mask;
  int64_t samples_per_model, model_rows;  // several tables back to back: sample s reads table s / samples_per_model
};

Levels read_levels(const torch::Tensor& scale, const torch::Tensor& offset, const torch::Tensor& dense_strides,
                   const torch::Tensor& dense_size, const torch::Tensor& primes, int64_t n_dense, int64_t hash_size,
                   int64_t samples_per_model, int64_t model_rows) {
  return {scale.data_ptr<float>(), offset.data_ptr<int64_t>(), dense_strides.data_ptr<int64_t>(),
          dense_size.data_ptr<int64_t>(), primes.data_ptr<int64_t>(), scale.size(0), n_dense, hash_size - 1,
          std::max<int64_t>(samples_per_model, 1), model_rows};
}

// One sample's cell at one level: per dim the uint32 cell, the 1D weight of the upper corner and its derivative.
template <typename T>
struct Cell {
  uint32_t cell[kMaxDims];
  T upper[kMaxDims], d_upper[kMaxDims];
  int n_corners;
};

template <typename T>
Cell<T> locate(const T* x, int d, double scale, int interpolation) {
  Cell<T> c;
  const T max_value = std::numeric_limits<T>::max();
  for (int i = 0; i < d; ++i) {
    T pos = static_cast<T>(static_cast<double>(x[i]) * scale + 0.5);
    const bool clamped = !(std::abs(pos) <= max_value);  // as the torch path's clamp: no gradient there
    pos = std::min(std::max(pos, -max_value), max_value);
    const T floor_pos = std::floor(pos);
    T frac = pos - floor_pos;
    const double saturated = std::min(std::max(static_cast<double>(floor_pos), -2147483648.0), 2147483647.0);
    c.cell[i] = static_cast<uint32_t>(static_cast<int64_t>(saturated));
    T derivative = static_cast<T>(scale);
    if (interpolation == kSmoothstep) {
      derivative *= T(6) * frac * (T(1) - frac);
      frac = frac * frac * (T(3) - T(2) * frac);
    }
    c.upper[i] = frac;
    c.d_upper[i] = interpolation == kNearest || clamped ? T(0) : derivative;
  }
  c.n_corners = interpolation == kNearest ? 1 : 1 << d;
  return c;
}

// d weight / d x_i of `corner`.
template <typename T>
T corner_weight_grad(const Cell<T>& c, int corner, int d, int i) {
  T w = (corner >> i) & 1 ? c.d_upper[i] : -c.d_upper[i];
  for (int j = 0; j < d; ++j) {
    if (j != i) w *= (corner >> j) & 1 ? c.upper[j] : T(1) - c.upper[j];
  }
  return w;
}

constexpr int64_t kBlock = 64;  // samples whose lookups are computed (and their rows prefetched) before use

// One level's lookups for a block of samples: rows and weights, corner-minor; the rows are prefetched, so the
// loads (or read-modify-writes) that follow find them in cache instead of waiting for each in turn.
template <typename T>
struct Lookups {
  int64_t row[kBlock * 128];
  T weight[kBlock * 128];
  int n_corners;

  void fill(const T* x, int64_t begin, int64_t end, int d, int64_t l, int interpolation, const Levels& lv,
            const T* rows_base, int64_t f) {
    switch (d) {  // the input width as a compile-time constant: the per-dim and per-corner loops unroll
      case 1: return fill_dims<1>(x, begin, end, l, interpolation, lv, rows_base, f);
      case 2: return fill_dims<2>(x, begin, end, l, interpolation, lv, rows_base, f);
      case 3: return fill_dims<3>(x, begin, end, l, interpolation, lv, rows_base, f);
      case 4: return fill_dims<4>(x, begin, end, l, interpolation, lv, rows_base, f);
      case 5: return fill_dims<5>(x, begin, end, l, interpolation, lv, rows_base, f);
      case 6: return fill_dims<6>(x, begin, end, l, interpolation, lv, rows_base, f);
      default: return fill_dims<7>(x, begin, end, l, interpolation, lv, rows_base, f);
    }
  }

  template <int d>
  void fill_dims(const T* x, int64_t begin, int64_t end, int64_t l, int interpolation, const Levels& lv,
                 const T* rows_base, int64_t f) {
    const bool dense = l < lv.n_dense;  // row-major index mod the level size; else the hash, masked
    uint32_t factor[kMaxDims];  // uint32 arithmetic throughout, as tcnn's index
    for (int i = 0; i < d; ++i) factor[i] = static_cast<uint32_t>(dense ? lv.dense_strides[l * d + i] : lv.primes[i]);
    for (int64_t s = begin; s < end; ++s) {
      const int64_t first_row = lv.offset[l] + s / lv.samples_per_model * lv.model_rows;  // of this table's level
      const Cell<T> c = locate(x + s * d, d, lv.scale[l], interpolation);
      n_corners = c.n_corners;
      uint32_t term[kMaxDims][2];  // per dim, the lower and upper neighbour's term of the index
      T w1[kMaxDims][2];           // and its 1D weight
      for (int i = 0; i < d; ++i) {
        term[i][0] = c.cell[i] * factor[i];
        term[i][1] = (c.cell[i] + 1) * factor[i];
        w1[i][0] = T(1) - c.upper[i];
        w1[i][1] = c.upper[i];
      }
      for (int corner = 0; corner < c.n_corners; ++corner) {
        const int64_t j = (s - begin) * c.n_corners + corner;
        uint32_t hash = term[0][corner & 1];
        int64_t sum = hash;
        T w = w1[0][corner & 1];
        for (int i = 1; i < d; ++i) {  // weights multiplied in the torch path's order (dim 0 first)
          const int bit = (corner >> i) & 1;
          hash ^= term[i][bit];
          sum += term[i][bit];
          w = w1[i][bit] * w;
        }
        const int64_t index = static_cast<uint32_t>(sum);  // the mod below is rarely needed (inputs in [0, 1])
        row[j] = first_row + (dense ? (index < lv.dense_size[l] ? index : index % lv.dense_size[l])
                                       : static_cast<int64_t>(hash & static_cast<uint32_t>(lv.hash_mask)));
        weight[j] = c.n_corners == 1 ? T(1) : w;
        __builtin_prefetch(rows_base + row[j] * f);
      }
    }
  }
};

// F (features per level) is a compile-time constant, so each sample's sum stays in registers.
template <typename T, int F>
void forward_kernel(const T* x, const T* table, T* out, int64_t n, int d, int interpolation, const Levels& lv) {
  const int64_t width = lv.n_levels * F;
  for (int64_t l = 0; l < lv.n_levels; ++l) {  // level by level: the threads share one level's table in cache
    at::parallel_for(0, n, kBlock, [&](int64_t begin, int64_t end) {
      std::unique_ptr<Lookups<T>> lookups(new Lookups<T>);  // default-initialised: no zeroing
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t stop = std::min(end, b + kBlock);
        lookups->fill(x, b, stop, d, l, interpolation, lv, table, F);
        const int nc = lookups->n_corners;
        for (int64_t s = b; s < stop; ++s) {
          const int64_t* rows = lookups->row + (s - b) * nc;
          const T* weights = lookups->weight + (s - b) * nc;
          T sum[F];
          for (int k = 0; k < F; ++k) sum[k] = weights[0] * table[rows[0] * F + k];
          for (int corner = 1; corner < nc; ++corner) {
            for (int k = 0; k < F; ++k) sum[k] = sum[k] + weights[corner] * table[rows[corner] * F + k];
          }
          std::copy(sum, sum + F, out + s * width + l * F);
        }
      }
    });
  }
}

// Adds each lookup's weight * grad into `sums` [E * F]; threads own whole levels, so no row has two writers.
// With `zero_rows` = E, the thread of each level first zeroes that level's rows (level 0 from row 0, the last
// to row E), so they are in its cache when the adds come. `on_first(l, row)` is called when a row of level l
// receives a value while all its features are still 0.
template <typename T, int f, typename OnFirst>
void scatter_features(const T* x, const T* grad, T* sums, int64_t n, int d, int interpolation, const Levels& lv,
                      int64_t zero_rows, OnFirst on_first) {
  const int64_t width = lv.n_levels * f;
  at::parallel_for(0, lv.n_levels, 1, [&](int64_t begin, int64_t end) {
    std::unique_ptr<Lookups<T>> lookups(new Lookups<T>);  // default-initialised: no zeroing
    for (int64_t l = begin; l < end; ++l) {
      if (zero_rows) {
        std::fill(sums + (l ? lv.offset[l] : 0) * f, sums + (l + 1 < lv.n_levels ? lv.offset[l + 1] : zero_rows) * f, T(0));
      }
      for (int64_t b = 0; b < n; b += kBlock) {
        const int64_t stop = std::min(n, b + kBlock);
        lookups->fill(x, b, stop, d, l, interpolation, lv, sums, f);
        const int nc = lookups->n_corners;
        for (int64_t s = b; s < stop; ++s) {
          const T* g = grad + s * width + l * f;
          for (int corner = 0; corner < nc; ++corner) {
            const int64_t j = (s - b) * nc + corner;
            T* target = sums + lookups->row[j] * f;
            bool empty = true;
            for (int k = 0; k < f; ++k) empty = empty && target[k] == T(0);
            for (int k = 0; k < f; ++k) target[k] += lookups->weight[j] * g[k];
            if (empty) on_first(l, lookups->row[j]);
          }
        }
      }
    }
  });
}

template <typename T, typename OnFirst>
void scatter_levels(const T* x, const T* grad, T* sums, int64_t n, int d, int64_t f, int interpolation, const Levels& lv,
                    int64_t zero_rows, OnFirst on_first) {
  switch (f) {  // features per level as a compile-time constant
    case 1: return scatter_features<T, 1>(x, grad, sums, n, d, interpolation, lv, zero_rows, on_first);
    case 2: return scatter_features<T, 2>(x, grad, sums, n, d, interpolation, lv, zero_rows, on_first);
    case 4: return scatter_features<T, 4>(x, grad, sums, n, d, interpolation, lv, zero_rows, on_first);
    default: return scatter_features<T, 8>(x, grad, sums, n, d, interpolation, lv, zero_rows, on_first);
  }
}

}  // namespace inr_enc
