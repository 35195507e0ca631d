// Note [Copy threads chosen as transfers run]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A staged copy between NumPy memory and a device is bound by the host's memory copy, and how many threads
// copy it fastest depends on the host and on what else runs there: on the H100 machine 12 or 16 threads
// staged 45 GB/s on one lease, while on another, whose cores others shared, 8 threads beat 16 (33 vs 23 GB/s).
// No one setting serves every host, and a calibration at start-up measures a moment, not the run. So the
// transfers themselves are the measurement: a large transfer is cut into segments of a few chunks, each
// segment's host copy uses one candidate count of threads, and its rate (bytes over the time the copy threads
// had its chunks in hand, TunedChunks) is a sample for that count. Time the transfer spent waiting for a slot is
// left out: the slot's earlier DMA may queue behind the stream's other work (a batch's copy behind the previous
// batch's compute), which says nothing about the host's copy. Until every candidate has a few samples, segments go round the
// candidates; then they use the count with the best median rate, and every so often one segment tries a
// neighbouring count, so a host whose load changes is followed. Samples from segments during which another
// staged transfer ran (a prefetcher beside the main thread) say nothing about one count, and are dropped.
// CUDA-free: the caller measures, the tuner only chooses.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace cuweave {

class CopyThreadTuner {
 public:
  // Tries each of `candidates` (thread counts; sorted and deduplicated here, at least one).
  explicit CopyThreadTuner(std::vector<std::size_t> candidates);
  CopyThreadTuner(const CopyThreadTuner&) = delete;
  CopyThreadTuner& operator=(const CopyThreadTuner&) = delete;

  static constexpr std::size_t kSamplesToChoose = 3;  // per candidate, before the first choice
  static constexpr std::size_t kSamplesKept = 5;      // per candidate: the median follows recent rates
  static constexpr std::size_t kRetryEvery = 16;      // segments between tries of a neighbouring count

  // A segment of a transfer: the thread count its copies use, and whether its rate is reported.
  struct Segment {
    std::size_t threads = 0;
    bool measured = false;
    std::size_t started_at = 0;  // the tuner's count of transfers begun, when the segment began
  };

  // A staged transfer in progress: segments measured while another one is under way are dropped.
  class Transfer {
   public:
    explicit Transfer(CopyThreadTuner& tuner);
    Transfer(const Transfer&) = delete;
    Transfer& operator=(const Transfer&) = delete;
    ~Transfer();
    // The next segment: its thread count, to be reported by end_segment() when `measurable` (a whole
    // segment, long enough to time). Segments may overlap (the next one begins before this one ends).
    Segment begin_segment(bool measurable);
    // `segment` moved `bytes` in `seconds`.
    void end_segment(const Segment& segment, std::size_t bytes, double seconds);

   private:
    CopyThreadTuner& tuner_;
  };

  struct Candidate {
    std::size_t threads;
    double median_bytes_per_second;  // 0 without samples
    std::size_t samples;             // kept now (at most kSamplesKept)
  };
  // The count segments use now (the best median, or the first candidate before any choice).
  std::size_t chosen() const;
  std::vector<Candidate> candidates() const;
  // Whether every candidate had kSamplesToChoose samples: the choice rests on measurements.
  bool settled() const;

 private:
  struct Rates {
    std::size_t threads;
    std::deque<double> recent;  // bytes per second, newest last
  };
  std::size_t next_threads(bool measured);
  void report(std::size_t threads, double bytes_per_second, std::size_t started_at);
  std::size_t best_index() const;  // LOCK: mutex_
  static double median(const std::deque<double>& values);

  mutable std::mutex mutex_;
  std::vector<Rates> rates_;           // LOCK: mutex_ (the counts are fixed after construction)
  bool settled_ = false;               // LOCK: mutex_
  std::size_t chosen_ = 0;             // LOCK: mutex_; an index into rates_
  std::size_t segments_ = 0;           // LOCK: mutex_; measured segments begun since settling
  std::size_t retries_ = 0;            // LOCK: mutex_; alternates the neighbour tried below and above
  std::size_t transfers_begun_ = 0;    // LOCK: mutex_
  std::size_t transfers_running_ = 0;  // LOCK: mutex_
};

}  // namespace cuweave
