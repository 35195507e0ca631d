#include "cuweave/copy_thread_tuner.hpp"

#include <algorithm>
#include <stdexcept>

namespace cuweave {

CopyThreadTuner::CopyThreadTuner(std::vector<std::size_t> candidates) {
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  candidates.erase(std::remove(candidates.begin(), candidates.end(), std::size_t{0}), candidates.end());
  if (candidates.empty()) throw std::invalid_argument("CopyThreadTuner needs at least one thread count");
  for (std::size_t threads : candidates) rates_.push_back(Rates{threads, {}});
  chosen_ = rates_.size() - 1;  // before any measurement: the most threads
  settled_ = rates_.size() == 1;
}

CopyThreadTuner::Transfer::Transfer(CopyThreadTuner& tuner) : tuner_(tuner) {
  std::lock_guard<std::mutex> lock(tuner_.mutex_);
  ++tuner_.transfers_begun_;
  ++tuner_.transfers_running_;
}

CopyThreadTuner::Transfer::~Transfer() {
  std::lock_guard<std::mutex> lock(tuner_.mutex_);
  --tuner_.transfers_running_;
}

CopyThreadTuner::Segment CopyThreadTuner::Transfer::begin_segment(bool measurable) {
  Segment segment;
  {
    std::lock_guard<std::mutex> lock(tuner_.mutex_);
    // Another transfer running now, or beginning before this segment ends, makes the sample moot.
    segment.measured = measurable && tuner_.transfers_running_ == 1;
    segment.started_at = tuner_.transfers_begun_;
  }
  segment.threads = tuner_.next_threads(segment.measured);
  return segment;
}

void CopyThreadTuner::Transfer::end_segment(const Segment& segment, std::size_t bytes, double seconds) {
  if (!segment.measured || seconds <= 0) return;
  tuner_.report(segment.threads, static_cast<double>(bytes) / seconds, segment.started_at);
}

std::size_t CopyThreadTuner::next_threads(bool measured) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!measured || rates_.size() == 1) return rates_[chosen_].threads;
  if (!settled_) {  // round the candidates: the one with the fewest samples next
    auto fewest = std::min_element(rates_.begin(), rates_.end(), [](const Rates& a, const Rates& b) {
      return a.recent.size() < b.recent.size();
    });
    return fewest->threads;
  }
  if (++segments_ % kRetryEvery != 0) return rates_[chosen_].threads;
  // A neighbour of the choice, below and above in turn (the one there is at either end).
  const bool below = (retries_++ % 2 == 0 && chosen_ > 0) || chosen_ + 1 == rates_.size();
  return rates_[below ? chosen_ - 1 : chosen_ + 1].threads;
}

void CopyThreadTuner::report(std::size_t threads, double bytes_per_second, std::size_t started_at) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (transfers_running_ != 1 || transfers_begun_ != started_at) return;  // shared with another transfer
  auto it = std::find_if(rates_.begin(), rates_.end(), [&](const Rates& r) { return r.threads == threads; });
  if (it == rates_.end()) return;
  it->recent.push_back(bytes_per_second);
  if (it->recent.size() > kSamplesKept) it->recent.pop_front();
  if (!settled_) {
    settled_ = std::all_of(rates_.begin(), rates_.end(),
                           [](const Rates& r) { return r.recent.size() >= kSamplesToChoose; });
    if (!settled_) return;
  }
  chosen_ = best_index();
}

// Fewer threads unless more are clearly faster: where the link, not the host, sets the pace, every count
// copies as fast, and the fewest leave the most cores to the program.
std::size_t CopyThreadTuner::best_index() const {
  constexpr double kClearlyFaster = 1.02;
  std::size_t best = 0;
  double best_rate = median(rates_[0].recent);
  for (std::size_t i = 1; i < rates_.size(); ++i) {
    const double rate = median(rates_[i].recent);
    if (rate > best_rate * kClearlyFaster) {
      best = i;
      best_rate = rate;
    }
  }
  return best;
}

double CopyThreadTuner::median(const std::deque<double>& values) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  return sorted.size() % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

std::size_t CopyThreadTuner::chosen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rates_[chosen_].threads;
}

bool CopyThreadTuner::settled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return settled_;
}

std::vector<CopyThreadTuner::Candidate> CopyThreadTuner::candidates() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Candidate> out;
  for (const Rates& r : rates_) out.push_back(Candidate{r.threads, median(r.recent), r.recent.size()});
  return out;
}

}  // namespace cuweave
