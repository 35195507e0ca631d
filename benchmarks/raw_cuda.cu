// raw_cuda.cu -- raw CUDA C++ reference figures for the cuweave benchmark harness.
//
// Measures, with the methods the targets are measured by, what the CUDA runtime itself costs, and prints
// ONE JSON object on stdout (benchmarks/run.py compiles and runs this file and reads that object).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 benchmarks/raw_cuda.cu -o /tmp/raw_cuda
//   /tmp/raw_cuda [--reps R] [--n N]        (defaults: 7 timed repetitions, 20000 calls)
//
// Every timing is the median of R repetitions after one warm-up repetition. Host costs are wall time per
// call (std::chrono::steady_clock); GPU-side costs include the final synchronize. Every CUDA call is
// checked: on failure the program prints the call, file:line and the CUDA error name on stderr and exits 1.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)

static void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
    if (err != cudaSuccess) {
        std::fprintf(stderr, "raw_cuda: %s failed at %s:%d: %s (%s)\n", call, file, line,
                     cudaGetErrorName(err), cudaGetErrorString(err));
        std::exit(1);
    }
}

static int g_reps = 7;      // timed repetitions per figure (after one warm-up repetition)
static int g_n = 20000;     // calls per repetition for the per-call host costs

constexpr size_t kBlockBytes = size_t(1) << 20;   // "1 MB" pinned block
constexpr int kBlockPairs = 200;                  // cudaHostAlloc + cudaFreeHost pairs per repetition
constexpr size_t kCopyBytes = size_t(256) << 20;  // "256 MB" copies: 256 * 2**20 bytes
constexpr int kGraphNodes = 1000;                 // kernels captured in the straight-line graph
constexpr int kGraphReplays = 20;                 // replays of that graph per repetition
constexpr int kLoopRounds = 1000;                 // rounds of the while node per replay
constexpr int kDuplexRounds = 5;                  // 256 MB each way per round in duplex_gbps

static double now_us() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::micro>(clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Calls `rep` once to warm up, then g_reps times, and returns the median of what it returned.
static double median_of(const std::function<double()>& rep) {
    rep();
    std::vector<double> results;
    for (int i = 0; i < g_reps; ++i) results.push_back(rep());
    return median(results);
}

__global__ void increment(float* x) { *x += 1.0f; }
// One round of the loop inside a graph: counts down and keeps the while node going until zero.
__global__ void countdown(cudaGraphConditionalHandle handle, int* left) {
    const int now = --*left;
    cudaGraphSetConditional(handle, now > 0 ? 1u : 0u);
}
__global__ void set_int(int* x, int value) { *x = value; }

static cudaStream_t new_stream() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

// Record on stream A + cudaStreamWaitEvent on stream B, timing-disabled event; host µs per pair. `pair` makes
// the two calls.
static double event_record_wait_us(void (*pair)(cudaEvent_t, cudaStream_t, cudaStream_t)) {
    cudaStream_t a = new_stream(), b = new_stream();
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    double us = median_of([&] {
        double t0 = now_us();
        for (int i = 0; i < g_n; ++i) pair(ev, a, b);
        double per_pair = (now_us() - t0) / g_n;
        CHECK(cudaStreamSynchronize(b));
        return per_pair;
    });
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    return us;
}

static void runtime_record_wait(cudaEvent_t ev, cudaStream_t a, cudaStream_t b) {
    CHECK(cudaEventRecord(ev, a));
    CHECK(cudaStreamWaitEvent(b, ev, 0));
}

// The same two calls through the driver's entry points (cuEventRecord, cuStreamWaitEvent), as the runtime
// hands them out: what the runtime's own layer costs shows as the difference.
static CUresult (*cu_event_record)(CUevent, CUstream) = nullptr;
static CUresult (*cu_stream_wait_event)(CUstream, CUevent, unsigned) = nullptr;

template <typename F>
static void driver_entry_point(const char* symbol, F& function) {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CHECK(cudaGetDriverEntryPointByVersion(symbol, &pointer, 12040, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !pointer) CHECK(cudaErrorSymbolNotFound);
    function = reinterpret_cast<F>(pointer);
}

static void driver_record_wait(cudaEvent_t ev, cudaStream_t a, cudaStream_t b) {
    CHECK(static_cast<cudaError_t>(cu_event_record(ev, a)));  // the driver's codes equal the runtime's here
    CHECK(static_cast<cudaError_t>(cu_stream_wait_event(b, ev, 0)));
}

static double event_record_wait_driver_us() {
    driver_entry_point("cuEventRecord", cu_event_record);
    driver_entry_point("cuStreamWaitEvent", cu_stream_wait_event);
    return event_record_wait_us(driver_record_wait);
}

// cudaHostAlloc + cudaFreeHost of 1 MB, uncached (the reference the caching pools are compared with).
static double pinned_block_1mb_us() {
    return median_of([] {
        double t0 = now_us();
        for (int i = 0; i < kBlockPairs; ++i) {
            void* p = nullptr;
            CHECK(cudaHostAlloc(&p, kBlockBytes, cudaHostAllocDefault));
            CHECK(cudaFreeHost(p));
        }
        return (now_us() - t0) / kBlockPairs;
    });
}

// 256 MB cudaMemcpyAsync between cudaHostAlloc and cudaMalloc memory on a non-blocking stream,
// timed with events; GB/s = bytes / 1e9 / seconds.
static void pinned_copy_gbps(double* h2d, double* d2h) {
    void* host = nullptr;
    void* dev = nullptr;
    CHECK(cudaHostAlloc(&host, kCopyBytes, cudaHostAllocDefault));
    CHECK(cudaMalloc(&dev, kCopyBytes));
    std::memset(host, 1, kCopyBytes);
    CHECK(cudaMemset(dev, 0, kCopyBytes));
    CHECK(cudaDeviceSynchronize());  // the memset ran on the legacy stream; the copies use a non-blocking one

    cudaStream_t s = new_stream();
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    auto gbps = [&](void* dst, const void* src, cudaMemcpyKind kind) {
        return median_of([&] {
            CHECK(cudaEventRecord(start, s));
            CHECK(cudaMemcpyAsync(dst, src, kCopyBytes, kind, s));
            CHECK(cudaEventRecord(end, s));
            CHECK(cudaEventSynchronize(end));
            float ms = 0.0f;
            CHECK(cudaEventElapsedTime(&ms, start, end));
            return double(kCopyBytes) / 1e9 / (ms / 1e3);
        });
    };
    *h2d = gbps(dev, host, cudaMemcpyHostToDevice);
    *d2h = gbps(host, dev, cudaMemcpyDeviceToHost);

    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(end));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dev));
    CHECK(cudaFreeHost(host));
}

