// Which streams wrote which bytes of one piece of memory that several arrays view (Note [Views share their
// base's memory]).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace cuweave {

class Stream;

// Note [Writers of shared memory]
// An array alone keeps the stream that last wrote it (its stream), and a host read waits for that one. Views
// of one memory are written through each other: chunk i of a buffer on stream i, then the whole buffer read.
// So the arrays viewing one memory share this record: per stream, the span of the bytes it wrote. A later
// write of every byte of a range that covers another stream's span, or either end of it, takes that part from
// it: in a program without races the later write is ordered after the earlier one (else the sanitizer reports
// them), so waiting for it waits for both. A stepped view's write (x[::2]) leaves gaps in its span, which
// another stream's bytes may fill (x[1::2]), so it takes nothing from other spans. A read waits for the streams
// whose spans overlap its bytes, and no other.
class ArrayWriters {
 public:
  ArrayWriters(std::uintptr_t begin, std::uintptr_t end, std::shared_ptr<Stream> stream);

  // `stream` wrote bytes of [begin, end): all of them when `every_byte`, else some (a stepped view's elements).
  void wrote(std::uintptr_t begin, std::uintptr_t end, const std::shared_ptr<Stream>& stream, bool every_byte);
  // The streams that wrote any of [begin, end), most recent last.
  std::vector<std::shared_ptr<Stream>> overlapping(std::uintptr_t begin, std::uintptr_t end) const;

 private:
  struct Span {
    std::uintptr_t begin, end;
    std::shared_ptr<Stream> stream;
  };
  mutable std::mutex mutex_;
  std::vector<Span> spans_;  // LOCK: mutex_; one per stream, most recent last
};

}  // namespace cuweave
