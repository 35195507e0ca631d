// cudaDeviceSynchronize in slices (Note [Interruptible waits]): CUDA offers no bounded or polled form of it,
// so a helper thread per device makes the blocking call while callers wait in slices (BackgroundSynchronizer).
#pragma once

#include "cuweave/background_synchronizer.hpp"

namespace cuweave::cuda {

// The synchronizer of `device` (made on first use, never destroyed).
BackgroundSynchronizer& device_synchronizer(int device);

}  // namespace cuweave::cuda
