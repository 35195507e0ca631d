// device_graph_launch_probe.cu -- what launching a graph from the device buys a loop whose next step depends on a
// result on the GPU (a scheduler choosing the next graph), against the host reading that result and launching the
// next graph itself; and what CUDA asks of such graphs. The ground for device-side graph launch in cuweave.
//
// Found (one H200, driver 580.159.04, CUDA 13.0, 2026-11-30):
//   a loop of 2000 steps, medians of 7: the host choosing 7.791 us a step, the device choosing (tail launch)
//   5.376 us a step: 0.690 of the host's, the same result.
//   DeviceLaunch with AutoFreeOnLaunch: cudaErrorInvalidValue.
//   A device launch of an executable instantiated without DeviceLaunch: a fault; the stream's synchronize and the
//   copy after it: cudaErrorIllegalAddress (the context lost), so such a launch must be refused before it happens.
//   (A second run, same machine kind: 8.355 against 5.396 us, 0.646.)
// Found with the conditional side (one H200, driver 580.159.04, CUDA 13.0, 2026-12-01): the host choosing
//   8.291 us a step, the device choosing 5.381 (0.649), conditional nodes 10.412 (1.256 of the host's; the tail
//   launch's step is 0.517 of theirs), all three the same result. So device-side launch is the only one of the
//   three that beats the host on this loop; cuweave's conditional nodes do not stand in for it.
//
// The loop: `kSteps` steps; each step is one of two graphs (A or B) whose kernel updates a small state and writes
// which graph runs next (a function of the state, so neither side can know it in advance).
//   host      each graph is its work kernel alone; the host launches it, copies the choice back into pinned
//             memory, waits, and launches the chosen graph.
//   device    each graph is its work kernel then a scheduler kernel, instantiated with
//             cudaGraphInstantiateFlagDeviceLaunch and uploaded; the scheduler tail-launches the chosen graph
//             (cudaStreamGraphTailLaunch) until the steps are done. The host launches the first graph and waits
//             once.
//   conditional  one graph: a while node whose body is a switch node (a branch per graph) and a kernel setting
//             both conditions from the state, as CUDA 12.8 allows without device-side launch. The host launches it
//             and waits once.
// All end with the same state (checked). Printed: wall µs per step for each side (median of 7 loops), and what
// CUDA answered for DeviceLaunch together with AutoFreeOnLaunch, and for a device launch of a graph instantiated
// without the flag (its error read back from the device).
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -rdc=true tools/probes/device_graph_launch_probe.cu -lcudadevrt \
//          -o /tmp/device_graph_launch && /tmp/device_graph_launch
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#include "probe_check.hpp"

namespace {

constexpr int kSteps = 2000;
constexpr int kLoops = 7;

struct State {
    unsigned long long total;  // what the steps computed
    int next;                  // the graph the next step runs (0: A, 1: B)
    int done;                  // steps done
    int launch_error;          // the last device-side launch's error (cudaSuccess when it went)
};

__device__ cudaGraphExec_t scheduled[2];  // the device-launchable executables, set from the host

__global__ void work(State* state, int which) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        state->total = state->total * 6364136223846793005ULL + 1442695040888963407ULL + which;
        state->next = static_cast<int>((state->total >> 33) & 1);
        state->done += 1;
    }
}

__global__ void schedule(State* state, int steps) {
    if (threadIdx.x == 0 && blockIdx.x == 0 && state->done < steps) {
        state->launch_error = cudaGraphLaunch(scheduled[state->next], cudaStreamGraphTailLaunch);
    }
}

// The conditional-node side's step end: the switch takes the next graph's index, the loop goes on until the steps
// are done.
__global__ void decide(State* state, int steps, cudaGraphConditionalHandle choice, cudaGraphConditionalHandle loop) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        cudaGraphSetConditional(choice, static_cast<unsigned>(state->next));
        cudaGraphSetConditional(loop, state->done < steps ? 1u : 0u);
    }
}

void add_kernel(cudaGraph_t graph, const cudaGraphNode_t* dependency, void* kernel, void** arguments) {
    cudaKernelNodeParams params = {};
    params.func = kernel;
    params.gridDim = dim3(1);
    params.blockDim = dim3(32);
    params.kernelParams = arguments;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, graph, dependency, dependency ? 1 : 0, &params));
}

