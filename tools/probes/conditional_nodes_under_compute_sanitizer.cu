// Found: compute-sanitizer's synccheck, memcheck and racecheck fail on conditional-node replays in raw CUDA too,
// while without a tool every variant runs right (H100, driver 580.159.04).
// Cited by: tests/conftest.py (the conditional_nodes marker) and tools/gpu-
// check.
// conditional_nodes_under_compute_sanitizer.cu -- are compute-sanitizer's reports on cuweave's conditional-node
// tests cuweave's fault or the tool's? Raw CUDA, no cuweave: the same kernels and graphs made the same way.
//
// What it found (H100 80GB HBM3, driver 580.159.04, CUDA 13.0, compute-sanitizer 2025.3.1; 2026-11-26). Without a
// tool every variant below runs right (the sums and the rounds as expected). Under the tools:
//   synccheck  "Barrier error detected. Divergent thread(s) in warp" at partial_sums_kernel+0x260 (the first
//              __syncthreads) and cudaErrorLaunchFailure, in every conditional variant: C, C1, D, E, F (a kernel
//              with one barrier and no branch), G (no warp divided), H; eager (A) and a plain graph (B) are clean.
//              O shows that in bodies the kernel runs with its block (256x1x1), grid and 32 active lanes at the
//              barrier, as eagerly: the kernel is right, the tool reports every barrier in a conditional body.
//   memcheck   intermittently cudaErrorIllegalAddress with no memcheck report (a fault it does not attribute):
//              C with --rounds=40 in 4 of 6 runs (cudaMalloc) and 2 of 6 (--pool), D --pool --rounds=40 in 1 of 6,
//              H in 2 of 9; E, B clean in 6 of 6. This is the "illegal address with 0 memcheck errors" of the
//              parallel sanitizer run (its shard held tests/python/test_graph_conditionals.py).
//   racecheck  the host process dies (SIGSEGV, "process didn't terminate successfully") in H, 9 of 9 runs
//              (cudaMalloc or --pool, one replay or two): a WHILE loop whose condition is set from the sum its
//              body computes. C, D, E (loops counted by a separate counter) are clean. This is the racecheck
//              process that died in the parallel run.
//   W (2026-11-27, H100, the same driver and tools): the graph of tests/python/test_weave_graphs.py's woven WHILE
//              test (three streams forked and joined by events, the loop on an int64 counter, graph-owned sum
//              scratch or a buffer of its own, cudaMalloc or a pool) ran right without a tool and was clean under
//              memcheck in 384 of 384 runs: the raw-CUDA copy does not reproduce what cuweave's test meets. That test,
//              run as a script (woven_loop_under_memcheck.py, 96 runs each under memcheck, 16 at a time): 14-15 of 96 failed with
//              cudaErrorIllegalAddress or cudaErrorMisalignedAddress and no report; without the sanitizer 18 of 96;
//              with `left` set by a fill instead of a sum 33 of 96; without the weave (one stream) 0 of 96; without
//              the loop (its three rounds unrolled) 0 of 96. Without a tool, 640 of 640 runs gave the right result.
//              Where memcheck did report (5 runs), its reports contradict themselves: the body's add kernel's reads
//              and writes are called "out of bounds" or "not writable" while "inside the nearest allocation" of
//              8,192 bytes (2,048 floats, the arrays' size), at offsets inside it. So the fault needs a woven capture
//              and a conditional node, appears only under the tool, and the tool's own record puts the accesses
//              inside live allocations; a raw-CUDA reproduction is still missing.
// So tools/gpu-check deselects the tests that replay conditional nodes (marker conditional_nodes) under all three
// tools, and test_readme skips its conditional snippet there.
//
// +0x260 in an sm_90 build (nvcc 13.0 -O3, cuobjdump -sass) is the first BAR.SYNC, the __syncthreads right after
// the grid-stride loop; the loop's reconvergence point (BSYNC) is at +0x1e0. With the tests' N = 1000 elements the
// sum runs 4 blocks of 256 threads, and one warp (block 3, threads 224-255) leaves the loop divided: 8 of its
// threads take one step, 24 take none. The copy below compiles to the same sm_90 SASS as the library's.
//
// Plain runtime API, the kernels copied from csrc/cuda/builtin_kernels.cu (partial_sums_kernel<double, double>,
// final_sum_kernel<double, double>, their plus() and grid_for()), the conditional node made the way cuweave's CUDA
// backend makes it (csrc/cuda/cuda_graph_backend.cpp add_conditional_node, cuda_capture_backend.cpp
// begin_capture_into / end_capture_into,
// csrc/core/conditional.cpp, python/cuweave/_conditionals.py): a handle made in the capture's graph with default
// 0 (cudaGraphCondAssignDefault), set by a one-thread kernel before the node and again at the end of each round,
// the node added with cudaGraphAddNode after the capture's frontier, the capture moved past it
// (cudaStreamUpdateCaptureDependencies), its body captured from a second stream with cudaStreamBeginCaptureToGraph.
//
// Variants, one line each (its name, what it is, ok/FAIL, the sum against the expected one, rounds run):
//   A   the two sum kernels launched eagerly
//   B   the same two kernels in a captured graph, replayed
//   C   a WHILE node whose body (captured) holds the two kernels, the loop stopped after --rounds rounds (5) by a
//       kernel that counts down; the graph also sums once before the node, as the test's graph does
//   C1  C, stopped after one round
//   D   C with the body built node by node (cudaGraphAddKernelNode into the body graph), not captured
//   E   an IF node (true) with the same body, captured
//   F   a simpler kernel in a WHILE body: one __syncthreads, no loop, no branch before it (one element a thread)
//   G   C with 1024 elements: every thread takes exactly one step of the grid-stride loop, so no warp is
//       divided when it reaches the first __syncthreads
//   H   a WHILE loop on the value its body computes: x halved and summed each round while the sum is > 1 (the
//       the guide's and the tests' "halve until small"; the condition reads the double final_sum_kernel wrote)
//   W   test_weave_graphs' woven WHILE test in raw CUDA (see above; --preallocated-scratch: no graph memory)
//   O   observes the launch: an instrumented copy of partial_sums (same code, plus records) run eagerly, in a
//       graph, in a WHILE body and in an IF body; prints the block and grid it ran with, the dynamic shared
//       memory, how many blocks ran, and the fewest threads of a warp active (__activemask) at the first barrier
// `probe` alone runs all of them in that order; `probe C` (or several names) runs those only. Options:
//   --preload     load every kernel (cudaFuncGetAttributes) first; without it, kernels load lazily, as in the suite
//   --pool        buffers from a stream-ordered pool (cudaMallocFromPoolAsync), as cuweave's arrays; else cudaMalloc
//   --count=N     elements summed (default 1000, as in tests/python/test_graph_conditionals.py)
//   --rounds=N    rounds of the WHILE variants C, D, F, G (default 5)
//   --replays=N   replays of each graph (default 2)
// A failed CUDA call prints the call and the error and exits 1; a failed kernel ends the run at the variant it hit,
// since the context is lost.
//
// Build (no need to commit the binary):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/cond_probe tools/probes/conditional_nodes_under_compute_sanitizer.cu
// On the GPU machine:
//   /tmp/cond_probe                                                       # all variants, no tool: all ok
//   for v in A B C C1 D E F G H; do compute-sanitizer --tool synccheck --error-exitcode 86 /tmp/cond_probe $v; done
//   for i in 1 2 3 4 5 6; do compute-sanitizer --tool memcheck --error-exitcode 86 /tmp/cond_probe --rounds=40 C; done
//   compute-sanitizer --tool racecheck --error-exitcode 86 /tmp/cond_probe H; echo "exit $?"    # 11: SIGSEGV
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "probe_check.hpp"

