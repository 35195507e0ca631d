// Found: asking past a kernel's last parameter (how CUDA tells the count) costs 1.782 µs; a node's type 0.063, its
// parameters 0.047, three found parameters 0.289, get + set 0.193 (µs per kernel node, one H200; the kernel handle a
// CUkernel).
// Cited by: Note [Parameter layouts within one walk] (csrc/cuda/cuda_graphs.cpp), rebind_cost_probe.py.
// graph_walk_cost.cu -- what does each CUDA call of a repointing walk cost (Graph.rebind over a woven step's 50
// kernel nodes: type, parameters, parameter layout, and setting the parameters of the nodes changed)? The graph is
// captured as a woven step is: 5 streams forked from one, 10 launches each of a kernel taking (out, in, n).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/graph_walk_cost.cu -o /tmp/walk -lcuda && /tmp/walk
//
// Prints µs per node for each call, medians of 15 repetitions of a walk over all nodes 200 times.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "probe_check.hpp"

__global__ void add_one(float* out, const float* in, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1.0f;
}

constexpr int kChains = 5, kSteps = 10, kFloats = 16384, kWalks = 200, kReps = 15;

static double median_us_per_node(std::size_t nodes, const std::function<void()>& walk) {
    std::vector<double> samples;
    for (int rep = 0; rep < kReps; ++rep) {
        const auto began = std::chrono::steady_clock::now();
        for (int i = 0; i < kWalks; ++i) walk();
        const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - began;
        samples.push_back(took.count() / kWalks / static_cast<double>(nodes));
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

int main() {
    CHECK(cudaSetDevice(0));
    float* arrays[kChains];
    for (auto& a : arrays) CHECK(cudaMalloc(&a, kFloats * sizeof(float)));
    cudaStream_t origin, streams[kChains];
    CHECK(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
    for (auto& s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t fork, joins[kChains];
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (auto& join : joins) CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
    CHECK(cudaEventRecord(fork, origin));
    for (int c = 0; c < kChains; ++c) {
        CHECK(cudaStreamWaitEvent(streams[c], fork, 0));
        for (int s = 0; s < kSteps; ++s) add_one<<<kFloats / 256, 256, 0, streams[c]>>>(arrays[c], arrays[c], kFloats);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(joins[c], streams[c]));
        CHECK(cudaStreamWaitEvent(origin, joins[c], 0));
    }
    CHECK(cudaStreamEndCapture(origin, &graph));

    std::size_t count = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    std::vector<cudaGraphNode_t> kernels;
    for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType type;
        CHECK(cudaGraphNodeGetType(node, &type));
        if (type == cudaGraphNodeTypeKernel) kernels.push_back(node);
    }
    CUDA_KERNEL_NODE_PARAMS first{};
    DRIVER_CHECK(cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(kernels[0]), &first));
    std::printf("%zu nodes, %zu kernel nodes; kernel handle: %s\n", nodes.size(), kernels.size(),
                first.kern ? "CUkernel" : "CUfunction");

    const auto param_info = [](const CUDA_KERNEL_NODE_PARAMS& p, std::size_t index, std::size_t* offset,
                               std::size_t* size) {
        return p.kern ? cuKernelGetParamInfo(p.kern, index, offset, size)
                      : cuFuncGetParamInfo(p.func, index, offset, size);
    };
    const std::size_t n = kernels.size();
    std::printf("per kernel node, µs (medians of %d reps of %d walks)\n", kReps, kWalks);
    std::printf("  cudaGraphGetNodes (per node of the walk)  %7.3f\n", median_us_per_node(n, [&] {
        std::size_t c = 0;
        CHECK(cudaGraphGetNodes(graph, nullptr, &c));
        std::vector<cudaGraphNode_t> all(c);
        CHECK(cudaGraphGetNodes(graph, all.data(), &c));
    }));
    std::printf("  cudaGraphNodeGetType                      %7.3f\n", median_us_per_node(n, [&] {
        for (cudaGraphNode_t node : kernels) {
            cudaGraphNodeType type;
            CHECK(cudaGraphNodeGetType(node, &type));
        }
    }));
    std::printf("  cuGraphKernelNodeGetParams                %7.3f\n", median_us_per_node(n, [&] {
        for (cudaGraphNode_t node : kernels) {
            CUDA_KERNEL_NODE_PARAMS p{};
            DRIVER_CHECK(cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p));
        }
    }));
    std::printf("  ParamInfo, 3 parameters found             %7.3f\n", median_us_per_node(n, [&] {
        for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t index = 0; index < 3; ++index) {
                std::size_t offset, size;
                DRIVER_CHECK(param_info(first, index, &offset, &size));
            }
        }
    }));
    std::printf("  ParamInfo past the last (fails)           %7.3f\n", median_us_per_node(n, [&] {
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t offset, size;
            probe_check(param_info(first, 3, &offset, &size) != CUDA_SUCCESS, "ParamInfo past the last", "succeeded",
                        __FILE__, __LINE__);
        }
    }));
    // Every node repointed to the array it already has: the set call's cost, the graph unchanged.
    std::printf("  get + cuGraphKernelNodeSetParams          %7.3f\n", median_us_per_node(n, [&] {
        for (cudaGraphNode_t node : kernels) {
            CUDA_KERNEL_NODE_PARAMS p{};
            DRIVER_CHECK(cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p));
            DRIVER_CHECK(cuGraphKernelNodeSetParams(reinterpret_cast<CUgraphNode>(node), &p));
        }
    }));
    CHECK(cudaGraphDestroy(graph));
    return 0;
}
