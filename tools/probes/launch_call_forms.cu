// Which driver launch call is cheapest for a one-thread kernel? cuweave launches through cuLaunchKernelEx in its
// per-thread-default-stream form (Note [cuweave's launches beside the launch watch]); the benchmarks' raw CUDA
// launches with <<<>>>. Each round runs 20,000 launches and a synchronize through each form in turn on one
// non-blocking stream: <<<>>>, cuLaunchKernel, cuLaunchKernel_ptsz, cuLaunchKernelEx and cuLaunchKernelEx_ptsz
// (the _ptsz forms from cuGetProcAddress with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM). Prints the median
// wall µs per launch of 15 rounds, and each form's median of the per-round ratios to cuLaunchKernel.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/launch_call_forms.cu -o /tmp/forms -lcuda && /tmp/forms
//
// Found (one H200, driver 580 / CUDA 13.0, two runs in one device call): the driver's four forms are within 2% of
// each other, the per-round ratios to cuLaunchKernel 0.981-1.012 (cuLaunchKernelEx_ptsz 0.995 both times), while
// <<<>>> costs 1.039 and 1.043x cuLaunchKernel. So cuweave's launch call costs what cuLaunchKernel does, and the
// benchmarks' raw column, launched with <<<>>>, pays the runtime's layer on top.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "probe_check.hpp"

__global__ void increment(float* x) { x[0] += 1.0f; }

namespace {

using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void**, void**);
enum Form { kRuntime, kLaunch, kLaunchPerThread, kEx, kExPerThread, kForms };
const char* const kNames[kForms] = {"<<<>>>", "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
                                    "cuLaunchKernelEx_ptsz"};
constexpr int kCalls = 20000;
constexpr int kRounds = 15;

CUfunction function;
CUstream stream;
float* x;
Launch launch_per_thread;
LaunchEx launch_ex, launch_ex_per_thread;

double per_launch_us(Form form) {
    void* arguments[] = {&x};
    const CUlaunchConfig config = one_thread_on(stream);
    DRIVER_CHECK(cuStreamSynchronize(stream));
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
        switch (form) {
            case kRuntime: increment<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream)>>>(x); break;
            case kLaunch: DRIVER_CHECK(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, arguments, nullptr)); break;
            case kLaunchPerThread:
                DRIVER_CHECK(launch_per_thread(function, 1, 1, 1, 1, 1, 1, 0, stream, arguments, nullptr));
                break;
            case kEx: DRIVER_CHECK(launch_ex(&config, function, arguments, nullptr)); break;
            case kExPerThread: DRIVER_CHECK(launch_ex_per_thread(&config, function, arguments, nullptr)); break;
            default: break;
        }
    }
    CHECK(cudaGetLastError());
    DRIVER_CHECK(cuStreamSynchronize(stream));
    const auto ended = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(ended - began).count() / kCalls;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main() {
    CHECK(cudaFree(nullptr));
    CHECK(cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t*>(&stream), cudaStreamNonBlocking));
    CHECK(cudaMalloc(&x, sizeof(float)));
    CHECK(cudaMemset(x, 0, sizeof(float)));
    CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&function), reinterpret_cast<const void*>(increment)));
    driver_entry("cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, launch_per_thread);
    driver_entry("cuLaunchKernelEx", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, launch_ex_per_thread);
    driver_entry("cuLaunchKernelEx", CU_GET_PROC_ADDRESS_LEGACY_STREAM, launch_ex);
    for (int form = 0; form < kForms; ++form) per_launch_us(static_cast<Form>(form));  // warm
    std::vector<double> us[kForms], ratio[kForms];
    for (int round = 0; round < kRounds; ++round) {
        double here[kForms];
        for (int form = 0; form < kForms; ++form) here[form] = per_launch_us(static_cast<Form>(form));
        for (int form = 0; form < kForms; ++form) {
            us[form].push_back(here[form]);
            ratio[form].push_back(here[form] / here[kLaunch]);
        }
    }
    for (int form = 0; form < kForms; ++form) {
        std::printf("%-22s %.3f us a launch, %.3fx cuLaunchKernel (median of %d per-round ratios)\n", kNames[form],
                    median(us[form]), median(ratio[form]), kRounds);
    }
    float value = 0;
    CHECK(cudaMemcpy(&value, x, sizeof(float), cudaMemcpyDeviceToHost));
    const double expected = double(kCalls) * kForms * (kRounds + 1);
    probe_check(value == float(expected), "the increments", "not every launch ran", __FILE__, __LINE__);
    std::printf("increments counted: %.0f\n", double(value));
}
