// Host versions of the built-in kernels, shared by eager launches and graph nodes so that both compute
// the same bytes. Rounding as arithmetic.hpp says (the simulator is compiled with -ffp-contract=off, so a
// product and a sum are never fused).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuweave/arithmetic.hpp"
#include "cuweave/strided_copy.hpp"

namespace cuweave::sim {

std::size_t element_bytes(NumericType type);

// Writes `pattern` `count` times from `destination` on.
void run_fill(void* destination, std::size_t count, const std::vector<unsigned char>& pattern);

// Copies copy.count() elements, in C order, between the two layouts (the caller has checked them).
void run_copy_strided(const StridedCopy& copy);

void run_arithmetic(const Arithmetic& operation);

// A sum in the two steps of the CUDA backend's two kernels: the partial (here the whole sum, in the
// accumulator: double for floats, int64 for integers), then its conversion into *out in sum_type(type).
struct SumPartial {
  double real = 0;
  std::int64_t integer = 0;
};
SumPartial run_sum_partials(const void* x, std::size_t count, NumericType type);
void run_sum_final(void* out, const SumPartial& partial, NumericType type);

// The simulated device clock (ns).
std::uint64_t host_clock_ns();
// Writes the clock to *start_time when given, then busy-waits `nanoseconds` if `take_time` (exploring
// schedules takes no time: only the order of work matters).
void run_spin(std::uint64_t nanoseconds, std::uint64_t* start_time, bool take_time);

}  // namespace cuweave::sim
