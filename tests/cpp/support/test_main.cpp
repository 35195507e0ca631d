// The core tests run on the host simulator, configured before its first use.
#include <cstdlib>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"

namespace cuweave {

// The core's backend selection can name the CUDA backend, which these tests do not link (csrc/cuda needs a
// CUDA compiler and is what they leave out); choosing it fails and says why.
Backend& cuda_backend() {
  throw DeviceUnavailable("cuda_backend", 100, "cudaErrorNoDevice",
                          "the C++ core tests link no CUDA backend; they run on the simulator", __FILE__, __LINE__);
}

namespace {

class SimulatorEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    // Read once, at first use; set here, before anything uses the simulator or the pools:
    // Gates (support/gate.hpp) need worker threads, which a seed (exploring mode) would turn off.
    unsetenv("CUWEAVE_SIM_SEED");
    // Two devices, so that per-device bookkeeping can be told apart.
    setenv("CUWEAVE_SIM_DEVICES", "2", 1);
    // A small staging ring of a known size: two slots of 1 MiB (staging_ring_test.cpp).
    setenv("CUWEAVE_STAGING_SLOTS", "2", 1);
    setenv("CUWEAVE_STAGING_CHUNK_MB", "1", 1);
    select_backend("sim");
  }
};

}  // namespace
}  // namespace cuweave

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new cuweave::SimulatorEnvironment);  // gtest owns it
  return RUN_ALL_TESTS();
}