namespace {

// ---- copied from csrc/cuda/builtin_kernels.cu (keep the same code: the report's offset is into it) ----

template <typename T>
__device__ __forceinline__ T plus(T a, T b) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <>
__device__ __forceinline__ double plus(double a, double b) { return __dadd_rn(a, b); }

unsigned grid_for(std::size_t count, unsigned threads, unsigned most) {
    const std::size_t wanted = (count + threads - 1) / threads;
    return static_cast<unsigned>(wanted < most ? (wanted == 0 ? 1 : wanted) : most);
}

constexpr unsigned kSumThreads = 256;
constexpr unsigned kMostSumBlocks = 1024;

template <typename T, typename Acc>
__global__ void partial_sums_kernel(const T* x, std::size_t count, Acc* partial) {
    __shared__ Acc shared[kSumThreads];
    Acc acc = 0;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        acc = plus(acc, static_cast<Acc>(x[i]));
    }
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned width = kSumThreads / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) shared[threadIdx.x] = plus(shared[threadIdx.x], shared[threadIdx.x + width]);
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

template <typename Acc, typename Out>
__global__ void final_sum_kernel(const Acc* partial, unsigned count, Out* out) {
    __shared__ Acc shared[kSumThreads];
    Acc acc = 0;
    for (unsigned i = threadIdx.x; i < count; i += kSumThreads) acc = plus(acc, partial[i]);
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned width = kSumThreads / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) shared[threadIdx.x] = plus(shared[threadIdx.x], shared[threadIdx.x + width]);
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = static_cast<Out>(shared[0]);
}

// ---- the probe's own kernels ----

// The simpler kernel (F): one element a thread (x is padded with zeros to whole blocks), one barrier, no loop
// and no branch before it; thread 0 then adds the block's elements in order.
__global__ void one_barrier_block_sums(const double* x, double* partial) {
    __shared__ double shared[kSumThreads];
    shared[threadIdx.x] = x[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        double acc = 0;
        for (unsigned i = 0; i < kSumThreads; ++i) acc = plus(acc, shared[i]);
        partial[blockIdx.x] = acc;
    }
}

__global__ void serial_sum(const double* partial, unsigned count, double* out) {
    double acc = 0;
    for (unsigned i = 0; i < count; ++i) acc = plus(acc, partial[i]);
    *out = acc;
}

// What a launch of the instrumented copy saw (O).
struct Seen {
    unsigned block[3], grid[3];
    unsigned dynamic_smem;
    unsigned blocks_run;
    unsigned min_lanes;      // fewest threads of a warp active at the first barrier
    unsigned divided_warps;  // warps with fewer active there than the warp holds
};

