#include "cuda/own_launch.hpp"

#include "cuda/cupti_tracer.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/own_calls.hpp"

namespace cuweave::cuda {

CUresult launch_own_kernel(const OwnLaunch& launch, void** arguments) {
  CUlaunchConfig config{};
  config.gridDimX = launch.grid.x, config.gridDimY = launch.grid.y, config.gridDimZ = launch.grid.z;
  config.blockDimX = launch.block.x, config.blockDimY = launch.block.y, config.blockDimZ = launch.block.z;
  config.sharedMemBytes = launch.shared_bytes;
  // The per-thread form reads null as the thread's default stream (Note [cuweave's launches beside the launch watch]).
  config.hStream = launch.stream == nullptr ? CU_STREAM_LEGACY : launch.stream;
  CUlaunchAttribute attribute{};
  if (launch.programmatic) {
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  const OwnCall own;  // Note [cuweave's own runtime calls]: a trace's callbacks pass it over
  tell_own_launch(reinterpret_cast<StreamHandle>(launch.stream));
  return run_in_a_context(
      [&] { return driver().launch_kernel_ex_per_thread(&config, launch.function, arguments, nullptr); });
}

}  // namespace cuweave::cuda
