// Found: a 1 KB graph round trip took 9.8 µs with a kernel writing mapped pinned memory against 12.4 with memcpy
// nodes; kernels won both ways from 64 to 256 KB (19.4 vs 26.5 µs at 64 KB) and were even at 4 MB (H100).
// Cited by: Note [Copies by kernel] (csrc/include/cuweave/copy_by.hpp) and python/cuweave/graph_function.py.
// small_round_trip_probe.cu -- does a graph round trip (pinned input -> device -> add 1 -> pinned output)
// get faster when its host<->device copies are kernels reading and writing mapped pinned memory instead of
// memcpy nodes (copy engines)? And from what size on do the copy engines win?
//
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/small_round_trip_probe.cu -o /tmp/rt && /tmp/rt
//
// Prints one line per (size, variant): µs per round trip (host memcpy into staging, graph launch, synchronize),
// median of 7 repetitions of 2000 calls after a warm-up repetition.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_check.hpp"

__global__ void add_one(const float* in, float* out, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        out[i] = in[i] + 1.0f;
}

__global__ void copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n16) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x)
        dst[i] = src[i];
}

// One block: copies, then raises a flag in mapped host memory once the copy is visible there.
__global__ void copy16_then_flag(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n16,
                                 volatile unsigned* flag, unsigned* sequence) {
    for (size_t i = threadIdx.x; i < n16; i += blockDim.x) dst[i] = src[i];
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) *flag = ++*sequence;
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static unsigned blocks_for(size_t items, unsigned threads, unsigned cap) {
    return unsigned(std::min<size_t>(cap, std::max<size_t>(1, (items + threads - 1) / threads)));
}

int main() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (size_t bytes : {size_t(1) << 10, size_t(16) << 10, size_t(64) << 10, size_t(256) << 10, size_t(1) << 20,
                         size_t(4) << 20}) {
        size_t n = bytes / 4;
        float *pin_in, *pin_out, *dev_in, *dev_out;
        CHECK(cudaHostAlloc(&pin_in, bytes, cudaHostAllocDefault));
        CHECK(cudaHostAlloc(&pin_out, bytes, cudaHostAllocDefault));
        CHECK(cudaMalloc(&dev_in, bytes));
        CHECK(cudaMalloc(&dev_out, bytes));
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = float(i % 1000);
        unsigned add_blocks = blocks_for(n, 256, 4u * sms);
        unsigned copy_blocks = blocks_for(bytes / 16, 256, 4u * sms);
        unsigned* flag;
        unsigned* sequence;
        CHECK(cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocDefault));
        CHECK(cudaMalloc(&sequence, sizeof(unsigned)));
        CHECK(cudaMemset(sequence, 0, sizeof(unsigned)));
        *flag = 0;
        unsigned expected = 0;
        for (int variant = 0; variant < (bytes <= (16 << 10) ? 5 : 4); ++variant) {
            // 0: memcpy nodes; 1: copy kernels through mapped pinned memory; 2: H2D kernel + D2H memcpy;
            // 3: H2D memcpy + D2H kernel
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            if (variant == 0 || variant == 3 || variant == 4)
                CHECK(cudaMemcpyAsync(dev_in, pin_in, bytes, cudaMemcpyDefault, s));
            else
                copy16<<<copy_blocks, 256, 0, s>>>((const uint4*)pin_in, (uint4*)dev_in, bytes / 16);
            add_one<<<add_blocks, 256, 0, s>>>(dev_in, dev_out, n);
            if (variant == 0 || variant == 2)
                CHECK(cudaMemcpyAsync(pin_out, dev_out, bytes, cudaMemcpyDefault, s));
            else if (variant == 4)
                copy16_then_flag<<<1, 256, 0, s>>>((const uint4*)dev_out, (uint4*)pin_out, bytes / 16, flag, sequence);
            else
                copy16<<<copy_blocks, 256, 0, s>>>((const uint4*)dev_out, (uint4*)pin_out, bytes / 16);
            CHECK(cudaStreamEndCapture(s, &graph));
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
            CHECK(cudaGraphUpload(exec, s));
            int calls = bytes <= (64 << 10) ? 2000 : 200;
            auto rep = [&] {
                double t0 = now_us();
                for (int c = 0; c < calls; ++c) {
                    std::memcpy(pin_in, x.data(), bytes);
                    CHECK(cudaGraphLaunch(exec, s));
                    if (variant == 4) {
                        ++expected;
                        while (*(volatile unsigned*)flag != expected) {
                        }
                    } else {
                        CHECK(cudaStreamSynchronize(s));
                    }
                }
                return (now_us() - t0) / calls;
            };
            rep();
            std::vector<double> times;
            for (int r = 0; r < 7; ++r) times.push_back(rep());
            std::sort(times.begin(), times.end());
            bool ok = true;
            for (size_t i = 0; i < n; ++i) ok &= pin_out[i] == x[i] + 1.0f;
            CHECK(cudaStreamSynchronize(s));
            const char* names[] = {"memcpy nodes", "copy kernels", "H2D kernel, D2H memcpy", "H2D memcpy, D2H kernel",
                                   "D2H kernel + host flag spin"};
            std::printf("%8zu B  %-24s %8.2f us  (min %.2f)%s\n", bytes, names[variant], times[3], times[0],
                        ok ? "" : "  WRONG RESULT");
            CHECK(cudaGraphExecDestroy(exec));
            CHECK(cudaGraphDestroy(graph));
        }
        for (void* host : {(void*)flag, (void*)pin_in, (void*)pin_out}) CHECK(cudaFreeHost(host));
        for (void* device : {(void*)sequence, (void*)dev_in, (void*)dev_out}) CHECK(cudaFree(device));
    }
    return 0;
}
