#include "cuda/nccl_collectives.hpp"

#include <climits>
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
static_assert(sizeof(ncclUniqueId) == CollectiveBackend::kCollectiveIdBytes, "NCCL's unique id is 128 bytes");

// ncclConfig_t as NCCL 2.18 declared it. The struct only grows: NCCL reads `size` and `version` to learn
// which fields its caller set, copies those over its defaults and gives the later ones their defaults, so
// this prefix is valid for NCCL 2.18 and every later 2.x (2.14 to 2.17 read the fields they know).
struct ncclConfig_t {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
};
constexpr unsigned int kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER's
constexpr unsigned int kConfigVersion = 21800;     // NCCL_VERSION(2, 18, 0)
constexpr int kConfigUndefined = INT_MIN;          // NCCL_CONFIG_UNDEF_INT: NCCL's default

// A non-blocking communicator's config (Note [Collective timeouts] in cuweave/communicator.hpp): no NCCL call
// on it blocks; ncclCommGetAsyncError says when what it started is done.
ncclConfig_t non_blocking() {
  ncclConfig_t config{};  // zeroed, padding included: NCCL copies `size` bytes
  config.size = sizeof(ncclConfig_t);
  config.magic = kConfigMagic;
  config.version = kConfigVersion;
  config.blocking = 0;
  config.cgaClusterSize = config.minCTAs = config.maxCTAs = config.splitShare = kConfigUndefined;
  config.netName = nullptr;
  return config;
}

struct Nccl {
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank_config)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*comm_abort)(ncclComm_t);
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
    bind(library, "ncclCommInitRankConfig", table->comm_init_rank_config, "NCCL");  // NCCL 2.14 and later
    bind(library, "ncclCommGetAsyncError", table->comm_get_async_error, "NCCL");
    bind(library, "ncclCommAbort", table->comm_abort, "NCCL");
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

// Throws BackendError naming NCCL's error, `call` (the NCCL function), NCCL's description and its last
// message (which says which argument or peer was wrong). ncclInProgress passes: on a non-blocking
// communicator it means that NCCL goes on in its own thread (the core polls nccl_ready).
void check(ncclResult_t result, const char* call, ncclComm_t communicator, const char* file, int line) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const Nccl& api = nccl();
  std::string description = api.error_string(result);
  const char* detail = api.last_error(communicator);
  if (detail != nullptr && *detail != '\0') description += std::string(" (") + detail + ")";
  throw BackendError(call, static_cast<int>(result), result_name(result), description, file, line);
}