// partial_sums_kernel<double, double> with records around its first barrier.
__global__ void partial_sums_observed(const double* x, std::size_t count, double* partial, Seen* seen) {
    __shared__ double shared[kSumThreads];
    double acc = 0;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        acc = plus(acc, x[i]);
    }
    shared[threadIdx.x] = acc;
    const unsigned active = __activemask();
    const unsigned lanes = __popc(active);
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned warp_first = (threadIdx.x / 32) * 32;
    const unsigned warp_size = threads - warp_first < 32 ? threads - warp_first : 32;
    if (threadIdx.x % 32 == static_cast<unsigned>(__ffs(active) - 1)) {
        atomicMin(&seen->min_lanes, lanes);
        if (lanes < warp_size) atomicAdd(&seen->divided_warps, 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(&seen->blocks_run, 1u);
        if (blockIdx.x == 0) {
            unsigned dynamic = 0;
            asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic));
            seen->block[0] = blockDim.x, seen->block[1] = blockDim.y, seen->block[2] = blockDim.z;
            seen->grid[0] = gridDim.x, seen->grid[1] = gridDim.y, seen->grid[2] = gridDim.z;
            seen->dynamic_smem = dynamic;
        }
    }
    for (unsigned width = kSumThreads / 2; width > 0; width /= 2) {
        if (threadIdx.x < width) shared[threadIdx.x] = plus(shared[threadIdx.x], shared[threadIdx.x + width]);
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

// The loop's counter: set at the start of every replay, counted down (and the rounds counted) by each round.
__global__ void start_rounds(int* rounds_left, int rounds, int* rounds_done) {
    *rounds_left = rounds;
    *rounds_done = 0;
}

__global__ void count_round(int* rounds_left, int* rounds_done) {
    --*rounds_left;
    ++*rounds_done;
}

// As cuweave's set_condition_kernel: one thread (racing cudaGraphSetConditional calls are undefined).
__global__ void set_condition_kernel(cudaGraphConditionalHandle condition, const int* rounds_left) {
    cudaGraphSetConditional(condition, *rounds_left > 0 ? 1u : 0u);
}

// H: a loop on a value the body computes, as cuweave's "halve until the sum is small" tests do.
__global__ void halve(double* x, std::size_t count) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        x[i] = x[i] * 0.5;
    }
}

__global__ void set_condition_greater(cudaGraphConditionalHandle condition, const double* value, double threshold) {
    cudaGraphSetConditional(condition, *value > threshold ? 1u : 0u);
}

// W: the element-wise kernels of a woven capture (float32, grid-stride), and an int64 counter's condition.
__global__ void scale_into(float* out, const float* x, float factor, std::size_t count) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = x[i] * factor;
    }
}

__global__ void add_scalar_into(float* out, const float* x, float value, std::size_t count) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = x[i] + value;
    }
}

__global__ void add_into(float* out, const float* a, const float* b, std::size_t count) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = a[i] + b[i];
    }
}

__global__ void add_to_counter(long long* counter, long long value) { *counter += value; }

__global__ void set_condition_counter_positive(cudaGraphConditionalHandle condition, const long long* counter) {
    cudaGraphSetConditional(condition, *counter > 0 ? 1u : 0u);
}

// ---- the probe ----

struct Buffers {
    std::size_t count = 0;
    unsigned blocks = 0;  // of partial_sums_kernel (grid_for, as launch_sum_as)
    double* x = nullptr;  // count elements, then zeros up to whole blocks of 256
    double* partial = nullptr;
    double* out_before = nullptr;  // the sum before the conditional node
    double* out = nullptr;         // the sum in the body (or the only one)
    int* rounds_left = nullptr;
    int* rounds_done = nullptr;
    Seen* seen = nullptr;
    double want = 0;
};

double element(std::size_t i) { return static_cast<double>(i % 17); }  // exact sums in any order

// --pool: the buffers come from a stream-ordered pool of the probe's own (cudaMemPoolCreate, release threshold
// UINT64_MAX, cudaMallocFromPoolAsync), as cuweave's arrays do; else from cudaMalloc.
cudaMemPool_t pool = nullptr;

template <typename T>
void allocate(T** pointer, std::size_t bytes) {
    if (pool == nullptr) {
        CHECK(cudaMalloc(pointer, bytes));
        return;
    }
    CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(pointer), bytes, pool, nullptr));
    CHECK(cudaStreamSynchronize(nullptr));
}

Buffers make_buffers(std::size_t count) {
    Buffers b;
    b.count = count;
    b.blocks = grid_for(count, kSumThreads, kMostSumBlocks);
    const std::size_t padded = ((count + kSumThreads - 1) / kSumThreads) * kSumThreads + kSumThreads;
    std::vector<double> host(padded, 0.0);
    for (std::size_t i = 0; i < count; ++i) {
        host[i] = element(i);
        b.want += element(i);
    }
    allocate(&b.x, padded * sizeof(double));
    CHECK(cudaMemcpy(b.x, host.data(), padded * sizeof(double), cudaMemcpyHostToDevice));
    allocate(&b.partial, std::max<std::size_t>(b.blocks, padded / kSumThreads) * sizeof(double));
    allocate(&b.out_before, sizeof(double));
    allocate(&b.out, sizeof(double));
    allocate(&b.rounds_left, sizeof(int));
    allocate(&b.rounds_done, sizeof(int));
    allocate(&b.seen, sizeof(Seen));
    return b;
}

