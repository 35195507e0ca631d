// What does a CUPTI subscription cost each driver launch, by which launch callbacks are on, and what does the
// runtime's cudaGetDevice add to a launch? Per-call issue time of a one-thread kernel launched through
// cuLaunchKernel, cuLaunchKernelEx_ptsz and cuLaunchKernelEx, and of cudaGetDevice and cuLaunchKernel, each the median
// of 7 rounds of 20,000 calls: without CUPTI, then twice through subscribing, turning callbacks on (an empty
// callback), off again and unsubscribing.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/cupti_launch_cost.cu -o /tmp/probe -lcuda -lcupti && /tmp/probe
//
// Found (one H200, CUDA 13.0, two runs): an empty callback on the launch call costs about 0.1 us a launch, within the
// rounds' spread of 0.2 us (the warm loop of a raw program; in a Python process the watch cost each of cuweave's
// launches 0.23-0.39 us: sanitizer_cost_split.py); a launch through a call whose callback is off costs as without
// CUPTI. cudaGetDevice before each launch: 3.414 against 3.259 us, 3.249 against 3.116 without CUPTI (+0.13 to
// +0.16 us). Cited by Note [cuweave's launches beside the launch watch] and the built-in kernels' lookup.
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "probe_check.hpp"

#define CUPTI_CHECK(call)                                                     \
    do {                                                                      \
        const CUptiResult r = (call);                                         \
        probe_check(r == CUPTI_SUCCESS, #call, "CUPTI error", __FILE__, __LINE__); \
    } while (0)

__global__ void increment(float* x) { x[0] += 1.0f; }

namespace {

volatile long callbacks = 0;
void CUPTIAPI count_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) { callbacks = callbacks + 1; }

using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
enum class How { Launch, ExPerThread, Ex, GetDeviceThenLaunch };
constexpr int kCalls = 20000;

CUfunction function;
CUstream stream;
float* x;
LaunchEx launch_ex_per_thread, launch_ex;

double per_call_us(How how) {
    void* arguments[] = {&x};
    const CUlaunchConfig config = one_thread_on(stream);
    int device = 0;
    DRIVER_CHECK(cuStreamSynchronize(stream));
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
        switch (how) {
            case How::Launch: DRIVER_CHECK(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, arguments, nullptr)); break;
            case How::ExPerThread: DRIVER_CHECK(launch_ex_per_thread(&config, function, arguments, nullptr)); break;
            case How::Ex: DRIVER_CHECK(launch_ex(&config, function, arguments, nullptr)); break;
            case How::GetDeviceThenLaunch:
                CHECK(cudaGetDevice(&device));
                DRIVER_CHECK(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, arguments, nullptr));
                break;
        }
    }
    const auto ended = std::chrono::steady_clock::now();
    DRIVER_CHECK(cuStreamSynchronize(stream));
    return std::chrono::duration<double, std::micro>(ended - began).count() / kCalls;
}

double median_us(How how) {
    std::vector<double> rounds;
    for (int round = 0; round < 7; ++round) rounds.push_back(per_call_us(how));
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
}

void row(const char* state) {
    std::printf("%-44s cuLaunchKernel %.3f  Ex_ptsz %.3f  Ex %.3f  cudaGetDevice+cuLaunchKernel %.3f\n", state,
                median_us(How::Launch), median_us(How::ExPerThread), median_us(How::Ex),
                median_us(How::GetDeviceThenLaunch));
}

}  // namespace

int main() {
    CHECK(cudaFree(nullptr));
    CHECK(cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t*>(&stream), cudaStreamNonBlocking));
    CHECK(cudaMalloc(&x, sizeof(float)));
    CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&function), reinterpret_cast<const void*>(increment)));
    driver_entry("cuLaunchKernelEx", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, launch_ex_per_thread);
    driver_entry("cuLaunchKernelEx", CU_GET_PROC_ADDRESS_LEGACY_STREAM, launch_ex);
    for (How how : {How::Launch, How::ExPerThread, How::Ex}) per_call_us(how);  // warm
    row("no CUPTI");
    CUpti_SubscriberHandle subscriber;
    const auto enable = [&](CUpti_CallbackId id) {
        CUPTI_CHECK(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id));
    };
    for (int pass = 0; pass < 2; ++pass) {
        CUPTI_CHECK(cuptiSubscribe(&subscriber, count_callback, nullptr));
        row("subscribed, nothing on");
        enable(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
        row("cuLaunchKernel on");
        enable(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
        enable(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz);
        enable(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel);
        enable(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz);
        CUPTI_CHECK(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
        CUPTI_CHECK(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
        row("all launches on but Ex_ptsz, + 2 runtime");
        enable(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz);
        row("all launches on");
        CUPTI_CHECK(cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
        CUPTI_CHECK(cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
        row("all off again, subscribed");
        CUPTI_CHECK(cuptiUnsubscribe(subscriber));
        row("unsubscribed (CUPTI stays attached)");
    }
    std::printf("callbacks %ld\n", static_cast<long>(callbacks));
}