#define CUWEAVE_NCCL_TRY(result, call, communicator) check((result), (call), (communicator), __FILE__, __LINE__)

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
  CUWEAVE_NCCL_TRY(nccl().get_unique_id(&id), "ncclGetUniqueId", nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

CommunicatorHandle nccl_join(const std::string& id, int ranks, int rank, int device) {
  const Nccl& api = nccl();
  ncclUniqueId unique{};
  std::memcpy(unique.internal, id.data(), sizeof(unique.internal));
  CurrentDevice on(device);
  ncclConfig_t config = non_blocking();
  ncclComm_t communicator = nullptr;
  const ncclResult_t result = api.comm_init_rank_config(&communicator, ranks, unique, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress && communicator != nullptr) {
    (void)api.comm_abort(communicator);
  }
  CUWEAVE_NCCL_TRY(result, "ncclCommInitRankConfig", nullptr);
  return communicator;
}

std::vector<CommunicatorHandle> nccl_for_devices(const std::vector<int>& devices) {
  // What ncclCommInitAll does, with non-blocking communicators: one id, each rank joined on its device, in
  // one group (one thread makes them all).
  const Nccl& api = nccl();
  ncclUniqueId unique{};
  CUWEAVE_NCCL_TRY(api.get_unique_id(&unique), "ncclGetUniqueId", nullptr);
  CurrentDevice keep(devices.front());  // put back the caller's device afterwards
  std::vector<ncclComm_t> communicators(devices.size(), nullptr);
  std::vector<ncclConfig_t> configs(devices.size(), non_blocking());
  CUWEAVE_NCCL_TRY(api.group_start(), "ncclGroupStart", nullptr);
  ncclResult_t failed = ncclSuccess;
  const char* failed_call = "ncclCommInitRankConfig";
  for (std::size_t rank = 0; rank < devices.size() && failed == ncclSuccess; ++rank) {
    if (cudaSetDevice(devices[rank]) != cudaSuccess) {
      failed = ncclUnhandledCudaError;
      failed_call = "cudaSetDevice";
      break;
    }
    const ncclResult_t result = api.comm_init_rank_config(&communicators[rank], static_cast<int>(devices.size()),
                                                          unique, static_cast<int>(rank), &configs[rank]);
    if (result != ncclSuccess && result != ncclInProgress) failed = result;
  }
  const ncclResult_t ended = api.group_end();  // always: the group must not stay open
  if (failed == ncclSuccess && ended != ncclSuccess && ended != ncclInProgress) {
    failed = ended;
    failed_call = "ncclGroupEnd";
  }
  if (failed != ncclSuccess) {
    for (ncclComm_t communicator : communicators) {
      if (communicator != nullptr) (void)api.comm_abort(communicator);
    }
    CUWEAVE_NCCL_TRY(failed, failed_call, nullptr);
  }
  return {communicators.begin(), communicators.end()};
}

bool nccl_ready(CommunicatorHandle handle) {
  ncclComm_t communicator = as_comm(handle);
  ncclResult_t state = ncclSuccess;
  CUWEAVE_NCCL_TRY(nccl().comm_get_async_error(communicator, &state), "ncclCommGetAsyncError", communicator);
  if (state == ncclInProgress) return false;
  CUWEAVE_NCCL_TRY(state, "ncclCommGetAsyncError", communicator);
  return true;
}

void nccl_abort(CommunicatorHandle communicator) noexcept {
  // Returns ncclInProgress on a non-blocking communicator, finishing in NCCL's thread: nothing here uses the
  // communicator again either way.
  if (communicator != nullptr) (void)nccl().comm_abort(as_comm(communicator));
}

void nccl_destroy(CommunicatorHandle communicator) noexcept {
  if (communicator != nullptr) (void)nccl().comm_destroy(as_comm(communicator));
}

void nccl_group_start() { CUWEAVE_NCCL_TRY(nccl().group_start(), "ncclGroupStart", nullptr); }
void nccl_group_end() { CUWEAVE_NCCL_TRY(nccl().group_end(), "ncclGroupEnd", nullptr); }

void nccl_collective(const Collective& c, CommunicatorHandle handle, cudaStream_t stream) {
  const Nccl& api = nccl();
  ncclComm_t comm = as_comm(handle);
  const ncclDataType_t type = nccl_type(c.type);
  ncclResult_t result = ncclSuccess;
  switch (c.kind) {
    case CollectiveKind::AllReduce:
      result = api.all_reduce(c.send, c.recv, c.count, type, nccl_op(c.op), comm, stream);
      break;
    case CollectiveKind::Broadcast:
      result = api.broadcast(c.send, c.recv, c.count, type, c.root, comm, stream);
      break;
    case CollectiveKind::Reduce:
      result = api.reduce(c.send, c.recv, c.count, type, nccl_op(c.op), c.root, comm, stream);
      break;
    case CollectiveKind::AllGather:
      result = api.all_gather(c.send, c.recv, c.count, type, comm, stream);
      break;
    case CollectiveKind::ReduceScatter:
      result = api.reduce_scatter(c.send, c.recv, c.count, type, nccl_op(c.op), comm, stream);
      break;
    case CollectiveKind::Send:
      result = api.send(c.send, c.count, type, c.root, comm, stream);
      break;
    case CollectiveKind::Recv:
      result = api.recv(c.recv, c.count, type, c.root, comm, stream);
      break;
  }
  CUWEAVE_NCCL_TRY(result, nccl_function(c.kind), comm);
}

}  // namespace cuweave::cuda
