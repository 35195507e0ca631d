// OwnedStream: a CUDA stream cuweave made (cuweave.Stream(), a StreamPool's, the weave's and a conditional node's
// body streams). Its last reference destroys the handle, as close() does; work already queued still completes.
#pragma once

#include <memory>
#include <string>

#include "cuweave/stream.hpp"

namespace cuweave {

class OwnedStream final : public Stream {
 public:
  // A new stream on `device`. `priority` must lie in the device's range (checked). `name` is for people (trace
  // lanes, repr).
  static std::shared_ptr<Stream> create(int device, int priority, bool blocking, std::string name = {});
  // As create, a stream that a StreamPool lends: its users cannot close it.
  static std::shared_ptr<Stream> create_lent_by_pool(int device, int priority, bool blocking, std::string name = {});
  // A new non-blocking stream on `partition` (Note [SM partitions] in sm_partition.hpp), which it keeps alive until
  // its work has completed. Unnamed, it is named "on N SMs".
  static std::shared_ptr<Stream> create_on(std::shared_ptr<SmPartition> partition, int priority,
                                           std::string name = {});

  ~OwnedStream() override;
  // Destroys the stream (work already queued still completes) and closes its adoptions. Refused for a stream a
  // pool lends.
  void close() override;

 private:
  OwnedStream(StreamHandle handle, int device, int priority, bool blocking, bool lent_by_pool, std::string name);
  static std::shared_ptr<Stream> make(int device, int priority, bool blocking, bool lent_by_pool, std::string name);
  // The OwnedStream of `handle`, just created (on `partition` when given): the handle is destroyed when the object
  // cannot be made, and by the object once it exists.
  static std::shared_ptr<Stream> own(StreamHandle handle, int device, int priority, bool blocking, bool lent_by_pool,
                                     std::string name, std::shared_ptr<SmPartition> partition = nullptr);

  // Closes every adoption of this stream's handle, which cuweave is about to destroy (Note [Adoptions of a handle
  // cuweave destroys] in adopted_stream.hpp).
  void close_adoptions() noexcept;
  // Before the handle is destroyed: the partition stays alive until the work queued so far has completed.
  void release_partition_after_work() noexcept;
};

}  // namespace cuweave
