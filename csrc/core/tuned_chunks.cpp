#include "cuweave/tuned_chunks.hpp"

#include <algorithm>

namespace cuweave {

TunedChunks::TunedChunks(CopyThreadTuner& tuner, std::size_t chunk_bytes, std::size_t bytes)
    : transfer_(tuner),
      per_segment_(std::max<std::size_t>(4, kSegmentBytes / chunk_bytes)),
      chunks_((bytes + chunk_bytes - 1) / chunk_bytes) {}

std::size_t TunedChunks::threads_for(std::size_t index, Clock::time_point started) {
  Timed& segment = segments_[index / per_segment_ % 2];
  if (index % per_segment_ == 0) {
    const bool whole = (index / per_segment_ + 1) * per_segment_ <= chunks_;
    segment = Timed{transfer_.begin_segment(whole), {}, 0};
  }
  started_[index % 2] = started;
  return segment.segment.threads;
}

void TunedChunks::copied(std::size_t index, std::size_t bytes, Clock::time_point ended) {
  const Clock::time_point busy_since = std::max(started_[index % 2], last_ended_);
  last_ended_ = std::max(last_ended_, ended);
  Timed& segment = segments_[index / per_segment_ % 2];
  if (!segment.segment.measured || index % per_segment_ == 0) return;
  segment.bytes += bytes;
  if (ended > busy_since) segment.busy += ended - busy_since;
  if (index % per_segment_ == per_segment_ - 1) {
    transfer_.end_segment(segment.segment, segment.bytes, std::chrono::duration<double>(segment.busy).count());
  }
}

}  // namespace cuweave