// A conditional node of `type` with `size` bodies in `graph`; returns its bodies (CUDA's, alive with the node).
const cudaGraph_t* add_conditional(cudaGraph_t graph, cudaGraphConditionalHandle handle,
                                   cudaGraphConditionalNodeType type, unsigned size, cudaGraphNode_t* node) {
    cudaGraphNodeParams params = {};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = type;
    params.conditional.size = size;
    CHECK(cudaGraphAddNode(node, graph, nullptr, nullptr, 0, &params));
    return params.conditional.phGraph_out;
}

// The same loop as one graph of conditional nodes, as CUDA 12.8 allows: a while node whose body is a switch node
// (a branch per graph, each its work kernel) followed by `decide`.
cudaGraphExec_t conditional_loop(State* state) {
    cudaGraph_t graph = nullptr;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphConditionalHandle loop, choice;  // both on the top graph: the conditional nodes are in it or below it
    CHECK(cudaGraphConditionalHandleCreate(&loop, graph, 1, cudaGraphCondAssignDefault));
    CHECK(cudaGraphConditionalHandleCreate(&choice, graph, 0, cudaGraphCondAssignDefault));
    cudaGraphNode_t while_node;
    const cudaGraph_t* loop_bodies = add_conditional(graph, loop, cudaGraphCondTypeWhile, 1, &while_node);
    cudaGraph_t body = loop_bodies[0];
    cudaGraphNode_t switch_node;
    const cudaGraph_t* branches = add_conditional(body, choice, cudaGraphCondTypeSwitch, 2, &switch_node);
    int which[2] = {0, 1};
    for (int branch = 0; branch < 2; ++branch) {
        void* arguments[] = {&state, &which[branch]};
        add_kernel(branches[branch], nullptr, reinterpret_cast<void*>(work), arguments);
    }
    int steps = kSteps;
    void* arguments[] = {&state, &steps, &choice, &loop};
    add_kernel(body, &switch_node, reinterpret_cast<void*>(decide), arguments);
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    return exec;
}

// One graph: `which`'s work kernel, then (for the device side) the scheduler.
cudaGraph_t make_graph(State* state, int which, bool with_scheduler, cudaStream_t s) {
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    work<<<1, 32, 0, s>>>(state, which);
    if (with_scheduler) schedule<<<1, 32, 0, s>>>(state, kSteps);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamEndCapture(s, &graph));
    return graph;
}