void free_buffers(Buffers& b) {
    for (void* p : {static_cast<void*>(b.x), static_cast<void*>(b.partial), static_cast<void*>(b.out_before),
                    static_cast<void*>(b.out), static_cast<void*>(b.rounds_left), static_cast<void*>(b.rounds_done),
                    static_cast<void*>(b.seen)}) {
        if (pool == nullptr) {
            CHECK(cudaFree(p));
        } else {
            CHECK(cudaFreeAsync(p, nullptr));
        }
    }
    b = Buffers{};
}

// The two kernels of ops.sum, as launch_sum_as queues them.
void queue_sum(const Buffers& b, double* out, cudaStream_t s) {
    partial_sums_kernel<double, double><<<b.blocks, kSumThreads, 0, s>>>(b.x, b.count, b.partial);
    CHECK(cudaGetLastError());
    final_sum_kernel<double, double><<<1, kSumThreads, 0, s>>>(b.partial, b.blocks, out);
    CHECK(cudaGetLastError());
}

void queue_one_barrier_sum(const Buffers& b, double* out, cudaStream_t s) {
    const unsigned blocks = static_cast<unsigned>((b.count + kSumThreads - 1) / kSumThreads);
    one_barrier_block_sums<<<blocks, kSumThreads, 0, s>>>(b.x, b.partial);
    CHECK(cudaGetLastError());
    serial_sum<<<1, 1, 0, s>>>(b.partial, blocks, out);
    CHECK(cudaGetLastError());
}

void queue_observed_sum(const Buffers& b, double* out, cudaStream_t s) {
    partial_sums_observed<<<b.blocks, kSumThreads, 0, s>>>(b.x, b.count, b.partial, b.seen);
    CHECK(cudaGetLastError());
    final_sum_kernel<double, double><<<1, kSumThreads, 0, s>>>(b.partial, b.blocks, out);
    CHECK(cudaGetLastError());
}

// Results are poisoned (all bits set: a NaN) before each run, so a kernel that did not run cannot pass.
void poison(const Buffers& b, cudaStream_t s) {
    CHECK(cudaMemsetAsync(b.out_before, 0xff, sizeof(double), s));
    CHECK(cudaMemsetAsync(b.out, 0xff, sizeof(double), s));
    CHECK(cudaMemsetAsync(b.rounds_done, 0xff, sizeof(int), s));
    Seen fresh{};
    fresh.min_lanes = ~0u;
    CHECK(cudaMemcpyAsync(b.seen, &fresh, sizeof(Seen), cudaMemcpyHostToDevice, s));
}

const char* current_variant = "";
int rounds_option = 5;   // --rounds=N: the rounds of the WHILE variants C, D, F, G
int replays_option = 2;  // --replays=N: the replays of each graph
bool preallocated_scratch = false;  // --preallocated-scratch: W sums into a buffer of its own, not graph memory

// Waits for the variant's work; a failed kernel ends the probe (the context is lost) with the variant named.
void finish(cudaStream_t s) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
        std::printf("%-3s FAIL: %s (%s) at cudaStreamSynchronize; the context is lost, later variants cannot run\n",
                    current_variant, cudaGetErrorName(e), cudaGetErrorString(e));
        std::fflush(stdout);
        std::exit(1);
    }
}

struct Result {
    double before = NAN, sum = NAN;
    int rounds = -1;
    Seen seen{};
};

Result read_result(const Buffers& b, cudaStream_t s) {
    finish(s);
    Result r;
    CHECK(cudaMemcpy(&r.before, b.out_before, sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&r.sum, b.out, sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&r.rounds, b.rounds_done, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&r.seen, b.seen, sizeof(Seen), cudaMemcpyDeviceToHost));
    return r;
}

int failures = 0;

// One line: name, what, ok/FAIL, the sums against the expected one and the rounds (want_rounds < 0: none).
void report(const char* name, const char* what, const Buffers& b, const Result& r, bool check_before,
            int want_rounds) {
    bool ok = r.sum == b.want;
    if (check_before) ok = ok && r.before == b.want;
    if (want_rounds >= 0) ok = ok && r.rounds == want_rounds;
    char line[512];
    int at = std::snprintf(line, sizeof line, "%-3s %-62s %s  sum=%.1f", name, what, ok ? "ok  " : "FAIL", r.sum);
    if (check_before) at += std::snprintf(line + at, sizeof line - at, " before-node=%.1f", r.before);
    at += std::snprintf(line + at, sizeof line - at, " (want %.1f, %zu elements)", b.want, b.count);
    if (want_rounds >= 0) std::snprintf(line + at, sizeof line - at, " rounds=%d (want %d)", r.rounds, want_rounds);
    std::printf("%s\n", line);
    std::fflush(stdout);
    if (!ok) ++failures;
}

enum class Body { Sum, OneBarrierSum, ObservedSum };
enum class Fill { Captured, Nodes };

void queue_body_work(Body body, const Buffers& b, cudaStream_t s) {
    switch (body) {
        case Body::Sum: queue_sum(b, b.out, s); break;
        case Body::OneBarrierSum: queue_one_barrier_sum(b, b.out, s); break;
        case Body::ObservedSum: queue_observed_sum(b, b.out, s); break;
    }
}

