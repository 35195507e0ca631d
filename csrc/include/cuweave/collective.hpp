// Collective operations among the GPUs of a communicator (NCCL's all-reduce, broadcast, reduce,
// all-gather, reduce-scatter, send and receive), described without CUDA or NCCL so that every backend
// runs the same operations with the same results.
//
// Note [Collectives]
// ~~~~~~~~~~~~~~~~~~
// A communicator is one rank of a group of `ranks` GPUs; every rank calls the same collectives in the same
// order, each on a stream of its own GPU, and a collective completes on a rank's stream only once every
// rank's stream has reached it. cuweave queues them like any other stream-ordered operation (the arrays
// are held until the collective has completed, the sanitizer sees its reads and writes); NCCL moves the
// data on the GPU, the simulator as a rendezvous of the ranks' streams and a reduction on the host.
//
// Counts are in elements. Per rank, with n ranks:
//   AllReduce      recv[count]         = op over ranks of send[count]
//   Broadcast      recv[count]         = the root's send[count]               (send read on the root only)
//   Reduce         recv[count]         = op over ranks of send[count]         (recv written on the root only)
//   AllGather      recv[n * count]     = send[count] of rank 0, then of rank 1, ...
//   ReduceScatter  recv[count]         = op over ranks s of send_s[rank * count .. (rank + 1) * count)
//   Send / Recv    count elements from `peer` / to `peer` (matched in order per pair of ranks)
// Floating-point sums may round differently from NumPy's left-to-right sum when n > 2 (NCCL orders the
// additions along its rings); Average divides floating-point inputs by n before summing them (as NCCL
// does), and integer sums after (rounding toward zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuweave {

using CommunicatorHandle = void*;

enum class CollectiveKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv };
enum class ReduceOp { Sum, Product, Max, Min, Average };
enum class ElementType { Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64 };

struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  const void* send = nullptr;  // Send: the data sent; Recv: unused
  void* recv = nullptr;        // Recv: where the data lands; Send: unused
  std::size_t count = 0;       // elements, as in Note [Collectives]
  ElementType type = ElementType::Float32;
  ReduceOp op = ReduceOp::Sum;  // AllReduce, Reduce, ReduceScatter
  int root = 0;                 // Broadcast, Reduce: the root rank; Send, Recv: the peer rank
};

std::size_t element_bytes(ElementType type) noexcept;
const char* to_string(CollectiveKind kind) noexcept;
const char* to_string(ReduceOp op) noexcept;
const char* to_string(ElementType type) noexcept;
// What a sanitizer report calls the operation: "collectives.all_reduce", ...
const char* operation_name(CollectiveKind kind) noexcept;
// The NCCL function that queues `kind` ("ncclAllReduce", ...), which errors name as their call.
const char* nccl_function(CollectiveKind kind) noexcept;
// Whether `op` reduces `kind` (false for Broadcast, AllGather, Send, Recv).
bool reduces(CollectiveKind kind) noexcept;
// Bytes `collective` reads from send and writes to recv on `rank` of `ranks` (Note [Collectives]).
std::size_t send_bytes(const Collective& collective, int rank, int ranks) noexcept;
std::size_t recv_bytes(const Collective& collective, int rank, int ranks) noexcept;
// What the ranks' k-th collectives must agree on, for messages: "all_reduce of 1024 float32 (sum)".
std::string describe(const Collective& collective);
// True when two ranks' calls are the same collective (kind, count, type, op, root; not the buffers).
bool same_call(const Collective& a, const Collective& b) noexcept;

// Host reduction of `count` elements of `type`: accumulator[i] = accumulator[i] op value[i] (Average
// accumulates the sum; see finish_average), rounding as the GPU does for each pair.
void reduce_into(void* accumulator, const void* value, std::size_t count, ElementType type, ReduceOp op) noexcept;
// Average over `ranks`: floating-point inputs are each scaled by 1/ranks before they are summed
// (scale_for_average, applied to each input), integer sums are divided after (finish_average).
void scale_for_average(void* values, std::size_t count, ElementType type, int ranks) noexcept;
void finish_average(void* sums, std::size_t count, ElementType type, int ranks) noexcept;

}  // namespace cuweave
