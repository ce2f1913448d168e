// Fused CPU kernels for the multiresolution grids (inr_enc/encoders/grid_functional.py is the reference).
//
// Per sample and level: position = x * scale + 0.5 (float64 product, one rounding to the input's type, as
// the torch path), cell = floor(position) saturated to int32 and read as uint32, d-linear / smoothstep /
// nearest weights over the cell's corners (corner c takes dim i's upper neighbour when (c >> i) & 1),
// row-major index mod the level size for the first n_dense levels, tcnn's prime XOR hash masked to the
// table size for the rest, plus the level's offset. Nothing per corner is stored: the backward passes
// recompute indices and weights. Threads follow torch.get_num_threads() (at::parallel_for); the table
// gradient is split by level, so no two threads add to the same row.
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace {

constexpr int kMaxDims = 7;
enum Interpolation { kLinear = 0, kNearest = 1, kSmoothstep = 2 };

struct Levels {
  const float* scale;           // [L]
  const int64_t* offset;        // [L] first row of each level
  const int64_t* dense_strides; // [n_dense, d]
  const int64_t* dense_size;    // [n_dense]
  const int64_t* primes;        // [d]
  int64_t n_levels, n_dense, hash_mask;
};

Levels read_levels(const torch::Tensor& scale, const torch::Tensor& offset, const torch::Tensor& dense_strides,
                   const torch::Tensor& dense_size, const torch::Tensor& primes, int64_t n_dense, int64_t hash_size) {
  return {scale.data_ptr<float>(), offset.data_ptr<int64_t>(), dense_strides.data_ptr<int64_t>(),
          dense_size.data_ptr<int64_t>(), primes.data_ptr<int64_t>(), scale.size(0), n_dense, hash_size - 1};
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
    const bool dense = l < lv.n_dense;  // row-major index mod the level size; else the hash, masked
    uint32_t factor[kMaxDims];  // uint32 arithmetic throughout, as tcnn's index
    for (int i = 0; i < d; ++i) factor[i] = static_cast<uint32_t>(dense ? lv.dense_strides[l * d + i] : lv.primes[i]);
    for (int64_t s = begin; s < end; ++s) {
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
        row[j] = lv.offset[l] + (dense ? static_cast<int64_t>(static_cast<uint32_t>(sum)) % lv.dense_size[l]
                                       : static_cast<int64_t>(hash & static_cast<uint32_t>(lv.hash_mask)));
        weight[j] = c.n_corners == 1 ? T(1) : w;
        __builtin_prefetch(rows_base + row[j] * f);
      }
    }
  }
};

template <typename T>
void forward_kernel(const T* x, const T* table, T* out, int64_t n, int d, int64_t f, int interpolation, const Levels& lv) {
  const int64_t width = lv.n_levels * f;
  for (int64_t l = 0; l < lv.n_levels; ++l) {  // level by level: the threads share one level's table in cache
    at::parallel_for(0, n, kBlock, [&](int64_t begin, int64_t end) {
      std::unique_ptr<Lookups<T>> lookups(new Lookups<T>);  // default-initialised: no zeroing
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t stop = std::min(end, b + kBlock);
        lookups->fill(x, b, stop, d, l, interpolation, lv, table, f);
        const int nc = lookups->n_corners;
        for (int64_t s = b; s < stop; ++s) {
          const int64_t* rows = lookups->row + (s - b) * nc;
          const T* weights = lookups->weight + (s - b) * nc;
          T* o = out + s * width + l * f;
          for (int64_t k = 0; k < f; ++k) o[k] = weights[0] * table[rows[0] * f + k];
          for (int corner = 1; corner < nc; ++corner) {
            for (int64_t k = 0; k < f; ++k) o[k] = o[k] + weights[corner] * table[rows[corner] * f + k];
          }
        }
      }
    });
  }
}