// 256 MB cudaMemcpyAsync between a malloc'd (pageable, already touched) host buffer and cudaMalloc memory on
// a non-blocking stream, + cudaStreamSynchronize; wall time, GB/s = bytes / 1e9 / seconds. This is what
// copying an ordinary NumPy array costs without staging (the driver stages through its own pinned buffers).
static void pageable_copy_gbps(double* h2d, double* d2h) {
    void* host = std::malloc(kCopyBytes);
    if (host == nullptr) {
        std::fprintf(stderr, "raw_cuda: malloc(%zu) failed\n", kCopyBytes);
        std::exit(1);
    }
    void* dev = nullptr;
    std::memset(host, 1, kCopyBytes);  // fault every page in before timing
    CHECK(cudaMalloc(&dev, kCopyBytes));
    CHECK(cudaMemset(dev, 0, kCopyBytes));
    CHECK(cudaDeviceSynchronize());

    cudaStream_t s = new_stream();
    auto gbps = [&](void* dst, const void* src, cudaMemcpyKind kind) {
        return median_of([&] {
            double t0 = now_us();
            CHECK(cudaMemcpyAsync(dst, src, kCopyBytes, kind, s));
            CHECK(cudaStreamSynchronize(s));
            return double(kCopyBytes) / 1e9 / ((now_us() - t0) / 1e6);
        });
    };
    *h2d = gbps(dev, host, cudaMemcpyHostToDevice);
    *d2h = gbps(host, dev, cudaMemcpyDeviceToHost);

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dev));
    std::free(host);
}

// H2D and D2H at once: kDuplexRounds rounds of one 256 MB pinned -> device copy on stream `up` and one
// 256 MB device -> pinned copy on stream `down`, queued alternately; GB/s total = all bytes moved
// (2 * kDuplexRounds * 256 MB) / 1e9 / wall seconds including the synchronize of both streams.
static double duplex_gbps() {
    void* host_in = nullptr;
    void* host_out = nullptr;
    void* dev_in = nullptr;
    void* dev_out = nullptr;
    CHECK(cudaHostAlloc(&host_in, kCopyBytes, cudaHostAllocDefault));
    CHECK(cudaHostAlloc(&host_out, kCopyBytes, cudaHostAllocDefault));
    CHECK(cudaMalloc(&dev_in, kCopyBytes));
    CHECK(cudaMalloc(&dev_out, kCopyBytes));
    std::memset(host_in, 1, kCopyBytes);
    std::memset(host_out, 0, kCopyBytes);
    CHECK(cudaMemset(dev_in, 0, kCopyBytes));
    CHECK(cudaMemset(dev_out, 1, kCopyBytes));
    CHECK(cudaDeviceSynchronize());

    cudaStream_t up = new_stream(), down = new_stream();
    double gbps = median_of([&] {
        double t0 = now_us();
        for (int r = 0; r < kDuplexRounds; ++r) {
            CHECK(cudaMemcpyAsync(dev_in, host_in, kCopyBytes, cudaMemcpyHostToDevice, up));
            CHECK(cudaMemcpyAsync(host_out, dev_out, kCopyBytes, cudaMemcpyDeviceToHost, down));
        }
        CHECK(cudaStreamSynchronize(up));
        CHECK(cudaStreamSynchronize(down));
        return 2.0 * kDuplexRounds * double(kCopyBytes) / 1e9 / ((now_us() - t0) / 1e6);
    });

    CHECK(cudaStreamDestroy(up));
    CHECK(cudaStreamDestroy(down));
    CHECK(cudaFree(dev_in));
    CHECK(cudaFree(dev_out));
    CHECK(cudaFreeHost(host_in));
    CHECK(cudaFreeHost(host_out));
    return gbps;
}

