// The simulator's rules of access across devices and of a lost context (Note [Simulated device access]), directly.
#include <string>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"
#include "sim/device_access.hpp"

namespace cuweave::sim {
namespace {

MemoryRange device_memory(int device, bool pooled) {
  return MemoryRange{0x10000, 256, MemoryKind::Device, device, pooled};
}

TEST(SimDeviceAccessTest, AKernelReachesHostMemoryAndItsOwnDevicesMemoryWithoutAnyGrant) {
  DeviceAccess access;
  EXPECT_TRUE(access.kernel_reaches(0, MemoryRange{0x10000, 256, MemoryKind::Pinned, -1}));
  EXPECT_TRUE(access.kernel_reaches(0, MemoryRange{0x10000, 256, MemoryKind::Registered, -1}));
  EXPECT_TRUE(access.kernel_reaches(1, device_memory(1, false)));
  EXPECT_TRUE(access.kernel_reaches(1, device_memory(1, true)));
  EXPECT_TRUE(access.pool_granted(1, 1));
  EXPECT_FALSE(access.kernel_reaches(0, device_memory(1, false)));
  EXPECT_FALSE(access.kernel_reaches(0, device_memory(1, true)));
  EXPECT_FALSE(access.pool_granted(1, 0));
}

TEST(SimDeviceAccessTest, PeerAccessReachesAPeersPlainMemoryOneWayAndGrantsNoPool) {
  DeviceAccess access;
  access.enable_peer(0, 1);  // with device 0 current: its kernels reach device 1's cudaMalloc memory
  EXPECT_TRUE(access.kernel_reaches(0, device_memory(1, false)));
  EXPECT_FALSE(access.kernel_reaches(1, device_memory(0, false)));  // not the other way round
  EXPECT_FALSE(access.kernel_reaches(0, device_memory(1, true)));   // nor device 1's pool
  EXPECT_FALSE(access.pool_granted(1, 0));
}

TEST(SimDeviceAccessTest, APoolGrantReachesThatPoolsMemoryAloneForThatAccessorAlone) {
  DeviceAccess access;
  access.grant_pool(/*pool_device=*/1, /*accessor=*/0);
  EXPECT_TRUE(access.pool_granted(1, 0));
  EXPECT_TRUE(access.kernel_reaches(0, device_memory(1, true)));
  EXPECT_FALSE(access.kernel_reaches(0, device_memory(1, false)));  // plain memory needs peer access
  EXPECT_FALSE(access.kernel_reaches(2, device_memory(1, true)));
  EXPECT_FALSE(access.pool_granted(0, 1));
}

TEST(SimDeviceAccessTest, ALostContextFailsEveryLaterCallOnThatDeviceNamingTheFirstCallThatReportedIt) {
  DeviceAccess access;
  access.check_context(0, "cudaLaunchKernel");  // nothing lost: no error
  EXPECT_FALSE(access.context_lost(0));
  access.lose_context(1);
  EXPECT_TRUE(access.context_lost(1));
  EXPECT_FALSE(access.context_lost(0));
  access.check_context(0, "cudaMemcpyAsync");  // another device goes on
  try {
    access.check_context(1, "cudaStreamSynchronize");
    FAIL() << "a call on a device whose context is lost went through";
  } catch (const ContextLost& error) {
    EXPECT_EQ(error.name(), "cudaErrorIllegalAddress");
    EXPECT_EQ(error.call(), "cudaStreamSynchronize");
    EXPECT_NE(std::string(error.what()).find("cannot reach"), std::string::npos) << error.what();
    EXPECT_EQ(error.first_call(), "cudaStreamSynchronize");  // this call is the first to report it
  }
  try {
    access.check_context(1, "cudaMemcpyAsync");
    FAIL() << "a second call on the lost device went through";
  } catch (const ContextLost& error) {
    EXPECT_EQ(error.call(), "cudaMemcpyAsync");
    EXPECT_EQ(error.first_call(), "cudaStreamSynchronize");
    EXPECT_EQ(error.first_name(), "cudaErrorIllegalAddress");
    EXPECT_NE(std::string(error.what()).find("cudaStreamSynchronize"), std::string::npos) << error.what();
  }
}

TEST(SimDeviceAccessTest, ALostContextSaysItsCauseWhenGivenOne) {
  DeviceAccess access;
  access.lose_context(0, "hit an injected fault");
  try {
    access.check_context(0, "cudaEventSynchronize");
    FAIL() << "a call on a device whose context is lost went through";
  } catch (const ContextLost& error) {
    EXPECT_NE(std::string(error.what()).find("hit an injected fault"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace cuweave::sim
