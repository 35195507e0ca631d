// cupti_launch_stream_probe.cu -- can a CUPTI callback at cuLaunchKernel's entry choose the launch's stream, or
// order it after other work, for a library that gives no hook before its launches (CuPy)?
//
// Found: both are honoured (two H200s, driver 580; tools/probes/README.md has the figures).
//
// Three cases, each with a 100 ms spin launched through cuLaunchKernel on stream A while CUPTI's driver-API
// callback is subscribed:
//   rewrite  the callback, at API entry, writes stream B into the call's parameter struct (CUPTI hands it as a
//            const pointer: not a documented use). Honoured if A is idle right after the launch and B is busy.
//   wait     the callback records an event on a stream X busy with a 200 ms spin and makes A wait for it
//            (cuEventRecord and cuStreamWaitEvent from inside the callback). Honoured if the spin on A ends after
//            X's spin: A's end minus its launch time is about 300 ms, not 100.
//   none     no callback action: the control (A busy, B idle; about 100 ms).
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/cupti_launch_stream_probe.cu -lcuda -lcupti -o /tmp/probe
// (with -L and -Xlinker -rpath at the folder of libcupti.so where the toolkit keeps it elsewhere).
#include <cupti.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "probe_check.hpp"

__global__ void spin(unsigned long long nanoseconds) {
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start >= nanoseconds) break;
    }
}

enum class Action { None, Rewrite, Wait };

struct State {
    Action action = Action::None;
    CUstream target = nullptr;  // rewrite: the stream written into the call
    CUstream busy = nullptr;    // wait: the stream whose work the launch must follow
    CUevent event = nullptr;
    bool inside = false;        // the callback's own CUDA calls call back too
    int seen = 0;
};

State state;

void CUPTIAPI on_driver_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || id != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) return;
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    if (call->callbackSite != CUPTI_API_ENTER || state.inside) return;
    ++state.seen;
    auto* params = const_cast<cuLaunchKernel_params*>(static_cast<const cuLaunchKernel_params*>(call->functionParams));
    state.inside = true;
    if (state.action == Action::Rewrite) {
        params->hStream = state.target;
    } else if (state.action == Action::Wait) {
        DRIVER_CHECK(cuEventRecord(state.event, state.busy));
        DRIVER_CHECK(cuStreamWaitEvent(params->hStream, state.event, 0));
    }
    state.inside = false;
}

const char* query(CUstream stream) {
    const CUresult r = cuStreamQuery(stream);
    return r == CUDA_SUCCESS ? "idle" : r == CUDA_ERROR_NOT_READY ? "busy" : "error";
}

int main() {
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(nullptr));
    CUfunction function;
    CHECK(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(spin)));
    CUstream a, b, x;
    DRIVER_CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    DRIVER_CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    DRIVER_CHECK(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
    DRIVER_CHECK(cuEventCreate(&state.event, CU_EVENT_DISABLE_TIMING));
    state.target = b;
    state.busy = x;

    CUpti_SubscriberHandle subscriber;
    const CUptiResult subscribed = cuptiSubscribe(&subscriber, on_driver_call, nullptr);
    if (subscribed != CUPTI_SUCCESS) {
        const char* why = nullptr;
        cuptiGetResultString(subscribed, &why);
        std::printf("cuptiSubscribe failed: %s\n", why);
        return 1;
    }
    if (cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) !=
        CUPTI_SUCCESS) {
        std::printf("cuptiEnableCallback failed\n");
        return 1;
    }

    const unsigned long long ms = 1000000ull;
    for (Action action : {Action::None, Action::Rewrite, Action::Wait}) {
        const char* name = action == Action::None ? "none" : action == Action::Rewrite ? "rewrite" : "wait";
        if (action == Action::Wait) {
            unsigned long long busy_ns = 200 * ms;
            void* busy_args[] = {&busy_ns};
            state.action = Action::None;
            DRIVER_CHECK(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, x, busy_args, nullptr));
        }
        state.action = action;
        unsigned long long ns = 100 * ms;
        void* args[] = {&ns};
        const auto launched = std::chrono::steady_clock::now();
        const CUresult launch = cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, a, args, nullptr);
        state.action = Action::None;
        const char* a_after = query(a);
        const char* b_after = query(b);
        DRIVER_CHECK(cuStreamSynchronize(a));
        const double a_done_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - launched).count();
        DRIVER_CHECK(cuCtxSynchronize());
        std::printf("%-8s launch %s; right after it A %s, B %s; A done %.1f ms after the launch\n", name,
                    launch == CUDA_SUCCESS ? "ok" : "failed", a_after, b_after, a_done_ms);
    }
    std::printf("launches seen by the callback: %d\n", state.seen);
    cuptiUnsubscribe(subscriber);
    return 0;
}