// Adds each lookup's weight * grad into `sums` [E * F]; threads own whole levels, so no row has two writers.
// With `zero_rows` = E, the thread of each level first zeroes that level's rows (level 0 from row 0, the last
// to row E), so they are in its cache when the adds come. `on_first(l, row)` is called when a row of level l
// receives a value while all its features are still 0.
template <typename T, typename OnFirst>
void scatter_levels(const T* x, const T* grad, T* sums, int64_t n, int d, int64_t f, int interpolation, const Levels& lv,
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
            for (int64_t k = 0; k < f; ++k) empty = empty && target[k] == T(0);
            for (int64_t k = 0; k < f; ++k) target[k] += lookups->weight[j] * g[k];
            if (empty) on_first(l, lookups->row[j]);
          }
        }
      }
    }
  });
}

}  // namespace

#define INR_ENC_LEVELS scale, offset, dense_strides, dense_size, primes, n_dense, hash_size
#define INR_ENC_LEVEL_ARGS                                                                                   \
  const torch::Tensor &scale, const torch::Tensor &offset, const torch::Tensor &dense_strides,               \
      const torch::Tensor &dense_size, const torch::Tensor &primes, int64_t n_dense, int64_t hash_size

// x [N, d], table [E * F] -> `out` [N, L * F] (any contents: every element is written).
void forward(const torch::Tensor& x, const torch::Tensor& table, torch::Tensor out, int64_t f, int64_t interpolation,
             INR_ENC_LEVEL_ARGS) {
  const Levels lv = read_levels(INR_ENC_LEVELS);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grid_forward", [&] {
    forward_kernel<scalar_t>(x.data_ptr<scalar_t>(), table.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), x.size(0),
                             x.size(1), f, interpolation, lv);
  });
}

// d loss / d table, written into the dense `result` [E * F] (any contents: it is zeroed level by level).
void backward_table(const torch::Tensor& x, const torch::Tensor& grad, torch::Tensor result, int64_t f,
                    int64_t interpolation, INR_ENC_LEVEL_ARGS) {
  const Levels lv = read_levels(INR_ENC_LEVELS);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grid_backward_table", [&] {
    scatter_levels<scalar_t>(x.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), result.data_ptr<scalar_t>(), x.size(0),
                             x.size(1), f, interpolation, lv, result.numel() / f, [](int64_t, int64_t) {});
  });
}

// d loss / d table as (element indices [M], values [M]) of the rows with a nonzero gradient, each row once, in
// row order. `accumulator` [E * F] must be all zeros; it is left so. A level the batch reads sparsely lists its
// rows as they are first written (sorted before they are emitted); one read at least a quarter as many times as
// it has rows is scanned in row order instead, which is cheaper there. Either way the work is proportional to
// the batch.
std::vector<torch::Tensor> backward_table_sparse(const torch::Tensor& x, const torch::Tensor& grad,
                                                 torch::Tensor accumulator, int64_t f, int64_t interpolation,
                                                 INR_ENC_LEVEL_ARGS) {
  const Levels lv = read_levels(INR_ENC_LEVELS);
  const int64_t n_rows = accumulator.numel() / f;
  const int64_t reads = x.size(0) * (interpolation == kNearest ? 1 : int64_t(1) << x.size(1));
  std::vector<int64_t> first(lv.n_levels + 1, n_rows), start(lv.n_levels + 1, 0);
  std::vector<char> scanned(lv.n_levels);
  std::vector<std::vector<int64_t>> rows(lv.n_levels);
  for (int64_t l = 0; l < lv.n_levels; ++l) first[l] = lv.offset[l];
  for (int64_t l = 0; l < lv.n_levels; ++l) scanned[l] = 4 * reads >= first[l + 1] - first[l];
  torch::Tensor indices, values;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grid_backward_table_sparse", [&] {
    scalar_t* sums = accumulator.data_ptr<scalar_t>();
    scatter_levels<scalar_t>(x.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), sums, x.size(0), x.size(1), f,
                             interpolation, lv, 0, [&](int64_t l, int64_t row) {
                               if (!scanned[l]) rows[l].push_back(row);
                             });
    // Each level's rows with a nonzero sum, each once (a listed row whose sum came back to exactly 0 and was
    // listed again is skipped on its second visit, which finds it zeroed), gathered per level, then copied out.
    std::vector<std::vector<int64_t>> level_index(lv.n_levels);
    std::vector<std::vector<scalar_t>> level_value(lv.n_levels);
    at::parallel_for(0, lv.n_levels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t l = begin; l < end; ++l) {
        auto emit = [&](int64_t row) {
          scalar_t* sum = sums + row * f;
          bool empty = true;
          for (int64_t k = 0; k < f; ++k) empty = empty && sum[k] == scalar_t(0);
          if (empty) return;
          for (int64_t k = 0; k < f; ++k) {
            level_index[l].push_back(row * f + k);
            level_value[l].push_back(sum[k]);
            sum[k] = 0;
          }
        };
        if (scanned[l]) {
          for (int64_t row = first[l]; row < first[l + 1]; ++row) emit(row);
        } else {
          std::sort(rows[l].begin(), rows[l].end());  // sorted, as a coalesced COO tensor must be
          for (const int64_t row : rows[l]) emit(row);
        }
      }
    });
    for (int64_t l = 0; l < lv.n_levels; ++l) start[l + 1] = start[l] + static_cast<int64_t>(level_index[l].size());
    indices = torch::empty({start.back()}, x.options().dtype(torch::kInt64));
    values = torch::empty({start.back()}, grad.options());
    int64_t* index_out = indices.data_ptr<int64_t>();
    scalar_t* value_out = values.data_ptr<scalar_t>();
    at::parallel_for(0, lv.n_levels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t l = begin; l < end; ++l) {
        std::copy(level_index[l].begin(), level_index[l].end(), index_out + start[l]);
        std::copy(level_value[l].begin(), level_value[l].end(), value_out + start[l]);
      }
    });
  });
  return {indices, values};
}

