// A Hold keeps something alive (a device allocation, a pinned block, a Python object) without the core
// knowing what it is. Queued work stores Holds until it completes: see Note [Stream-ordered lifetimes].
#pragma once

#include <memory>
#include <vector>

namespace cuweave {

using Hold = std::shared_ptr<const void>;
using Holds = std::vector<Hold>;

}  // namespace cuweave
