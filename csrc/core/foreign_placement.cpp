// Note [Other libraries' kernels in a weave] in cuweave/foreign_placement.hpp.
#include "cuweave/foreign_placement.hpp"

#include "cuweave/backend.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/weave.hpp"

namespace cuweave {

ForeignPlacement& ForeignPlacement::this_thread() {
  thread_local ForeignPlacement placement;
  return placement;
}

std::shared_ptr<Stream> ForeignPlacement::stream_named(StreamHandle handle) {
  const StreamBackend& streams = backend().streams();
  if (handle == nullptr || handle == streams.legacy_default_stream()) {
    return Stream::legacy_default(backend().devices().current_device());
  }
  if (handle == streams.per_thread_default_stream()) {
    return Stream::per_thread_default(backend().devices().current_device());
  }
  return Stream::adopt(handle, nullptr);
}

void ForeignPlacement::reset() noexcept {
  unmoved_.clear();
  followed_.clear();
  in_flight_origin_.reset();
  in_flight_.reset();
}

std::shared_ptr<Stream> ForeignPlacement::place(const std::shared_ptr<Stream>& origin,
                                                const std::vector<sanitizer::Access>& accesses) {
  Weave* weave = Weave::active();
  if (weave == nullptr || origin->device() != weave->device()) return nullptr;
  std::shared_ptr<Stream> chosen = weave->place(accesses, nullptr);
  if (chosen->same_queue(*origin)) return nullptr;
  const StreamHandle called = origin->raw_handle();
  const std::uint64_t spans = unmoved_.try_emplace(called, 1).first->second;  // at first, all its work so far
  std::uint64_t& followed = followed_[{called, chosen->raw_handle()}];
  if (followed < spans) {
    chosen->wait(*origin);
    followed = spans;
  }
  in_flight_origin_ = origin;
  in_flight_ = chosen;
  return chosen;
}

void ForeignPlacement::launch_queued() {
  const std::shared_ptr<Stream> origin = std::move(in_flight_origin_);
  const std::shared_ptr<Stream> placed = std::move(in_flight_);
  if (origin && placed) origin->wait(*placed);
}

void ForeignPlacement::unmoved(StreamHandle called) {
  // A stream nothing was moved off yet needs no count: its first moved launch follows all of its work.
  const auto found = unmoved_.find(called);
  if (found != unmoved_.end()) ++found->second;
}

}  // namespace cuweave