// g_n launches of a 1-thread kernel on a non-blocking stream; wall µs per launch including the final sync.
// A failed launch stays in cudaGetLastError until read, so one check after the loop sees any of them.
static double tiny_kernel_launch_us(cudaStream_t s, float* x) {
    return median_of([&] {
        double t0 = now_us();
        for (int i = 0; i < g_n; ++i) increment<<<1, 1, 0, s>>>(x);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(s));
        return (now_us() - t0) / g_n;
    });
}

// Captures `kernels` launches of `increment` on s into a graph and instantiates it.
static cudaGraphExec_t capture_increments(cudaStream_t s, float* x, int kernels) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kernels; ++i) increment<<<1, 1, 0, s>>>(x);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaGraphUpload(exec, s));
    return exec;
}

// 1-node graph: host µs per cudaGraphLaunch in the replay loop (the sync after the loop is not timed).
static double graph_replay_us(cudaStream_t s, float* x) {
    cudaGraphExec_t exec = capture_increments(s, x, 1);
    double us = median_of([&] {
        double t0 = now_us();
        for (int i = 0; i < g_n; ++i) CHECK(cudaGraphLaunch(exec, s));
        double per_call = (now_us() - t0) / g_n;
        CHECK(cudaStreamSynchronize(s));
        return per_call;
    });
    CHECK(cudaGraphExecDestroy(exec));
    return us;
}

// Graph of 1000 captured tiny kernels replayed 20 times; wall µs incl. the final sync / (20 * 1000).
static double graph_node_us(cudaStream_t s, float* x) {
    cudaGraphExec_t exec = capture_increments(s, x, kGraphNodes);
    double us = median_of([&] {
        double t0 = now_us();
        for (int i = 0; i < kGraphReplays; ++i) CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s));
        return (now_us() - t0) / (kGraphReplays * kGraphNodes);
    });
    CHECK(cudaGraphExecDestroy(exec));
    return us;
}

// A 1-thread node of `kernel` with `arguments`, after `dependency` when given.
static cudaGraphNode_t add_one_thread_node(cudaGraph_t graph, cudaGraphNode_t dependency, void* kernel,
                                           void** arguments) {
    cudaKernelNodeParams params{};
    params.func = kernel;
    params.gridDim = dim3(1);
    params.blockDim = dim3(1);
    params.kernelParams = arguments;
    cudaGraphNode_t node = nullptr;
    CHECK(cudaGraphAddKernelNode(&node, graph, dependency ? &dependency : nullptr, dependency ? 1 : 0, &params));
    return node;
}

// A graph whose while node runs kLoopRounds rounds of `countdown` (set_int first); wall µs of
// kGraphReplays replays and the sync, per round.
static double loop_round_us(cudaStream_t s, int* left) {
    cudaGraph_t graph = nullptr;
    CHECK(cudaGraphCreate(&graph, 0));
    int rounds = kLoopRounds;
    void* set_args[] = {&left, &rounds};
    cudaGraphNode_t start = add_one_thread_node(graph, nullptr, reinterpret_cast<void*>(&set_int), set_args);
    cudaGraphConditionalHandle handle = 0;
    CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams loop{};
    loop.type = cudaGraphNodeTypeConditional;
    loop.conditional.handle = handle;
    loop.conditional.type = cudaGraphCondTypeWhile;
    loop.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
    CHECK(cudaGraphAddNode(&node, graph, &start, nullptr, 1, &loop));
    void* round_args[] = {&handle, &left};
    add_one_thread_node(loop.conditional.phGraph_out[0], nullptr, reinterpret_cast<void*>(&countdown), round_args);
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphUpload(exec, s));
    double us = median_of([&] {
        double t0 = now_us();
        for (int i = 0; i < kGraphReplays; ++i) CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s));
        return (now_us() - t0) / (double(kGraphReplays) * kLoopRounds);
    });
    int after = -1;
    CHECK(cudaMemcpy(&after, left, sizeof(int), cudaMemcpyDeviceToHost));
    if (after != 0) {
        std::fprintf(stderr, "raw_cuda: the loop ended with %d rounds left\n", after);
        std::exit(1);
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    return us;
}

