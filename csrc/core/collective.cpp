#include "cuweave/collective.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cuweave {

std::size_t element_bytes(ElementType type) noexcept {
  switch (type) {
    case ElementType::Int8:
    case ElementType::Uint8: return 1;
    case ElementType::Float16: return 2;
    case ElementType::Int32:
    case ElementType::Uint32:
    case ElementType::Float32: return 4;
    case ElementType::Int64:
    case ElementType::Uint64:
    case ElementType::Float64: return 8;
  }
  return 1;
}

const char* to_string(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::Send: return "send";
    case CollectiveKind::Recv: return "recv";
  }
  return "collective";
}

const char* operation_name(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::AllReduce: return "collectives.all_reduce";
    case CollectiveKind::Broadcast: return "collectives.broadcast";
    case CollectiveKind::Reduce: return "collectives.reduce";
    case CollectiveKind::AllGather: return "collectives.all_gather";
    case CollectiveKind::ReduceScatter: return "collectives.reduce_scatter";
    case CollectiveKind::Send: return "collectives.send";
    case CollectiveKind::Recv: return "collectives.recv";
  }
  return "collectives.collective";
}

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Product: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Average: return "avg";
  }
  return "op";
}

const char* to_string(ElementType type) noexcept {
  switch (type) {
    case ElementType::Int8: return "int8";
    case ElementType::Uint8: return "uint8";
    case ElementType::Int32: return "int32";
    case ElementType::Uint32: return "uint32";
    case ElementType::Int64: return "int64";
    case ElementType::Uint64: return "uint64";
    case ElementType::Float16: return "float16";
    case ElementType::Float32: return "float32";
    case ElementType::Float64: return "float64";
  }
  return "type";
}

const char* nccl_function(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::AllReduce: return "ncclAllReduce";
    case CollectiveKind::Broadcast: return "ncclBroadcast";
    case CollectiveKind::Reduce: return "ncclReduce";
    case CollectiveKind::AllGather: return "ncclAllGather";
    case CollectiveKind::ReduceScatter: return "ncclReduceScatter";
    case CollectiveKind::Send: return "ncclSend";
    case CollectiveKind::Recv: return "ncclRecv";
  }
  return "nccl";
}

bool reduces(CollectiveKind kind) noexcept {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::Reduce || kind == CollectiveKind::ReduceScatter;
}

std::size_t send_bytes(const Collective& c, int rank, int ranks) noexcept {
  const std::size_t elements = c.count * element_bytes(c.type);
  switch (c.kind) {
    case CollectiveKind::Broadcast: return rank == c.root ? elements : 0;
    case CollectiveKind::ReduceScatter: return elements * static_cast<std::size_t>(ranks);
    case CollectiveKind::Recv: return 0;
    default: return elements;
  }
}

std::size_t recv_bytes(const Collective& c, int rank, int ranks) noexcept {
  const std::size_t elements = c.count * element_bytes(c.type);
  switch (c.kind) {
    case CollectiveKind::Reduce: return rank == c.root ? elements : 0;
    case CollectiveKind::AllGather: return elements * static_cast<std::size_t>(ranks);
    case CollectiveKind::Send: return 0;
    default: return elements;
  }
}

std::string describe(const Collective& c) {
  std::string text = std::string(to_string(c.kind)) + " of " + std::to_string(c.count) + " " + to_string(c.type);
  if (reduces(c.kind)) text += std::string(" (") + to_string(c.op) + ")";
  if (c.kind == CollectiveKind::Broadcast || c.kind == CollectiveKind::Reduce) {
    text += " from root " + std::to_string(c.root);
  }
  return text;
}

bool same_call(const Collective& a, const Collective& b) noexcept {
  if (a.kind != b.kind || a.count != b.count || a.type != b.type) return false;
  if (reduces(a.kind) && a.op != b.op) return false;
  if ((a.kind == CollectiveKind::Broadcast || a.kind == CollectiveKind::Reduce) && a.root != b.root) return false;
  return true;
}

namespace {

// IEEE binary16, converted through double (every half and every sum or product of two halves is exact
// in double, so rounding once to half rounds as the GPU's half arithmetic does).
double half_to_double(std::uint16_t h) {
  const int sign = h >> 15;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa ? std::nan("") : INFINITY;
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -value : value;
}

std::uint16_t double_to_half(double value) {
  const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return 0x7e00;
  const double magnitude = std::fabs(value);
  if (magnitude >= 65520.0) return sign | 0x7c00;  // rounds to infinity
  if (magnitude == 0.0) return sign;
  int exponent = 0;
  std::frexp(magnitude, &exponent);        // magnitude = f * 2^exponent, f in [0.5, 1)
  const int unit_exponent = std::max(exponent - 11, -24);  // the value of the last mantissa bit: 2^unit_exponent
  const double units = std::nearbyint(std::ldexp(magnitude, -unit_exponent));  // round half to even
  const auto bits = static_cast<std::uint32_t>(units);
  if (unit_exponent == -24 && bits < 1024) return sign | static_cast<std::uint16_t>(bits);  // subnormal
  // Normal: bits in [1024, 2048]; 2048 means rounding carried into the next binade.
  int biased = unit_exponent + 25;
  std::uint32_t mantissa = bits;
  if (mantissa == 2048) {
    mantissa = 1024;
    ++biased;
  }
  if (biased >= 31) return sign | 0x7c00;
  return sign | static_cast<std::uint16_t>((biased << 10) | (mantissa - 1024));
}

template <typename T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average: return static_cast<T>(a + b);
    case ReduceOp::Product: return static_cast<T>(a * b);
    case ReduceOp::Max: return std::max(a, b);
    case ReduceOp::Min: return std::min(a, b);
  }
  return a;
}

