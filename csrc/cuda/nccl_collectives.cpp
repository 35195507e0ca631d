#include "cuda/nccl_collectives.hpp"

#include <cstring>
#include <mutex>

#include "cuda/cuda_check.hpp"
#include "cuda/optional_library.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"

namespace cuweave::cuda {

namespace {

// The part of NCCL's C interface cuweave calls (nccl.h of NCCL 2.x, whose ABI keeps these stable), declared
// here so that cuweave builds where NCCL's headers are absent; the library itself is loaded at run time.
struct NcclComm;
using ncclComm_t = NcclComm*;
struct ncclUniqueId {
  char internal[128];
};
enum ncclResult_t : int {
  ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3, ncclInvalidArgument = 4,
  ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7, ncclTimeout = 8
};
enum ncclDataType_t : int {
  ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6,
  ncclFloat32 = 7, ncclFloat64 = 8
};
enum ncclRedOp_t : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
static_assert(sizeof(ncclUniqueId) == Backend::kCollectiveIdBytes, "NCCL's unique id is 128 bytes");

struct Nccl {
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*);
  ncclResult_t (*comm_destroy)(ncclComm_t);
  const char* (*error_string)(ncclResult_t);
  const char* (*last_error)(ncclComm_t);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
};

const Nccl& nccl() {
  static std::once_flag once;
  static Nccl* loaded = nullptr;  // leaked: used until the process ends
  std::call_once(once, [] {
    const std::string site = site_packages();
    void* library = load_optional({"NCCL", "CUWEAVE_NCCL", "libnccl.so.2", "collectives on the GPU",
                                   "in the nvidia-nccl-cu13 package or a system NCCL", "pip install nvidia-nccl-cu13"},
                                  {"libnccl.so.2", "libnccl.so", site + "/nvidia/nccl/lib/libnccl.so.2",
                                   site + "/nvidia/cu13/lib/libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                                   "/usr/local/cuda/lib64/libnccl.so.2"});
    auto* table = new Nccl;
    bind(library, "ncclGetUniqueId", table->get_unique_id, "NCCL");
    bind(library, "ncclCommInitRank", table->comm_init_rank, "NCCL");
    bind(library, "ncclCommInitAll", table->comm_init_all, "NCCL");
    bind(library, "ncclCommDestroy", table->comm_destroy, "NCCL");
    bind(library, "ncclGetErrorString", table->error_string, "NCCL");
    bind(library, "ncclGetLastError", table->last_error, "NCCL");
    bind(library, "ncclGroupStart", table->group_start, "NCCL");
    bind(library, "ncclGroupEnd", table->group_end, "NCCL");
    bind(library, "ncclAllReduce", table->all_reduce, "NCCL");
    bind(library, "ncclBroadcast", table->broadcast, "NCCL");
    bind(library, "ncclReduce", table->reduce, "NCCL");
    bind(library, "ncclAllGather", table->all_gather, "NCCL");
    bind(library, "ncclReduceScatter", table->reduce_scatter, "NCCL");
    bind(library, "ncclSend", table->send, "NCCL");
    bind(library, "ncclRecv", table->recv, "NCCL");
    loaded = table;
  });
  return *loaded;
}

const char* result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
  }
  return "ncclUnknownError";
}

// Throws BackendError naming NCCL's error, the call, NCCL's description and its last message (which says
// which argument or peer was wrong).
void check(ncclResult_t result, const char* call, ncclComm_t communicator, const char* file, int line) {
  if (result == ncclSuccess) return;
  const Nccl& api = nccl();
  std::string description = api.error_string(result);
  const char* detail = api.last_error(communicator);
  if (detail != nullptr && *detail != '\0') description += std::string(" (") + detail + ")";
  throw BackendError(call, static_cast<int>(result), result_name(result), description, file, line);
}

#define CUWEAVE_NCCL_TRY(call, communicator) check((call), #call, (communicator), __FILE__, __LINE__)

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::Int8: return ncclInt8;
    case ElementType::Uint8: return ncclUint8;
    case ElementType::Int32: return ncclInt32;
    case ElementType::Uint32: return ncclUint32;
    case ElementType::Int64: return ncclInt64;
    case ElementType::Uint64: return ncclUint64;
    case ElementType::Float16: return ncclFloat16;
    case ElementType::Float32: return ncclFloat32;
    case ElementType::Float64: return ncclFloat64;
  }
  return ncclInt8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Average: return ncclAvg;
  }
  return ncclSum;
}

