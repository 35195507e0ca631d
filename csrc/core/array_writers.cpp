#include "cuweave/array_writers.hpp"

#include <algorithm>

namespace cuweave {

ArrayWriters::ArrayWriters(std::uintptr_t begin, std::uintptr_t end, std::shared_ptr<Stream> stream) {
  if (stream) spans_.push_back(Span{begin, end, std::move(stream)});
}

void ArrayWriters::wrote(std::uintptr_t begin, std::uintptr_t end, const std::shared_ptr<Stream>& stream,
                         bool every_byte) {
  if (begin >= end) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Span span{begin, end, stream};
  for (auto it = spans_.begin(); it != spans_.end();) {
    const bool same_stream = it->stream == stream;
    if (same_stream) {  // one span per stream: the hull of what it wrote
      span.begin = std::min(span.begin, it->begin);
      span.end = std::max(span.end, it->end);
    } else if (every_byte && begin <= it->begin && it->begin < end) {  // its start rewritten: what is left is after
      it->begin = std::min(end, it->end);
    } else if (every_byte && begin < it->end && it->end <= end) {  // its end rewritten: what is left is before
      it->end = begin;
    }
    it = (same_stream || it->begin >= it->end) ? spans_.erase(it) : it + 1;
  }
  spans_.push_back(std::move(span));
}

std::vector<std::shared_ptr<Stream>> ArrayWriters::overlapping(std::uintptr_t begin, std::uintptr_t end) const {
  std::vector<std::shared_ptr<Stream>> streams;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Span& span : spans_) {
    if (span.begin < end && begin < span.end) streams.push_back(span.stream);
  }
  return streams;
}

}  // namespace cuweave
