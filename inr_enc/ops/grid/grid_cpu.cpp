// Fused CPU kernels for the multiresolution grids (inr_enc/ops/grid/reference.py is the reference).
//
// Per sample and level: position = x * scale + 0.5 (float64 product, one rounding to the input's type, as
// the torch path), cell = floor(position) saturated to int32 and read as uint32, d-linear / smoothstep /
// nearest weights over the cell's corners (corner c takes dim i's upper neighbour when (c >> i) & 1),
// row-major index mod the level size for the first n_dense levels, tcnn's prime XOR hash masked to the
// table size for the rest, plus the level's offset. Nothing per corner is stored: the backward passes
// recompute indices and weights. Threads follow torch.get_num_threads() (at::parallel_for); the table
// gradient is split by level, so no two threads add to the same row.
#include "grid_kernels.h"

using namespace inr_enc;

#define INR_ENC_LEVELS scale, offset, dense_strides, dense_size, primes, n_dense, hash_size, samples_per_model, model_rows
#define INR_ENC_LEVEL_ARGS                                                                                   \
  const torch::Tensor &scale, const torch::Tensor &offset, const torch::Tensor &dense_strides,               \
      const torch::Tensor &dense_size, const torch::Tensor &primes, int64_t n_dense, int64_t hash_size,      \
      int64_t samples_per_model, int64_t model_rows

// x [N, d], table [E * F] -> `out` [N, L * F] (any contents: every element is written).
void forward(const torch::Tensor& x, const torch::Tensor& table, torch::Tensor out, int64_t f, int64_t interpolation,
             INR_ENC_LEVEL_ARGS) {
  const Levels lv = read_levels(INR_ENC_LEVELS);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grid_forward", [&] {
    const scalar_t *xs = x.data_ptr<scalar_t>(), *tab = table.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const int d = static_cast<int>(x.size(1));
    switch (f) {
      case 1: return forward_kernel<scalar_t, 1>(xs, tab, o, x.size(0), d, interpolation, lv);
      case 2: return forward_kernel<scalar_t, 2>(xs, tab, o, x.size(0), d, interpolation, lv);
      case 4: return forward_kernel<scalar_t, 4>(xs, tab, o, x.size(0), d, interpolation, lv);
      default: return forward_kernel<scalar_t, 8>(xs, tab, o, x.size(0), d, interpolation, lv);
    }
  });
}

// d loss / d table, written into the dense `result` [E * F] (any contents: it is zeroed level by level, or
// first as a whole where it holds several tables).
void backward_table(const torch::Tensor& x, const torch::Tensor& grad, torch::Tensor result, int64_t f,
                    int64_t interpolation, INR_ENC_LEVEL_ARGS) {
  const Levels lv = read_levels(INR_ENC_LEVELS);
  const bool one_table = result.numel() / f == lv.model_rows;
  if (!one_table) result.zero_();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "grid_backward_table", [&] {
    scatter_levels<scalar_t>(x.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), result.data_ptr<scalar_t>(), x.size(0),
                             x.size(1), f, interpolation, lv, one_table ? result.numel() / f : 0, [](int64_t, int64_t) {});
  });
}

// d loss / d table as (element indices [M], values [M]) of the rows with a nonzero gradient, each row once (not
// sorted). `accumulator` [E * F] must be all zeros; it is left so. A level the batch reads sparsely lists its
// rows as they are first written; one read at least a quarter as many times as it has rows is scanned in row
// order instead, which is cheaper there. Either way the work is proportional to the batch.
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
  const bool one_table = n_rows == lv.model_rows;  // a scan covers one table's level
  for (int64_t l = 0; l < lv.n_levels; ++l) scanned[l] = one_table && 4 * reads >= first[l + 1] - first[l];
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

// Adds one sample's d loss / d x at one level (grad g [F], corner rows `rows`) to dx [d]; `d` <= D, D is the
// compile-time bound (equal to d for 1 to 3 dims).
template <int D, typename T>
void add_input_grad(const T* x, const T* g, const int64_t* rows, const T* table, int64_t f, double scale,
                    int interpolation, T* dx, int d = D) {
  const Cell<T> c = locate(x, d, scale, interpolation);
  for (int corner = 0; corner < c.n_corners; ++corner) {
    const T* row = table + rows[corner] * f;
    T dot = 0;
    for (int64_t k = 0; k < f; ++k) dot += row[k] * g[k];
    for (int i = 0; i < d; ++i) dx[i] += corner_weight_grad(c, corner, d, i) * dot;
  }
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
            const int64_t* rows = lookups->row + (s - b) * lookups->n_corners;
            const scalar_t* g = gs + s * width + l * f;
            switch (d) {  // the input width as a compile-time constant, as in Lookups::fill
              case 1: add_input_grad<1>(xs + s, g, rows, tab, f, lv.scale[l], interpolation, dx + s); break;
              case 2: add_input_grad<2>(xs + 2 * s, g, rows, tab, f, lv.scale[l], interpolation, dx + 2 * s); break;
              case 3: add_input_grad<3>(xs + 3 * s, g, rows, tab, f, lv.scale[l], interpolation, dx + 3 * s); break;
              default: add_input_grad<7>(xs + d * s, g, rows, tab, f, lv.scale[l], interpolation, dx + d * s, d);
            }
          }
        }
      }
    });
  });
  return result;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward);
  m.def("backward_table", &backward_table);
  m.def("backward_table_sparse", &backward_table_sparse);
  m.def("backward_input", &backward_input);
}