const char* name(cudaError_t error) { return cudaGetErrorName(error); }

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main() {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    State* state = nullptr;
    CHECK(cudaMalloc(&state, sizeof(State)));
    State* host_state = nullptr;
    CHECK(cudaMallocHost(&host_state, sizeof(State)));

    // Host side: plain executables, the host choosing each next graph.
    cudaGraphExec_t plain[2];
    for (int which = 0; which < 2; ++which) {
        cudaGraph_t graph = make_graph(state, which, false, s);
        CHECK(cudaGraphInstantiate(&plain[which], graph, 0));
        CHECK(cudaGraphDestroy(graph));
    }
    // Device side: device-launchable executables, uploaded, their handles given to the scheduler.
    cudaGraphExec_t launchable[2];
    for (int which = 0; which < 2; ++which) {
        cudaGraph_t graph = make_graph(state, which, true, s);
        CHECK(cudaGraphInstantiateWithFlags(&launchable[which], graph, cudaGraphInstantiateFlagDeviceLaunch));
        CHECK(cudaGraphUpload(launchable[which], s));
        if (which == 0) {
            cudaGraphExec_t both;
            const cudaError_t refused = cudaGraphInstantiateWithFlags(
                &both, graph, cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagAutoFreeOnLaunch);
            std::printf("DeviceLaunch with AutoFreeOnLaunch: %s\n", name(refused));
            if (refused == cudaSuccess) CHECK(cudaGraphExecDestroy(both));
            (void)cudaGetLastError();
        }
        CHECK(cudaGraphDestroy(graph));
    }
    CHECK(cudaMemcpyToSymbol(scheduled, launchable, sizeof launchable));
    CHECK(cudaStreamSynchronize(s));

    cudaGraphExec_t conditional = conditional_loop(state);
    CHECK(cudaGraphUpload(conditional, s));

    unsigned long long host_total = 0, device_total = 0, conditional_total = 0;
    std::vector<double> host_us, device_us, conditional_us;
    for (int loop = 0; loop < kLoops; ++loop) {
        CHECK(cudaMemsetAsync(state, 0, sizeof(State), s));
        CHECK(cudaStreamSynchronize(s));
        auto began = std::chrono::steady_clock::now();
        int next = 0;
        for (int step = 0; step < kSteps; ++step) {
            CHECK(cudaGraphLaunch(plain[next], s));
            CHECK(cudaMemcpyAsync(host_state, state, sizeof(State), cudaMemcpyDeviceToHost, s));
            CHECK(cudaStreamSynchronize(s));
            next = host_state->next;
        }
        host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count() /
                          kSteps);
        host_total = host_state->total;

        CHECK(cudaMemsetAsync(state, 0, sizeof(State), s));
        CHECK(cudaStreamSynchronize(s));
        began = std::chrono::steady_clock::now();
        CHECK(cudaGraphLaunch(launchable[0], s));
        CHECK(cudaStreamSynchronize(s));
        device_us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count() / kSteps);
        CHECK(cudaMemcpy(host_state, state, sizeof(State), cudaMemcpyDeviceToHost));
        device_total = host_state->total;
        if (host_state->done != kSteps || host_state->launch_error != cudaSuccess) {
            std::printf("device side: %d of %d steps done, last device launch %s\n", host_state->done, kSteps,
                        name(static_cast<cudaError_t>(host_state->launch_error)));
        }

        CHECK(cudaMemsetAsync(state, 0, sizeof(State), s));
        CHECK(cudaStreamSynchronize(s));
        began = std::chrono::steady_clock::now();
        CHECK(cudaGraphLaunch(conditional, s));
        CHECK(cudaStreamSynchronize(s));
        conditional_us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count() / kSteps);
        CHECK(cudaMemcpy(host_state, state, sizeof(State), cudaMemcpyDeviceToHost));
        conditional_total = host_state->total;
        if (host_state->done != kSteps) std::printf("conditional side: %d of %d steps done\n", host_state->done, kSteps);
    }
    std::printf("a loop of %d steps, each choosing the next of two graphs from a result on the GPU; medians of %d\n",
                kSteps, kLoops);
    std::printf("  host chooses (launch, copy back, wait)   %8.3f us per step\n", median(host_us));
    std::printf("  device chooses (tail launch)             %8.3f us per step\n", median(device_us));
    std::printf("  conditional nodes (while + switch)       %8.3f us per step\n", median(conditional_us));
    std::printf("  device / host: %.3f; same result: %s\n", median(device_us) / median(host_us),
                host_total == device_total ? "yes" : "NO");
    std::printf("  conditional / host: %.3f; conditional / device: %.3f; same result: %s\n",
                median(conditional_us) / median(host_us), median(conditional_us) / median(device_us),
                host_total == conditional_total ? "yes" : "NO");
    CHECK(cudaGraphExecDestroy(conditional));

    // A device launch of an executable instantiated without the flag: what the device-side call answers.
    CHECK(cudaMemcpyToSymbol(scheduled, plain, sizeof plain));
    CHECK(cudaMemsetAsync(state, 0, sizeof(State), s));
    CHECK(cudaGraphLaunch(launchable[0], s));
    const cudaError_t ran = cudaStreamSynchronize(s);
    const cudaError_t read = cudaMemcpy(host_state, state, sizeof(State), cudaMemcpyDeviceToHost);
    if (read == cudaSuccess) {
        std::printf("a device launch of an executable without DeviceLaunch: the launch %s, the stream %s, %d step(s) "
                    "done\n",
                    name(static_cast<cudaError_t>(host_state->launch_error)), name(ran), host_state->done);
    } else {  // a fault: the context is lost, nothing after can run
        std::printf("a device launch of an executable without DeviceLaunch: the stream %s, the copy after %s\n",
                    name(ran), name(read));
        return 0;
    }

    for (int which = 0; which < 2; ++which) {
        CHECK(cudaGraphExecDestroy(plain[which]));
        CHECK(cudaGraphExecDestroy(launchable[which]));
    }
    CHECK(cudaFreeHost(host_state));
    CHECK(cudaFree(state));
    CHECK(cudaStreamDestroy(s));
    return 0;
}