// Unsigned arithmetic for signed sums and products: they wrap around as on the GPU, without undefined behaviour.
template <typename T, typename Wide>
void reduce_integers(void* accumulator, const void* value, std::size_t count, ReduceOp op) {
  auto* out = static_cast<T*>(accumulator);
  const auto* in = static_cast<const T*>(value);
  for (std::size_t i = 0; i < count; ++i) {
    if (op == ReduceOp::Max || op == ReduceOp::Min) {
      out[i] = combine(out[i], in[i], op);
    } else {
      out[i] = static_cast<T>(combine(static_cast<Wide>(out[i]), static_cast<Wide>(in[i]), op));
    }
  }
}

template <typename T>
void reduce_floats(void* accumulator, const void* value, std::size_t count, ReduceOp op) {
  auto* out = static_cast<T*>(accumulator);
  const auto* in = static_cast<const T*>(value);
  for (std::size_t i = 0; i < count; ++i) {
    // NaN propagates through max and min, as in NCCL and NumPy.
    if ((op == ReduceOp::Max || op == ReduceOp::Min) && (std::isnan(out[i]) || std::isnan(in[i]))) {
      out[i] = std::isnan(out[i]) ? out[i] : in[i];
    } else {
      out[i] = combine(out[i], in[i], op);
    }
  }
}

void reduce_halves(void* accumulator, const void* value, std::size_t count, ReduceOp op) {
  auto* out = static_cast<std::uint16_t*>(accumulator);
  const auto* in = static_cast<const std::uint16_t*>(value);
  for (std::size_t i = 0; i < count; ++i) {
    double a = half_to_double(out[i]);
    const double b = half_to_double(in[i]);
    reduce_floats<double>(&a, &b, 1, op);
    out[i] = double_to_half(a);
  }
}

}  // namespace

void reduce_into(void* accumulator, const void* value, std::size_t count, ElementType type, ReduceOp op) noexcept {
  switch (type) {
    case ElementType::Int8: return reduce_integers<std::int8_t, std::uint8_t>(accumulator, value, count, op);
    case ElementType::Uint8: return reduce_integers<std::uint8_t, std::uint8_t>(accumulator, value, count, op);
    case ElementType::Int32: return reduce_integers<std::int32_t, std::uint32_t>(accumulator, value, count, op);
    case ElementType::Uint32: return reduce_integers<std::uint32_t, std::uint32_t>(accumulator, value, count, op);
    case ElementType::Int64: return reduce_integers<std::int64_t, std::uint64_t>(accumulator, value, count, op);
    case ElementType::Uint64: return reduce_integers<std::uint64_t, std::uint64_t>(accumulator, value, count, op);
    case ElementType::Float16: return reduce_halves(accumulator, value, count, op);
    case ElementType::Float32: return reduce_floats<float>(accumulator, value, count, op);
    case ElementType::Float64: return reduce_floats<double>(accumulator, value, count, op);
  }
}

void scale_for_average(void* values, std::size_t count, ElementType type, int ranks) noexcept {
  switch (type) {
    case ElementType::Float16: {
      auto* v = static_cast<std::uint16_t*>(values);
      const double factor = half_to_double(double_to_half(1.0 / ranks));
      for (std::size_t i = 0; i < count; ++i) v[i] = double_to_half(half_to_double(v[i]) * factor);
      return;
    }
    case ElementType::Float32: {
      auto* v = static_cast<float*>(values);
      const float factor = 1.0f / static_cast<float>(ranks);
      for (std::size_t i = 0; i < count; ++i) v[i] *= factor;
      return;
    }
    case ElementType::Float64: {
      auto* v = static_cast<double*>(values);
      const double factor = 1.0 / ranks;
      for (std::size_t i = 0; i < count; ++i) v[i] *= factor;
      return;
    }
    default: return;  // integers: divided after the sum
  }
}

namespace {
template <typename T>
void divide(void* sums, std::size_t count, int ranks) {
  auto* v = static_cast<T*>(sums);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<T>(v[i] / static_cast<T>(ranks));
}
}  // namespace

void finish_average(void* sums, std::size_t count, ElementType type, int ranks) noexcept {
  switch (type) {
    case ElementType::Int8: return divide<std::int8_t>(sums, count, ranks);
    case ElementType::Uint8: return divide<std::uint8_t>(sums, count, ranks);
    case ElementType::Int32: return divide<std::int32_t>(sums, count, ranks);
    case ElementType::Uint32: return divide<std::uint32_t>(sums, count, ranks);
    case ElementType::Int64: return divide<std::int64_t>(sums, count, ranks);
    case ElementType::Uint64: return divide<std::uint64_t>(sums, count, ranks);
    default: return;  // floating point: scaled before the sum
  }
}

}  // namespace cuweave
