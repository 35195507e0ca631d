#pragma once

namespace cuweave {

// Note [Copies by kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A copy engine takes a few microseconds to start a copy, which is most of a small copy's time: on an
// H100 a graph of pinned 1 KB in -> add -> 1 KB out took 12.4 µs round trip with memcpy nodes and 9.8
// with the device-to-host copy done by a kernel writing the mapped pinned memory (posted writes over
// PCIe); from 64 KB to 256 KB kernels won both ways (19.4 vs 26.5 µs at 64 KB), at 1 MB by a few percent
// (once lost in a benchmark run), and at 4 MB the two were even (tools/probes/small_round_trip_probe.cu). CopyBy::KernelWhereReachable asks for such a kernel;
// where the stream's device cannot reach a side directly (pageable memory, another device's memory),
// the copy goes to a copy engine as usual. Either way it is one stream-ordered copy with the same bytes,
// holds and sanitizer accesses. Kernels use SMs that compute might want, so nothing picks them by
// default; graph functions do for their small staging copies.
enum class CopyBy { CopyEngine, KernelWhereReachable };

}  // namespace cuweave