ncclComm_t as_comm(CommunicatorHandle handle) { return static_cast<ncclComm_t>(handle); }

// Makes `device` current while a communicator is made on it (NCCL takes the calling thread's device).
struct CurrentDevice {
  explicit CurrentDevice(int device) {
    CUWEAVE_CUDA_TRY(cudaGetDevice(&previous));
    CUWEAVE_CUDA_TRY(cudaSetDevice(device));
  }
  ~CurrentDevice() { CUWEAVE_CUDA_TRY_QUIET(cudaSetDevice(previous)); }
  int previous = 0;
};

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id{};
  CUWEAVE_NCCL_TRY(nccl().get_unique_id(&id), nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

CommunicatorHandle nccl_join(const std::string& id, int ranks, int rank, int device) {
  ncclUniqueId unique{};
  std::memcpy(unique.internal, id.data(), sizeof(unique.internal));
  CurrentDevice on(device);
  ncclComm_t communicator = nullptr;
  CUWEAVE_NCCL_TRY(nccl().comm_init_rank(&communicator, ranks, unique, rank), nullptr);
  return communicator;
}

std::vector<CommunicatorHandle> nccl_for_devices(const std::vector<int>& devices) {
  std::vector<ncclComm_t> communicators(devices.size(), nullptr);
  CurrentDevice keep(devices.front());  // ncclCommInitAll changes the current device; put it back afterwards
  CUWEAVE_NCCL_TRY(nccl().comm_init_all(communicators.data(), static_cast<int>(devices.size()), devices.data()),
                   nullptr);
  return {communicators.begin(), communicators.end()};
}

void nccl_destroy(CommunicatorHandle communicator) noexcept {
  if (communicator != nullptr) (void)nccl().comm_destroy(as_comm(communicator));
}

void nccl_group_start() { CUWEAVE_NCCL_TRY(nccl().group_start(), nullptr); }
void nccl_group_end() { CUWEAVE_NCCL_TRY(nccl().group_end(), nullptr); }

void nccl_collective(const Collective& c, CommunicatorHandle handle, cudaStream_t stream) {
  const Nccl& api = nccl();
  ncclComm_t comm = as_comm(handle);
  const ncclDataType_t type = nccl_type(c.type);
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      CUWEAVE_NCCL_TRY(api.all_reduce(c.send, c.recv, c.count, type, nccl_op(c.op), comm, stream), comm);
      return;
    case CollectiveKind::Broadcast:
      CUWEAVE_NCCL_TRY(api.broadcast(c.send, c.recv, c.count, type, c.root, comm, stream), comm);
      return;
    case CollectiveKind::Reduce:
      CUWEAVE_NCCL_TRY(api.reduce(c.send, c.recv, c.count, type, nccl_op(c.op), c.root, comm, stream), comm);
      return;
    case CollectiveKind::AllGather:
      CUWEAVE_NCCL_TRY(api.all_gather(c.send, c.recv, c.count, type, comm, stream), comm);
      return;
    case CollectiveKind::ReduceScatter:
      CUWEAVE_NCCL_TRY(api.reduce_scatter(c.send, c.recv, c.count, type, nccl_op(c.op), comm, stream), comm);
      return;
    case CollectiveKind::Send:
      CUWEAVE_NCCL_TRY(api.send(c.send, c.count, type, c.root, comm, stream), comm);
      return;
    case CollectiveKind::Recv:
      CUWEAVE_NCCL_TRY(api.recv(c.recv, c.count, type, c.root, comm, stream), comm);
      return;
  }
}

}  // namespace cuweave::cuda
