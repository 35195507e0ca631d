// Raw CUDA figures for benchmarks/multi_gpu.py, between devices 0 and 1: a 256 MB peer copy
// (cudaMemcpyPeerAsync with peer access enabled, GB/s, median of --reps), the same bytes through pinned host
// memory (device 0 -> pinned on a stream of device 0, an event, pinned -> device 1 on a stream of device 1;
// GB/s), and an event recorded on a stream of device 0 and waited for by a stream of device 1 (host µs per
// record + wait, median of --reps loops of --n). Prints one JSON object.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t err_ = (call);                                                                    \
        if (err_ != cudaSuccess) {                                                                    \
            std::fprintf(stderr, "raw_multi_gpu: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                         cudaGetErrorName(err_));                                                     \
            std::exit(1);                                                                             \
        }                                                                                             \
    } while (0)

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    int reps = 7, n = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string arg = argv[i];
        if (arg == "--reps") reps = std::atoi(argv[i + 1]);
        if (arg == "--n") n = std::atoi(argv[i + 1]);
    }
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
        std::fprintf(stderr, "raw_multi_gpu: needs two devices, found %d\n", count);
        return 3;
    }
    int can01 = 0, can10 = 0;
    CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    cudaStream_t s0, s1;
    CHECK(cudaSetDevice(1));
    if (can10) CHECK(cudaDeviceEnablePeerAccess(0, 0));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaSetDevice(0));
    if (can01) CHECK(cudaDeviceEnablePeerAccess(1, 0));
    CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));

    const size_t bytes = size_t(256) << 20;
    void *src = nullptr, *dst = nullptr;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMemset(src, 1, bytes));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaSetDevice(0));
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    std::vector<double> gbps;
    for (int r = 0; r <= reps; ++r) {
        CHECK(cudaEventRecord(start, s0));
        CHECK(cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, s0));
        CHECK(cudaEventRecord(end, s0));
        CHECK(cudaEventSynchronize(end));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, end));
        if (r > 0) gbps.push_back(bytes / (ms * 1e-3) / 1e9);  // the first is a warm-up
    }

    // Through pinned host memory; device 0's stream waits for the second copy, so that the end event follows both.
    void* staging = nullptr;
    CHECK(cudaMallocHost(&staging, bytes));
    cudaEvent_t to_host_done, from_host_done;
    CHECK(cudaEventCreateWithFlags(&to_host_done, cudaEventDisableTiming));
    CHECK(cudaSetDevice(1));
    CHECK(cudaEventCreateWithFlags(&from_host_done, cudaEventDisableTiming));  // recorded on s1: device 1's
    CHECK(cudaSetDevice(0));
    std::vector<double> through_host;
    for (int r = 0; r <= reps; ++r) {
        CHECK(cudaEventRecord(start, s0));
        CHECK(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, s0));
        CHECK(cudaEventRecord(to_host_done, s0));
        CHECK(cudaSetDevice(1));
        CHECK(cudaStreamWaitEvent(s1, to_host_done, 0));
        CHECK(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyHostToDevice, s1));
        CHECK(cudaEventRecord(from_host_done, s1));
        CHECK(cudaSetDevice(0));
        CHECK(cudaStreamWaitEvent(s0, from_host_done, 0));
        CHECK(cudaEventRecord(end, s0));
        CHECK(cudaEventSynchronize(end));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, end));
        if (r > 0) through_host.push_back(bytes / (ms * 1e-3) / 1e9);  // the first is a warm-up
    }

    cudaEvent_t link;
    CHECK(cudaEventCreateWithFlags(&link, cudaEventDisableTiming));
    std::vector<double> per_pair;
    for (int r = 0; r <= reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i) {
            CHECK(cudaEventRecord(link, s0));
            CHECK(cudaStreamWaitEvent(s1, link, 0));
        }
        const auto t1 = std::chrono::steady_clock::now();
        CHECK(cudaStreamSynchronize(s1));
        if (r > 0) per_pair.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
    }
    std::printf("{\"peer_access\": %s, \"peer_copy_256mb_gbps\": %.3f, \"through_host_256mb_gbps\": %.3f, "
                "\"cross_device_record_wait_us\": %.4f}\n",
                can01 && can10 ? "true" : "false", median(gbps), median(through_host), median(per_pair));
    return 0;
}