// Runs `measure` on a new stream with a zeroed float on the device, as main() does for these figures.
static double on_fresh_stream(const std::function<double(cudaStream_t, float*)>& measure) {
    cudaStream_t s = new_stream();
    float* x = nullptr;
    CHECK(cudaMalloc(&x, sizeof(float)));
    CHECK(cudaMemset(x, 0, sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    double us = measure(s, x);
    CHECK(cudaFree(x));
    CHECK(cudaStreamDestroy(s));
    return us;
}

// Figures measured in the caller's process (raw_cuda.cu built as a shared library): benchmarks/run.py measures
// them right beside cuweave's, and tools/probes/graph_node_process_state.py shows whether a process's earlier
// work slows raw CUDA too.
extern "C" double raw_graph_node_us(int reps) {
    g_reps = reps;
    return on_fresh_stream(graph_node_us);
}

extern "C" double raw_tiny_kernel_launch_us(int reps, int n) {
    g_reps = reps;
    g_n = n;
    return on_fresh_stream(tiny_kernel_launch_us);
}

extern "C" double raw_graph_replay_us(int reps, int n) {
    g_reps = reps;
    g_n = n;
    return on_fresh_stream(graph_replay_us);
}

extern "C" double raw_event_record_wait_us(int reps, int n) {
    g_reps = reps;
    g_n = n;
    return event_record_wait_us(runtime_record_wait);
}

extern "C" double raw_event_record_wait_driver_us(int reps, int n) {
    g_reps = reps;
    g_n = n;
    return event_record_wait_driver_us();
}

static std::string json_escape(const char* text) {
    std::string out;
    for (const char* c = text; *c; ++c) {
        if (*c == '"' || *c == '\\') out += '\\';
        if (static_cast<unsigned char>(*c) >= 0x20) out += *c;
    }
    return out;
}

static int positive_int(const char* text, const char* flag) {
    char* end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < 1 || v > 100000000) {
        std::fprintf(stderr, "raw_cuda: %s needs a positive integer, got '%s'\n", flag, text);
        std::exit(2);
    }
    return int(v);
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--reps" && i + 1 < argc) {
            g_reps = positive_int(argv[++i], "--reps");
        } else if (arg == "--n" && i + 1 < argc) {
            g_n = positive_int(argv[++i], "--n");
        } else {
            std::fprintf(stderr, "usage: %s [--reps R] [--n N]\n", argv[0]);
            return 2;
        }
    }

    int device = 0, runtime = 0, driver = 0;
    CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    CHECK(cudaRuntimeGetVersion(&runtime));
    CHECK(cudaDriverGetVersion(&driver));

    double record_wait = event_record_wait_us(runtime_record_wait);
    double block = pinned_block_1mb_us();
    double h2d = 0.0, d2h = 0.0;
    pinned_copy_gbps(&h2d, &d2h);
    double pageable_h2d = 0.0, pageable_d2h = 0.0;
    pageable_copy_gbps(&pageable_h2d, &pageable_d2h);
    double duplex = duplex_gbps();

    cudaStream_t s = new_stream();
    float* x = nullptr;
    CHECK(cudaMalloc(&x, sizeof(float)));
    CHECK(cudaMemset(x, 0, sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    double launch = tiny_kernel_launch_us(s, x);
    double replay = graph_replay_us(s, x);
    double node = graph_node_us(s, x);
    int* left = nullptr;
    CHECK(cudaMalloc(&left, sizeof(int)));
    double loop_round = loop_round_us(s, left);
    CHECK(cudaFree(left));
    CHECK(cudaFree(x));
    CHECK(cudaStreamDestroy(s));

    std::printf("{\"device\": \"%s\", \"runtime_version\": %d, \"driver_version\": %d, \"reps\": %d, \"n\": %d, "
                "\"event_record_wait_us\": %.4f, \"pinned_block_1mb_us\": %.3f, "
                "\"pinned_h2d_gbps\": %.3f, \"pinned_d2h_gbps\": %.3f, \"pageable_h2d_gbps\": %.3f, "
                "\"pageable_d2h_gbps\": %.3f, \"duplex_gbps\": %.3f, \"tiny_kernel_launch_us\": %.4f, "
                "\"graph_replay_us\": %.4f, \"graph_node_us\": %.4f, \"loop_round_us\": %.4f}\n",
                json_escape(prop.name).c_str(), runtime, driver, g_reps, g_n, record_wait, block, h2d, d2h,
                pageable_h2d, pageable_d2h, duplex, launch, replay, node, loop_round);
    return 0;
}
