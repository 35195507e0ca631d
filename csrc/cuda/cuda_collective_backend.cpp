// The CUDA backend's collectives (CollectiveBackend), through NCCL (nccl_collectives.cpp).
#include <string>
#include <vector>

#include "cuda/active_captures.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/nccl_collectives.hpp"
#include "cuweave/collective_backend.hpp"

namespace cuweave::cuda {

namespace {

class CudaCollectiveBackend final : public CollectiveBackend {
 public:
  CudaCollectiveBackend(const ActiveCaptures& captures, StreamBackend& streams)
      : captures_(captures), streams_(streams) {}

  std::string collective_id() override { return nccl_unique_id(); }
  CommunicatorHandle create_communicator(const std::string& id, int ranks, int rank, int device) override {
    return nccl_join(id, ranks, rank, device);
  }
  std::vector<CommunicatorHandle> create_communicators(const std::vector<int>& devices) override {
    return nccl_for_devices(devices);
  }
  // The watchdog asks and aborts from its own thread, maybe while another thread captures in global mode.
  bool communicator_ready(CommunicatorHandle communicator) override {
    BookkeepingGuard guard(captures_);
    return nccl_ready(communicator);
  }
  void abort_communicator(CommunicatorHandle communicator) noexcept override {
    BookkeepingGuard guard(captures_);
    nccl_abort(communicator);
  }
  void destroy_communicator(CommunicatorHandle communicator) noexcept override {
    BookkeepingGuard guard(captures_);
    nccl_destroy(communicator);
  }
  void begin_collective_group() override { nccl_group_start(); }
  void end_collective_group() override { nccl_group_end(); }
  void collective(const Collective& collective, CommunicatorHandle communicator, StreamHandle stream) override {
    nccl_collective(collective, communicator, as_stream(stream));
  }
  bool collective_completed(EventHandle event) override { return streams_.event_complete(event); }

 private:
  const ActiveCaptures& captures_;
  StreamBackend& streams_;  // whether the event after a collective has completed
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_collective_backend(const ActiveCaptures& captures,
                                                           StreamBackend& streams) {
  return std::make_unique<CudaCollectiveBackend>(captures, streams);
}

}  // namespace cuweave::cuda
