// A staged transfer's chunks, cut into segments whose host copies are samples for the copy-thread tuner (Note [Copy
// threads chosen as transfers run] in copy_thread_tuner.hpp).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>

#include "cuweave/copy_thread_tuner.hpp"

namespace cuweave {

// A segment's rate is the bytes of its chunks after the first over the time the copy threads had one of those
// chunks in hand: from each chunk's start, or from the previous chunk's end if that came later, to its end. Time
// between one chunk's end and the next one's start is the transfer waiting for a slot, whose earlier DMA may queue
// behind the stream's other work (a batch's copy behind the previous batch's compute): counted, it made the
// stream's work look like a slow host copy and moved the tuner off its best count. The first chunk is left out
// as it overlaps the previous segment's last one, which used another count.
class TunedChunks {
 public:
  using Clock = std::chrono::steady_clock;

  TunedChunks(CopyThreadTuner& tuner, std::size_t chunk_bytes, std::size_t bytes);
  TunedChunks(const TunedChunks&) = delete;
  TunedChunks& operator=(const TunedChunks&) = delete;

  // The thread count for the copy of chunk `index`, which starts at `started` (chunks start in order, at most
  // two in the copy threads at once).
  std::size_t threads_for(std::size_t index, Clock::time_point started = Clock::now());
  // The copy of chunk `index`, of `bytes`, ended at `ended` (chunks are reported in order).
  void copied(std::size_t index, std::size_t bytes, Clock::time_point ended = Clock::now());

 private:
  static constexpr std::size_t kSegmentBytes = std::size_t{64} << 20;
  struct Timed {
    CopyThreadTuner::Segment segment;
    Clock::duration busy;
    std::size_t bytes;
  };
  CopyThreadTuner::Transfer transfer_;
  std::size_t per_segment_;
  std::size_t chunks_;
  std::array<Timed, 2> segments_{};  // the latest segment begun and the one before (their chunks overlap)
  std::array<Clock::time_point, 2> started_{};  // of the chunks in the copy threads, by index % 2
  Clock::time_point last_ended_{};               // the latest reported chunk's end
};

}  // namespace cuweave