// The body's nodes added one by one (D): the two sum kernels, the round's count, the condition.
void add_body_nodes(cudaGraph_t body, const Buffers& b, cudaGraphConditionalHandle handle, bool loop) {
    const double* x = b.x;
    std::size_t count = b.count;
    double* partial = b.partial;
    unsigned blocks = b.blocks;
    double* out = b.out;
    int* rounds_left = b.rounds_left;
    int* rounds_done = b.rounds_done;
    cudaGraphConditionalHandle condition = handle;
    void* partial_args[] = {&x, &count, &partial};
    void* final_args[] = {&partial, &blocks, &out};
    void* count_args[] = {&rounds_left, &rounds_done};
    void* condition_args[] = {&condition, &rounds_left};
    struct Step {
        void* func;
        unsigned grid, block;
        void** args;
    };
    std::vector<Step> steps = {
        {reinterpret_cast<void*>(&partial_sums_kernel<double, double>), blocks, kSumThreads, partial_args},
        {reinterpret_cast<void*>(&final_sum_kernel<double, double>), 1, kSumThreads, final_args},
        {reinterpret_cast<void*>(&count_round), 1, 1, count_args},
    };
    if (loop) steps.push_back({reinterpret_cast<void*>(&set_condition_kernel), 1, 1, condition_args});
    cudaGraphNode_t previous = nullptr;
    for (const Step& step : steps) {
        cudaKernelNodeParams params{};
        params.func = step.func;
        params.gridDim = dim3(step.grid);
        params.blockDim = dim3(step.block);
        params.kernelParams = step.args;
        cudaGraphNode_t node = nullptr;
        CHECK(cudaGraphAddKernelNode(&node, body, previous ? &previous : nullptr, previous ? 1 : 0, &params));
        previous = node;
    }
}

// create_graph_condition: a handle in the graph `s` captures into, default 0, assigned at every launch.
cudaGraphConditionalHandle capture_condition(cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t capture_graph = nullptr;
    CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, &capture_graph, nullptr, nullptr, nullptr));
    probe_check(status == cudaStreamCaptureStatusActive, "cudaStreamGetCaptureInfo", "capture not active", __FILE__,
                __LINE__);
    cudaGraphConditionalHandle handle = 0;
    CHECK(cudaGraphConditionalHandleCreate(&handle, capture_graph, 0, cudaGraphCondAssignDefault));
    return handle;
}

// capture_conditional: the node after the capture's frontier, the capture moved past it; returns its body.
cudaGraph_t capture_conditional_node(cudaStream_t s, cudaGraphConditionalHandle handle,
                                     cudaGraphConditionalNodeType kind) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t capture_graph = nullptr;
    const cudaGraphNode_t* frontier = nullptr;
    std::size_t frontier_count = 0;
    CHECK(cudaStreamGetCaptureInfo(s, &status, nullptr, &capture_graph, &frontier, nullptr, &frontier_count));
    std::vector<cudaGraphNode_t> dependencies(frontier, frontier + frontier_count);
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = kind;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    CHECK(cudaGraphAddNode(&node, capture_graph, dependencies.data(), nullptr, dependencies.size(), &params));
    CHECK(cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies));
    return params.conditional.phGraph_out[0];
}

