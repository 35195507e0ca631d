// Found: through the driver an event record took 0.26 µs against the runtime's 0.33, a stream wait 0.22 against
// 0.31; a graph launch gained nothing measurable (H100). On an H200 (driver 13.0): record 0.316 -> 0.243, wait
// 0.287 -> 0.211, graph launch 0.966; a kernel launch with <<<>>> 3.980 -> 3.744 us through cuLaunchKernel (0.943),
// cudaLaunchKernel -> cuLaunchKernel 0.971: the built-in kernels now launch through the driver (Note [Built-in
// kernels through the driver] in csrc/cuda/builtin_kernels.cu).
// Cited by: Note [Hot calls through the driver] (csrc/cuda/driver_api.hpp).
// driver_vs_runtime_cost.cu -- what does the CUDA runtime's layer cost per call, on the calls cuweave's hot
// paths make (event record, stream wait, graph launch, kernel launch)? Each pair of loops runs the same CUDA
// work through the runtime (cudaEventRecord, ...) and through the driver entry point the runtime hands out
// (cuEventRecord, ...), in turn, so that both see the same host state.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/driver_vs_runtime_cost.cu -o /tmp/dvr && /tmp/dvr
//
// Prints, per call: µs through the runtime, µs through the driver, and their ratio; medians of 15 paired
// repetitions of 20000 calls (after a warm-up pair), the ratio a median of the per-pair ratios.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "probe_check.hpp"

__global__ void increment(float* x) { x[0] += 1.0f; }

constexpr int kCalls = 20000;
constexpr int kReps = 15;

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
static void entry(const char* symbol, F& function) {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult found{};
    CHECK(cudaGetDriverEntryPointByVersion(symbol, &pointer, 12040, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !pointer) {
        std::fprintf(stderr, "no driver entry point %s\n", symbol);
        std::exit(1);
    }
    function = reinterpret_cast<F>(pointer);
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// µs per call of `body` run kCalls times, then `settle` (untimed: it lets queued work drain).
static double per_call(const std::function<void()>& body, const std::function<void()>& settle) {
    double t0 = now_us();
    for (int i = 0; i < kCalls; ++i) body();
    double us = (now_us() - t0) / kCalls;
    settle();
    return us;
}

static void compare(const char* what, const std::function<void()>& runtime, const std::function<void()>& driver,
                    const std::function<void()>& settle) {
    per_call(runtime, settle);
    per_call(driver, settle);
    std::vector<double> r, d, ratio;
    for (int rep = 0; rep < kReps; ++rep) {
        r.push_back(per_call(runtime, settle));
        d.push_back(per_call(driver, settle));
        ratio.push_back(d.back() / r.back());
    }
    std::printf("%-34s runtime %.3f us  driver %.3f us  driver/runtime %.3f\n", what, median(r), median(d),
                median(ratio));
}

int main() {
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*stream_wait_event)(CUstream, CUevent, unsigned);
    CUresult (*graph_launch)(CUgraphExec, CUstream);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);
    entry("cuEventRecord", event_record);
    entry("cuStreamWaitEvent", stream_wait_event);
    entry("cuGraphLaunch", graph_launch);
    entry("cuLaunchKernel", launch_kernel);

    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    float* x;
    CHECK(cudaMalloc(&x, sizeof(float)));
    auto settle = [&] {
        CHECK(cudaStreamSynchronize(a));
        CHECK(cudaStreamSynchronize(b));
    };

    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver_version = 0, runtime_version = 0;
    CHECK(cudaDriverGetVersion(&driver_version));
    CHECK(cudaRuntimeGetVersion(&runtime_version));
    std::printf("%s, driver %d, runtime %d; %d reps of %d calls\n", prop.name, driver_version, runtime_version, kReps,
                kCalls);

    compare("event record", [&] { CHECK(cudaEventRecord(ev, a)); },
            [&] { DRIVER_CHECK(event_record(ev, a)); }, settle);
    compare("stream wait event", [&] { CHECK(cudaStreamWaitEvent(b, ev, 0)); },
            [&] { DRIVER_CHECK(stream_wait_event(b, ev, 0)); }, settle);
    compare("record + wait", [&] {
        CHECK(cudaEventRecord(ev, a));
        CHECK(cudaStreamWaitEvent(b, ev, 0));
    }, [&] {
        DRIVER_CHECK(event_record(ev, a));
        DRIVER_CHECK(stream_wait_event(b, ev, 0));
    }, settle);

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal));
    increment<<<1, 1, 0, a>>>(x);
    CHECK(cudaStreamEndCapture(a, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphUpload(exec, a));
    compare("graph launch (1 node)", [&] { CHECK(cudaGraphLaunch(exec, a)); },
            [&] { DRIVER_CHECK(graph_launch(exec, a)); }, settle);

    cudaFunction_t function;
    CHECK(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(increment)));
    void* args[] = {&x};
    compare("kernel launch <<<>>> vs cuLaunchKernel", [&] { increment<<<1, 1, 0, a>>>(x); },
            [&] { DRIVER_CHECK(launch_kernel(reinterpret_cast<CUfunction>(function), 1, 1, 1, 1, 1, 1, 0, a, args,
                                             nullptr)); }, settle);
    compare("kernel cudaLaunchKernel vs cuLaunchKernel", [&] {
        CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(increment), dim3(1), dim3(1), args, 0, a));
    }, [&] {
        DRIVER_CHECK(launch_kernel(reinterpret_cast<CUfunction>(function), 1, 1, 1, 1, 1, 1, 0, a, args, nullptr));
    }, settle);

    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFree(x));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    return 0;
}
