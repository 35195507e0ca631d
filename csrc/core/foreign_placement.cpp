// Note [Other libraries' kernels in a weave] in cuweave/foreign_placement.hpp.
#include "cuweave/adopted_stream.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/foreign_placement.hpp"

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
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
    return DefaultStream::legacy(backend().devices().current_device());
  }
  if (handle == streams.per_thread_default_stream()) {
    return DefaultStream::per_thread(backend().devices().current_device());
  }
  return AdoptedStream::adopt(handle, nullptr);
}

void ForeignPlacement::reset() noexcept {
  captured_origins_.clear();
  unmoved_.clear();
  followed_.clear();
  in_flight_origin_.reset();
  in_flight_.reset();
}

const ForeignPlacement::CapturedOrigin& ForeignPlacement::captured_origin(StreamHandle handle, const Weave& weave) {
  for (const CapturedOrigin& met : captured_origins_) {
    if (met.handle == handle) return met;
  }
  std::shared_ptr<Stream> stream = stream_named(handle);
  if (stream->is_legacy_default()) {
    throw InvalidArgument(
        "another library's kernel was launched on the legacy default stream inside a weave under a capture "
        "(cuweave.woven, or cuweave.weave() inside cuweave.capture()), and CUDA cannot capture that stream: give "
        "the library a stream of its own for the block (CuPy: with cupy.cuda.Stream(non_blocking=True):)");
  }
  CapturedOrigin met{handle, stream, false};
  if (stream->device() != weave.device()) {
    met.stream = nullptr;  // another device's: left where it was called
  } else if (const std::shared_ptr<Capture> capture = Capture::of(*stream); capture == nullptr) {
    stream->wait(*weave.streams().front());  // joins the capture after its first stream's work so far
    met.joined = true;
  } else if (capture != weave.capture()) {
    met.stream = nullptr;  // another capture's stream: left where it was called
  }
  captured_origins_.push_back(std::move(met));
  return captured_origins_.back();
}

bool ForeignPlacement::follow_into_capture(StreamHandle handle) {
  const Weave* weave = Weave::active();
  if (weave == nullptr || weave->capture() == nullptr) return false;
  if (handle == nullptr || handle == backend().streams().legacy_default_stream()) return false;
  return captured_origin(handle, *weave).joined;
}

bool ForeignPlacement::end() {
  bool joined = false;
  if (const Weave* weave = Weave::active(); weave != nullptr && weave->capture() != nullptr) {
    const std::shared_ptr<Stream> first = weave->streams().front();
    for (const CapturedOrigin& met : captured_origins_) {
      if (!met.joined) continue;
      first->wait(*met.stream);
      joined = true;
    }
  }
  reset();
  return joined;
}

std::shared_ptr<Stream> ForeignPlacement::place(StreamHandle called, sanitizer::AccessSpan accesses) {
  Weave* weave = Weave::active();
  if (weave == nullptr) return nullptr;
  const std::shared_ptr<Stream> origin =
      weave->capture() != nullptr ? captured_origin(called, *weave).stream : stream_named(called);
  if (origin == nullptr || origin->device() != weave->device()) return nullptr;
  std::shared_ptr<Stream> chosen = weave->place(accesses, nullptr);
  if (chosen->same_queue(*origin)) return nullptr;
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