// A graph captured on `s`: start the rounds, sum once (before the node, as the test's graph does), set the
// condition, then the conditional node (WHILE or IF) whose body holds `body`'s work, the round's count and, for
// a loop, the condition set again. Returns the graph.
cudaGraph_t capture_conditional(const Buffers& b, cudaStream_t s, cudaStream_t body_stream, cudaGraphConditionalNodeType kind,
                                Body body, Fill fill, int rounds) {
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    start_rounds<<<1, 1, 0, s>>>(b.rounds_left, rounds, b.rounds_done);
    CHECK(cudaGetLastError());
    queue_sum(b, b.out_before, s);

    const cudaGraphConditionalHandle handle = capture_condition(s);
    set_condition_kernel<<<1, 1, 0, s>>>(handle, b.rounds_left);  // before the node (_condition_for's evaluate)
    CHECK(cudaGetLastError());
    cudaGraph_t body_graph = capture_conditional_node(s, handle, kind);

    const bool loop = kind == cudaGraphCondTypeWhile;
    if (fill == Fill::Captured) {
        // begin_capture_into / end_capture_into, from a stream of the body's own
        CHECK(cudaStreamBeginCaptureToGraph(body_stream, body_graph, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
        queue_body_work(body, b, body_stream);
        count_round<<<1, 1, 0, body_stream>>>(b.rounds_left, b.rounds_done);
        CHECK(cudaGetLastError());
        if (loop) {
            set_condition_kernel<<<1, 1, 0, body_stream>>>(handle, b.rounds_left);  // the round's end
            CHECK(cudaGetLastError());
        }
        cudaGraph_t filled = nullptr;
        CHECK(cudaStreamEndCapture(body_stream, &filled));
    } else {
        add_body_nodes(body_graph, b, handle, loop);
    }

    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(s, &graph));
    return graph;
}

// Instantiates, replays `replays` times (poisoning the results before each) and returns the last results.
Result replay(cudaGraph_t graph, const Buffers& b, cudaStream_t s, int replays) {
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    Result r;
    for (int i = 0; i < replays; ++i) {
        poison(b, s);
        CHECK(cudaGraphLaunch(exec, s));
        r = read_result(b, s);
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    return r;
}

struct Streams {
    cudaStream_t main = nullptr, body = nullptr;
};

void variant_eager(const Buffers& b, Streams st) {
    poison(b, st.main);
    queue_sum(b, b.out, st.main);
    report("A", "eager: partial_sums + final_sum", b, read_result(b, st.main), false, -1);
}

void variant_graph(const Buffers& b, Streams st) {
    CHECK(cudaStreamBeginCapture(st.main, cudaStreamCaptureModeGlobal));
    queue_sum(b, b.out, st.main);
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(st.main, &graph));
    report("B", "captured graph, replayed", b, replay(graph, b, st.main, replays_option), false, -1);
}

void variant_conditional(const char* name, const char* what, const Buffers& b, Streams st,
                         cudaGraphConditionalNodeType kind, Body body, Fill fill, int rounds) {
    cudaGraph_t graph = capture_conditional(b, st.main, st.body, kind, body, fill, rounds);
    const int want_rounds = kind == cudaGraphCondTypeWhile ? rounds : 1;
    report(name, what, b, replay(graph, b, st.main, replays_option), true, want_rounds);
}

// H: x (a copy of the elements, restored at each replay) is halved and summed each round while the sum is above
// 1.0; the condition reads the double the body's final_sum_kernel wrote. Rounds: halvings from 7979 to <= 1 (13).
void variant_loop_on_computed_value(const Buffers& b, Streams st) {
    double* x = nullptr;
    allocate(&x, b.count * sizeof(double));
    const unsigned blocks = grid_for(b.count, 256, 8192);
    CHECK(cudaStreamBeginCapture(st.main, cudaStreamCaptureModeGlobal));
    CHECK(cudaMemcpyAsync(x, b.x, b.count * sizeof(double), cudaMemcpyDeviceToDevice, st.main));
    Buffers on_x = b;
    on_x.x = x;
    queue_sum(on_x, b.out, st.main);
    const cudaGraphConditionalHandle handle = capture_condition(st.main);
    set_condition_greater<<<1, 1, 0, st.main>>>(handle, b.out, 1.0);
    CHECK(cudaGetLastError());
    cudaGraph_t body_graph = capture_conditional_node(st.main, handle, cudaGraphCondTypeWhile);
    CHECK(cudaStreamBeginCaptureToGraph(st.body, body_graph, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
    halve<<<blocks, 256, 0, st.body>>>(x, b.count);
    CHECK(cudaGetLastError());
    queue_sum(on_x, b.out, st.body);
    set_condition_greater<<<1, 1, 0, st.body>>>(handle, b.out, 1.0);
    CHECK(cudaGetLastError());
    cudaGraph_t filled = nullptr;
    CHECK(cudaStreamEndCapture(st.body, &filled));
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(st.main, &graph));
    Result r = replay(graph, b, st.main, replays_option);
    double want = b.want;
    while (want > 1.0) want *= 0.5;  // halving a sum of exact binary fractions is exact
    const bool ok = r.sum == want;
    std::printf("H   while node on the body's own sum (halve until <= 1), %d replays      %s  sum=%.6f (want %.6f)\n",
                replays_option, ok ? "ok  " : "FAIL", r.sum, want);
    std::fflush(stdout);
    if (!ok) ++failures;
    if (pool == nullptr) {
        CHECK(cudaFree(x));
    } else {
        CHECK(cudaFreeAsync(x, nullptr));
    }
}

// W: tests/python/test_weave_graphs.py's conditional node inside a woven capture, in raw CUDA. On `main`, forked
// to two more streams by events (as the weave places it): p = 2x (main), q = x + 1 (second), left = sum of [3]
// (int64, the two sum kernels with graph-owned scratch, third); joined; a WHILE node on left > 0 whose captured body
// adds p to q and counts left down (three rounds); then r = q + 1 and p = 0 * p. Checks r = x + 1 + 3 * 2x + 1 and
// p = 0.
void variant_woven_loop(Streams st, std::size_t count) {
    cudaStream_t second = nullptr, third = nullptr;
    int least = 0, greatest = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK(cudaStreamCreateWithPriority(&second, cudaStreamNonBlocking, least));
    CHECK(cudaStreamCreateWithPriority(&third, cudaStreamNonBlocking, least));
    cudaEvent_t forked = nullptr, second_done = nullptr, third_done = nullptr;
    for (cudaEvent_t* event : {&forked, &second_done, &third_done}) CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    float *x = nullptr, *p = nullptr, *q = nullptr, *r = nullptr;
    long long *three = nullptr, *partial = nullptr, *left = nullptr;
    for (float** a : {&x, &p, &q, &r}) allocate(a, count * sizeof(float));
    allocate(&three, sizeof(long long));
    allocate(&partial, sizeof(long long));
    allocate(&left, sizeof(long long));
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i);
    CHECK(cudaMemcpy(x, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    const long long three_value = 3;
    CHECK(cudaMemcpy(three, &three_value, sizeof three_value, cudaMemcpyHostToDevice));
    const unsigned blocks = grid_for(count, 256, 8192);

    CHECK(cudaStreamBeginCapture(st.main, cudaStreamCaptureModeGlobal));
    CHECK(cudaEventRecord(forked, st.main));
    CHECK(cudaStreamWaitEvent(second, forked, 0));
    CHECK(cudaStreamWaitEvent(third, forked, 0));
    scale_into<<<blocks, 256, 0, st.main>>>(p, x, 2.0f, count);
    add_scalar_into<<<blocks, 256, 0, second>>>(q, x, 1.0f, count);
    // ops.sum's scratch, as cuweave's CUDA backend makes it under capture: the graph's own (a memory allocation
    // node and a free node, from the device's default pool), unless --preallocated-scratch.
    long long* scratch = partial;
    if (!preallocated_scratch) CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), sizeof(long long), third));
    partial_sums_kernel<long long, long long><<<1, kSumThreads, 0, third>>>(three, 1, scratch);
    final_sum_kernel<long long, long long><<<1, kSumThreads, 0, third>>>(scratch, 1, left);
    CHECK(cudaGetLastError());
    if (!preallocated_scratch) CHECK(cudaFreeAsync(scratch, third));
    CHECK(cudaEventRecord(second_done, second));
    CHECK(cudaEventRecord(third_done, third));
    CHECK(cudaStreamWaitEvent(st.main, second_done, 0));
    CHECK(cudaStreamWaitEvent(st.main, third_done, 0));
    const cudaGraphConditionalHandle handle = capture_condition(st.main);
    set_condition_counter_positive<<<1, 1, 0, st.main>>>(handle, left);
    CHECK(cudaGetLastError());
    cudaGraph_t body_graph = capture_conditional_node(st.main, handle, cudaGraphCondTypeWhile);
    CHECK(cudaStreamBeginCaptureToGraph(st.body, body_graph, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
    add_into<<<blocks, 256, 0, st.body>>>(q, q, p, count);
    add_to_counter<<<1, 1, 0, st.body>>>(left, -1);
    set_condition_counter_positive<<<1, 1, 0, st.body>>>(handle, left);
    CHECK(cudaGetLastError());
    cudaGraph_t filled = nullptr;
    CHECK(cudaStreamEndCapture(st.body, &filled));
    add_scalar_into<<<blocks, 256, 0, st.main>>>(r, q, 1.0f, count);
    scale_into<<<blocks, 256, 0, st.main>>>(p, p, 0.0f, count);
    CHECK(cudaGetLastError());
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(st.main, &graph));

    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    bool ok = true;
    for (int replay_index = 0; replay_index < replays_option; ++replay_index) {
        CHECK(cudaMemsetAsync(r, 0xff, count * sizeof(float), st.main));
        CHECK(cudaGraphLaunch(exec, st.main));
        finish(st.main);
        std::vector<float> got_r(count), got_p(count);
        CHECK(cudaMemcpy(got_r.data(), r, count * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(got_p.data(), p, count * sizeof(float), cudaMemcpyDeviceToHost));
        for (std::size_t i = 0; i < count; ++i) {
            // every replay recomputes p = 2x and q = x + 1 first: q = x + 1 + 3 * 2x after the loop
            const float want = host[i] + 1 + 3 * 2 * host[i] + 1;
            ok = ok && got_r[i] == want && got_p[i] == 0.0f;
        }
    }
    std::printf("W   woven capture (3 streams, events) with a while node on an int64 counter, %d replays %s\n",
                replays_option, ok ? "ok  " : "FAIL");
    std::fflush(stdout);
    if (!ok) ++failures;
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    for (void* a : {static_cast<void*>(x), static_cast<void*>(p), static_cast<void*>(q), static_cast<void*>(r),
                    static_cast<void*>(three), static_cast<void*>(partial), static_cast<void*>(left)}) {
        if (pool == nullptr) {
            CHECK(cudaFree(a));
        } else {
            CHECK(cudaFreeAsync(a, nullptr));
        }
    }
    for (cudaEvent_t event : {forked, second_done, third_done}) CHECK(cudaEventDestroy(event));
    CHECK(cudaStreamDestroy(second));
    CHECK(cudaStreamDestroy(third));
}

void print_seen(const char* where, const Buffers& b, const Result& r) {
    const Seen& s = r.seen;
    const bool as_expected = s.block[0] == kSumThreads && s.block[1] == 1 && s.block[2] == 1 && s.grid[0] == b.blocks &&
                             s.grid[1] == 1 && s.grid[2] == 1 && s.dynamic_smem == 0 && s.blocks_run == b.blocks;
    std::printf("O   %-14s block %ux%ux%u grid %ux%ux%u dynamic smem %u, %u blocks ran (want %ux1x1, %u blocks: %s); "
                "fewest lanes active at the first barrier %u, %u warps divided there; sum=%.1f (want %.1f)\n",
                where, s.block[0], s.block[1], s.block[2], s.grid[0], s.grid[1], s.grid[2], s.dynamic_smem,
                s.blocks_run, kSumThreads, b.blocks, as_expected ? "as launched" : "NOT AS LAUNCHED", s.min_lanes,
                s.divided_warps, r.sum, b.want);
    std::fflush(stdout);
    if (!as_expected || r.sum != b.want) ++failures;
}

void variant_observe(const Buffers& b, Streams st) {
    poison(b, st.main);
    queue_observed_sum(b, b.out, st.main);
    print_seen("eager", b, read_result(b, st.main));

    CHECK(cudaStreamBeginCapture(st.main, cudaStreamCaptureModeGlobal));
    queue_observed_sum(b, b.out, st.main);
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(st.main, &graph));
    print_seen("graph", b, replay(graph, b, st.main, 1));

    // One round, so the records are of one launch of the observed kernel.
    print_seen("while body", b,
               replay(capture_conditional(b, st.main, st.body, cudaGraphCondTypeWhile, Body::ObservedSum,
                                          Fill::Captured, 1),
                      b, st.main, 1));
    print_seen("if body", b,
               replay(capture_conditional(b, st.main, st.body, cudaGraphCondTypeIf, Body::ObservedSum,
                                          Fill::Captured, 1),
                      b, st.main, 1));
}

template <typename Kernel>
void preload(Kernel kernel) {
    cudaFuncAttributes attributes{};
    CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)));
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> chosen;
    std::size_t count = 1000;
    bool preload_kernels = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--preload") {
            preload_kernels = true;
        } else if (arg.rfind("--count=", 0) == 0) {
            count = std::strtoull(arg.c_str() + 8, nullptr, 10);
        } else if (arg.rfind("--rounds=", 0) == 0) {
            rounds_option = std::atoi(arg.c_str() + 9);
        } else if (arg.rfind("--replays=", 0) == 0) {
            replays_option = std::atoi(arg.c_str() + 10);
        } else if (arg == "--preallocated-scratch") {
            preallocated_scratch = true;
        } else if (arg == "--pool") {
            cudaMemPoolProps props{};
            props.allocType = cudaMemAllocationTypePinned;
            props.location.type = cudaMemLocationTypeDevice;
            props.location.id = 0;
            CHECK(cudaMemPoolCreate(&pool, &props));
            std::uint64_t keep_everything = UINT64_MAX;
            CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
        } else if (arg == "A" || arg == "B" || arg == "C" || arg == "C1" || arg == "D" || arg == "E" || arg == "F" ||
                   arg == "G" || arg == "H" || arg == "O" || arg == "W") {
            chosen.push_back(arg);
        } else {
            std::fprintf(stderr, "usage: %s [--preload] [--pool] [--preallocated-scratch] [--count=N] [--rounds=N] [--replays=N] "
                                 "[A|B|C|C1|D|E|F|G|H|O|W ...]\n", argv[0]);
            return 2;
        }
    }
    if (chosen.empty()) chosen = {"A", "B", "C", "C1", "D", "E", "F", "G", "H", "O"};
    if (count == 0) count = 1;

    int device = 0, runtime = 0, driver = 0;
    CHECK(cudaSetDevice(device));
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, device));
    CHECK(cudaRuntimeGetVersion(&runtime));
    CHECK(cudaDriverGetVersion(&driver));
    std::printf("# %s (sm_%d%d), runtime %d, driver %d, %zu elements, kernels %s\n", prop.name, prop.major, prop.minor,
                runtime, driver, count, preload_kernels ? "preloaded" : "loaded lazily");

    if (preload_kernels) {
        preload(partial_sums_kernel<double, double>);
        preload(final_sum_kernel<double, double>);
        preload(one_barrier_block_sums);
        preload(serial_sum);
        preload(partial_sums_observed);
        preload(start_rounds);
        preload(count_round);
        preload(set_condition_kernel);
    }

    Streams st;
    int least = 0, greatest = 0;  // cuweave's streams: non-blocking, with a priority
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK(cudaStreamCreateWithPriority(&st.main, cudaStreamNonBlocking, least));
    CHECK(cudaStreamCreateWithPriority(&st.body, cudaStreamNonBlocking, least));
    Buffers b = make_buffers(count);
    Buffers uniform = make_buffers(1024);  // G: 4 blocks of 256, one element a thread

    for (const std::string& v : chosen) {
        current_variant = v.c_str();
        if (v == "A") variant_eager(b, st);
        if (v == "B") variant_graph(b, st);
        if (v == "C")
            variant_conditional("C", "while node, captured body, N rounds (--rounds)", b, st, cudaGraphCondTypeWhile, Body::Sum,
                                Fill::Captured, rounds_option);
        if (v == "C1")
            variant_conditional("C1", "while node, captured body, 1 round", b, st, cudaGraphCondTypeWhile, Body::Sum,
                                Fill::Captured, 1);
        if (v == "D")
            variant_conditional("D", "while node, body built with cudaGraphAddKernelNode, N rounds (--rounds)", b, st,
                                cudaGraphCondTypeWhile, Body::Sum, Fill::Nodes, rounds_option);
        if (v == "E")
            variant_conditional("E", "if node (true), captured body", b, st, cudaGraphCondTypeIf, Body::Sum,
                                Fill::Captured, 1);
        if (v == "F")
            variant_conditional("F", "while node, one-barrier kernel (no loop, no branch), N rounds (--rounds)", b, st,
                                cudaGraphCondTypeWhile, Body::OneBarrierSum, Fill::Captured, rounds_option);
        if (v == "G")
            variant_conditional("G", "while node, captured body, 1024 elements (no warp divided), N rounds (--rounds)", uniform,
                                st, cudaGraphCondTypeWhile, Body::Sum, Fill::Captured, rounds_option);
        if (v == "H") variant_loop_on_computed_value(b, st);
        if (v == "O") variant_observe(b, st);
        if (v == "W") variant_woven_loop(st, 2048);
    }

    free_buffers(uniform);
    free_buffers(b);
    CHECK(cudaStreamDestroy(st.body));
    CHECK(cudaStreamDestroy(st.main));
    std::printf("%s\n", failures == 0 ? "all ok" : "FAILURES");
    return failures == 0 ? 0 : 1;
}