// d loss / d x [N, d].
torch::Tensor backward_input(const torch::Tensor& x, const torch::Tensor& table, const torch::Tensor& grad, int64_t f,
                             int64_t interpolation, INR_ENC_LEVEL_ARGS) {
  const Levels lv = read_levels(INR_ENC_LEVELS);
  auto result = torch::zeros_like(x);
  if (interpolation == kNearest) return result;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grid_backward_input", [&] {
    const scalar_t* xs = x.data_ptr<scalar_t>();
    const scalar_t* tab = table.data_ptr<scalar_t>();
    const scalar_t* gs = grad.data_ptr<scalar_t>();
    scalar_t* dx = result.data_ptr<scalar_t>();
    const int64_t n = x.size(0), width = lv.n_levels * f;
    const int d = static_cast<int>(x.size(1));
    at::parallel_for(0, n, kBlock, [&](int64_t begin, int64_t end) {
      std::unique_ptr<Lookups<scalar_t>> lookups(new Lookups<scalar_t>);
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t stop = std::min(end, b + kBlock);
        for (int64_t l = 0; l < lv.n_levels; ++l) {
          lookups->fill(xs, b, stop, d, l, interpolation, lv, tab, f);
          for (int64_t s = b; s < stop; ++s) {
            const Cell<scalar_t> c = locate(xs + s * d, d, lv.scale[l], interpolation);
            const scalar_t* g = gs + s * width + l * f;
            for (int corner = 0; corner < c.n_corners; ++corner) {
              const scalar_t* row = tab + lookups->row[(s - b) * c.n_corners + corner] * f;
              scalar_t dot = 0;
              for (int64_t k = 0; k < f; ++k) dot += row[k] * g[k];
              for (int i = 0; i < d; ++i) dx[s * d + i] += corner_weight_grad(c, corner, d, i) * dot;
            }
          }
        }
      }
    });
  });
  return result;
}

// lazy_adam.cpp
bool lazy_adam(torch::Tensor param, torch::Tensor exp_avg, torch::Tensor exp_avg_sq, torch::Tensor steps,
               const torch::Tensor& indices, const torch::Tensor& values, double lr, double beta1, double beta2, double eps);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward);
  m.def("backward_table", &backward_table);
  m.def("backward_table_sparse", &backward_table_sparse);
  m.def("backward_input", &backward_input);
  m.def("lazy_adam", &lazy_adam);
}
