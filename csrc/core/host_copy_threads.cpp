#include "cuweave/host_copy_threads.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace cuweave {

namespace {
constexpr std::size_t kMinimumPiece = std::size_t{1} << 20;  // smaller pieces cost more to hand out than to copy

std::size_t configured_threads() {
  if (const char* value = std::getenv("CUWEAVE_COPY_THREADS")) {
    const long requested = std::atol(value);
    if (requested >= 1) return static_cast<std::size_t>(requested);
  }
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::min<std::size_t>(8, hardware);
}
}  // namespace

HostCopyThreads& HostCopyThreads::instance() {
  static auto* pool = new HostCopyThreads(configured_threads() - 1);  // leaked: threads live until exit
  return *pool;
}

HostCopyThreads::HostCopyThreads(std::size_t workers) {
  for (std::size_t i = 0; i < workers; ++i) {
    workers_.emplace_back([this] { run(); });
    workers_.back().detach();
  }
}

void HostCopyThreads::copy(void* destination, const void* source, std::size_t bytes) {
  const std::size_t parts = std::max<std::size_t>(1, std::min(threads(), bytes / kMinimumPiece));
  if (parts == 1) {
    std::memcpy(destination, source, bytes);
    return;
  }
  const std::size_t piece = (bytes + parts - 1) / parts;
  std::size_t remaining = parts - 1;  // the caller copies the first piece itself
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 1; i < parts; ++i) {
      const std::size_t offset = i * piece;
      pieces_.push_back(Piece{static_cast<char*>(destination) + offset, static_cast<const char*>(source) + offset,
                              std::min(piece, bytes - offset), &remaining});
    }
  }
  work_.notify_all();
  std::memcpy(destination, source, std::min(piece, bytes));
  // Help with what is left, then wait for the pieces other threads took.
  std::unique_lock<std::mutex> lock(mutex_);
  while (remaining > 0) {
    auto mine = std::find_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return p.remaining == &remaining; });
    if (mine == pieces_.end()) {
      done_.wait(lock, [&] { return remaining == 0; });
      break;
    }
    Piece p = *mine;
    pieces_.erase(mine);
    lock.unlock();
    std::memcpy(p.destination, p.source, p.bytes);
    lock.lock();
    --remaining;
  }
}

void HostCopyThreads::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_.wait(lock, [this] { return !pieces_.empty(); });
    Piece p = pieces_.front();
    pieces_.pop_front();
    lock.unlock();
    std::memcpy(p.destination, p.source, p.bytes);
    lock.lock();
    if (--*p.remaining == 0) done_.notify_all();
  }
}

}  // namespace cuweave
