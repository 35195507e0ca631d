// graph_memory_nodes_probe.cu -- what CUDA does with memory allocated and freed inside a stream capture (graph
// memory nodes), before cuweave models it in its simulator: which captures make which nodes, what launching,
// instantiating and cloning such a graph allow, and what memory the graph keeps between launches.
//
// Found (one H200, driver 580.159.04, CUDA 13.0):
//   A  nodes: alloc 1, free 1, kernel 1; after three launches 64 MB of graph memory used and reserved; after a
//      trim 0 and 0, the executable still alive.
//   B  nodes: alloc 1, kernel 1; the memory is read after a launch (7, as written) and outlives the executable's
//      destruction (read, then cudaFree: ok); a second launch with it unfreed: cudaErrorInvalidValue; after a
//      cudaFreeAsync outside the graph: ok; with AutoFreeOnLaunch two launches in a row run, at the same address.
//   C  a second instantiation: cudaErrorNotSupported.   D  a clone: cudaErrorNotSupported.
//   E  the captured cudaFreeAsync of outside memory: cudaErrorInvalidValue, the capture goes on (no free node made;
//      the graph instantiates and runs).
//   F  AutoFreeOnLaunch with DeviceLaunch: cudaErrorInvalidValue.
//   (G to L: another H200, same toolkit, 2026-11-30)
//   G  cudaFreeAsync of the graph's allocation before any launch: cudaErrorInvalidValue (nothing freed); the first
//      launch then runs (value 4 read), and a second launch, unfreed since: cudaErrorInvalidValue.
//   H  cudaMallocFromPoolAsync from a pool of its own, captured: alloc 1, free 1, kernel 1, as cudaMallocAsync; the
//      memory is graph memory (64 MB used after a launch), the pool's reserved memory stays 0: the pool is not used.
//   I  a captured cudaFreeAsync of another graph's allocation: ok, a graph of one free node; allocating, freeing,
//      allocating again launch in turn: ok.
//   J  AutoFreeOnLaunch with UseNodePriority: ok, two launches in a row ok.
//   K  an alloc + free graph hands its kernel the captured address at every launch (0x302000000, three times).
//   L  cudaGraphExecUpdate from a graph captured again alike: ok (cudaGraphExecUpdateSuccess), as is
//      cudaGraphExecKernelNodeSetParams on its kernel node; the launch after runs.
//   (M to R: another H200, same toolkit, 2026-11-30)
//   M  cudaGraphLaunch of an alloc + free graph while the stream captures: cudaErrorStreamCaptureUnsupported, and
//      the capture's end then cudaErrorStreamCaptureInvalidated: such a graph cannot be replayed inside a capture.
//   N  cudaGraphAddChildGraphNode of it: cudaErrorNotSupported; cudaGraphAddNode with
//      cudaGraphChildGraphOwnershipMove: ok (the parent holds 1 child node), instantiates and launches twice.
//   O  instantiate again after the first executable was destroyed: ok, and the launch runs.
//   P  alloc on a forked stream, free on the capture's own stream after the join: alloc 1, free 1, kernel 2;
//      three launches ok, the same address each time.
//   Q  three 64 MB temporaries: alloc 3, free 3, kernel 3; between launches 192 MB of graph memory used and
//      reserved (CUDA keeps it mapped for the next launch); launch + synchronize 59.3 us (median of 200) against
//      56.9 us with the memory held outside the graph; after a trim 0 MB used and reserved with the executable
//      alive, and 57.5 us a launch after it.
//   R  two graphs of one 64 MB temporary each, launched in turn: 64 MB used and reserved in all (they share it),
//      their captured addresses 0x302000000 and 0x306000000.
//   (S: another H200, same toolkit, 2026-11-30; Q again there: 56.9 against 55.6 us, 57.3 after the trim)
//   S  a copy (cudaMemcpyDeviceToHost) from a temporary's address after the launch that freed it, and from an unfreed
//      allocation's address before any launch: cudaErrorInvalidValue as called, the stream fine after; a kernel
//      writing the unlaunched allocation's address: launch and synchronize cudaErrorIllegalAddress (a fault).
//      Outside the probe, the same copies with cudaMemcpyDefault (as cuweave makes them), into pageable or pinned
//      memory, crashed the process with a segmentation fault: the unmapped address was taken for host memory.
//   (T: another H200, same toolkit, 2026-11-30; Q again there: 56.7 against 55.7 us, 56.9 after the trim)
//   T  instantiated again with AutoFreeOnLaunch after the first executable was destroyed, its launch's allocation
//      unfreed: ok; two launches of the new executable ok, the value read at the captured address (5); a
//      cudaFreeAsync of that address after: ok. An unfreed allocation of a destroyed executable does not stop a
//      new one.
//
// Cases (each prints what CUDA answered; none stops the probe but an unexpected failure of setup):
//   A  alloc + kernel + free captured: the nodes made; three launches; the graph memory used and reserved after
//      them, and after cudaDeviceGraphMemTrim.
//   B  alloc + kernel captured, no free: a second launch without cudaGraphInstantiateFlagAutoFreeOnLaunch; the
//      memory read after a launch (it outlives the graph's run); a launch after cudaFreeAsync outside the graph;
//      with AutoFreeOnLaunch, two launches in a row and whether the address stays the same.
//   C  a second instantiation of a graph holding memory nodes while the first lives.
//   D  a clone of that graph.
//   E  cudaFreeAsync, inside a capture, of memory cudaMallocAsync allocated outside it.
//   F  AutoFreeOnLaunch together with DeviceLaunch.
//   G  alloc + kernel captured, no free; cudaFreeAsync of it outside the graph after the capture but before the
//      first launch (where a free deferred past the capture lands); then launches.
//   H  cudaMallocFromPoolAsync from a pool made with cudaMemPoolCreate, inside a capture: the node made, and whether
//      the pool's own memory grows.
//   I  memory a graph allocates, freed by a second graph (a captured cudaFreeAsync of it): the second graph's nodes,
//      and launching the first, the second, the first again.
//   J  AutoFreeOnLaunch together with UseNodePriority.
//   K  the address an alloc + free graph hands its kernel, over three launches.
//   L  cudaGraphExecUpdate of an executable holding memory nodes from a graph captured again alike, and
//      cudaGraphExecKernelNodeSetParams on its kernel node.
//   M  an alloc + free graph launched (cudaGraphLaunch) while another stream captures: the call, the end of that
//      capture, the outer graph's nodes, and launching it twice.
//   N  the same graph as a child graph node: cudaGraphAddChildGraphNode (documented to refuse memory nodes), and
//      cudaGraphAddNode with cudaGraphChildGraphOwnershipMove; instantiating and launching the parent twice.
//   O  instantiate, launch, synchronize, destroy the executable, instantiate again and launch: the sequence a
//      re-instantiation would take (a second executable may not live beside the first: C).
//   P  an allocation on a stream forked from the capture's, a fill there, the join, then the free on the capture's
//      own stream: the nodes, and three launches.
//   Q  what a graph with three 64 MB temporaries (each freed in the graph) keeps between launches: graph memory used
//      and reserved after launches and after a trim; its launch + synchronize time beside the same work on memory
//      allocated once outside the graph (median of 200).
//   R  two graphs, each with its own 64 MB temporary, launched in turn: whether they share the reserved memory.
//   T  an allocation unfreed (no free node), instantiated with AutoFreeOnLaunch and launched; that executable
//      destroyed, the graph instantiated again alike and launched twice: whether the new executable's launches
//      free the old one's allocation (as cuweave re-instantiating a woven graph whose result lives needs), and a
//      cudaFreeAsync after. Not yet run.
//   S  (last, as a fault ends the process's use of the device) a copy from a temporary's address after the launch
//      that freed it; then a copy from, and a kernel writing, an unfreed allocation's address before any launch:
//      what reading graph memory that does not exist does.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 tools/probes/graph_memory_nodes_probe.cu -o /tmp/probe && /tmp/probe
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "probe_check.hpp"

__global__ void fill(unsigned* p, unsigned value, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = value;
}

__global__ void note_address(unsigned* p, unsigned long long* out) { *out = reinterpret_cast<unsigned long long>(p); }

static const size_t kBytes = size_t(64) << 20;
static const size_t kCount = kBytes / sizeof(unsigned);

static const char* name(cudaError_t e) { return e == cudaSuccess ? "ok" : cudaGetErrorName(e); }

// The nodes of `graph` by type, as "alloc 1, free 1, kernel 1".
static void print_nodes(const char* label, cudaGraph_t graph) {
    size_t count = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    int alloc = 0, freed = 0, kernel = 0, other = 0;
    for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType type;
        CHECK(cudaGraphNodeGetType(node, &type));
        if (type == cudaGraphNodeTypeMemAlloc) ++alloc;
        else if (type == cudaGraphNodeTypeMemFree) ++freed;
        else if (type == cudaGraphNodeTypeKernel) ++kernel;
        else ++other;
    }
    std::printf("%s: nodes: alloc %d, free %d, kernel %d, other %d\n", label, alloc, freed, kernel, other);
}

static void print_graph_memory(const char* label) {
    unsigned long long used = 0, reserved = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used));
    CHECK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved));
    std::printf("%s: graph memory used %llu MB, reserved %llu MB\n", label, used >> 20, reserved >> 20);
}

// Captures on `s`: an allocation, a fill of it, and its free if `free_inside`; returns the graph, and the address.
// With a label, prints the graph's nodes under it.
static cudaGraph_t capture(cudaStream_t s, bool free_inside, unsigned value, unsigned** address,
                           const char* label = nullptr) {
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(address), kBytes, s));
    fill<<<264, 256, 0, s>>>(*address, value, kCount);
    CHECK(cudaGetLastError());
    if (free_inside) CHECK(cudaFreeAsync(*address, s));
    CHECK(cudaStreamEndCapture(s, &graph));
    if (label != nullptr) print_nodes(label, graph);
    return graph;
}

// Instantiates `graph` and launches it once on `s`, waiting for the launch.
static cudaGraphExec_t launched_once(cudaGraph_t graph, cudaStream_t s) {
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    return exec;
}

// Prints `graph`'s nodes, instantiates it and launches it `launches` times on `s`, printing what CUDA answered
// (for the cases whose graph may not instantiate or launch).
static void try_launches(const char* label, cudaGraph_t graph, cudaStream_t s, int launches) {
    print_nodes(label, graph);
    cudaGraphExec_t exec;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    std::printf("%s: instantiate: %s\n", label, name(made));
    (void)cudaGetLastError();
    if (made != cudaSuccess) return;
    std::printf("%s: %d launches:", label, launches);
    for (int i = 0; i < launches; ++i) std::printf(" %s", name(cudaGraphLaunch(exec, s)));
    std::printf("; synchronize: %s\n", name(cudaStreamSynchronize(s)));
    (void)cudaGetLastError();
    CHECK(cudaGraphExecDestroy(exec));
}

int main() {
    CHECK(cudaSetDevice(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    {  // A
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, true, 1, &p, "A");
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s));
        print_graph_memory("A after 3 launches");
        CHECK(cudaDeviceGraphMemTrim(0));
        print_graph_memory("A after trim, exec alive");
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaDeviceGraphMemTrim(0));
        print_graph_memory("A after trim, exec destroyed");
        CHECK(cudaGraphDestroy(graph));
    }
    {  // B
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, false, 7, &p, "B");
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s));
        unsigned first = 0;
        const cudaError_t read = cudaMemcpy(&first, p, sizeof first, cudaMemcpyDeviceToHost);
        std::printf("B: read after a launch: %s, value %u (7 expected)\n", name(read), first);
        print_graph_memory("B after a launch, unfreed");
        const cudaError_t again = cudaGraphLaunch(exec, s);
        std::printf("B: a second launch, the allocation unfreed, no AutoFreeOnLaunch: %s\n", name(again));
        (void)cudaGetLastError();
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaFreeAsync(p, s));
        const cudaError_t after_free = cudaGraphLaunch(exec, s);
        std::printf("B: a launch after cudaFreeAsync outside the graph: %s\n", name(after_free));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaFreeAsync(p, s));  // the last launch's allocation (same address)
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));

        unsigned* q = nullptr;
        graph = capture(s, false, 9, &q);
        CHECK(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
        const cudaError_t one = cudaGraphLaunch(exec, s);
        const cudaError_t two = cudaGraphLaunch(exec, s);
        CHECK(cudaStreamSynchronize(s));
        unsigned value = 0;
        const cudaError_t read_q = cudaMemcpy(&value, q, sizeof value, cudaMemcpyDeviceToHost);
        std::printf("B: AutoFreeOnLaunch, two launches: %s, %s; read at the captured address: %s, value %u\n",
                    name(one), name(two), name(read_q), value);
        CHECK(cudaGraphExecDestroy(exec));
        const cudaError_t read_after = cudaMemcpy(&value, q, sizeof value, cudaMemcpyDeviceToHost);
        std::printf("B: read after the exec is destroyed (allocation unfreed): %s, value %u\n", name(read_after), value);
        (void)cudaGetLastError();
        const cudaError_t freed = cudaFree(q);
        std::printf("B: cudaFree of it then: %s\n", name(freed));
        (void)cudaGetLastError();
        CHECK(cudaGraphDestroy(graph));
    }
    {  // C and D
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, true, 3, &p);
        cudaGraphExec_t first, second;
        CHECK(cudaGraphInstantiate(&first, graph, 0));
        const cudaError_t twice = cudaGraphInstantiate(&second, graph, 0);
        std::printf("C: a second instantiation while the first lives: %s\n", name(twice));
        (void)cudaGetLastError();
        if (twice == cudaSuccess) CHECK(cudaGraphExecDestroy(second));
        cudaGraph_t clone = nullptr;
        const cudaError_t cloned = cudaGraphClone(&clone, graph);
        std::printf("D: a clone: %s\n", name(cloned));
        (void)cudaGetLastError();
        if (cloned == cudaSuccess) CHECK(cudaGraphDestroy(clone));
        CHECK(cudaGraphExecDestroy(first));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // E
        unsigned* outside = nullptr;
        CHECK(cudaMallocAsync(reinterpret_cast<void**>(&outside), kBytes, s));
        CHECK(cudaStreamSynchronize(s));
        cudaGraph_t graph = nullptr;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        fill<<<264, 256, 0, s>>>(outside, 5, kCount);
        const cudaError_t free_call = cudaFreeAsync(outside, s);
        const cudaError_t ended = cudaStreamEndCapture(s, &graph);
        std::printf("E: cudaFreeAsync in a capture of memory allocated outside it: %s; end of capture: %s\n",
                    name(free_call), name(ended));
        (void)cudaGetLastError();
        if (ended == cudaSuccess && graph != nullptr) {
            print_nodes("E", graph);
            cudaGraphExec_t exec;
            const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
            std::printf("E: instantiate: %s\n", name(made));
            if (made == cudaSuccess) {
                const cudaError_t launched = cudaGraphLaunch(exec, s);
                const cudaError_t done = cudaStreamSynchronize(s);
                std::printf("E: launch: %s, synchronize: %s\n", name(launched), name(done));
                CHECK(cudaGraphExecDestroy(exec));
            }
            CHECK(cudaGraphDestroy(graph));
        } else {
            CHECK(cudaFreeAsync(outside, s));
        }
        (void)cudaGetLastError();
        CHECK(cudaStreamSynchronize(s));
    }
    {  // F
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, false, 1, &p);
        cudaGraphExec_t exec;
        const cudaError_t both = cudaGraphInstantiate(
            &exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagDeviceLaunch);
        std::printf("F: AutoFreeOnLaunch with DeviceLaunch: %s\n", name(both));
        (void)cudaGetLastError();
        if (both == cudaSuccess) CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // G
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, false, 4, &p);
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        const cudaError_t early = cudaFreeAsync(p, s);
        const cudaError_t early_done = cudaStreamSynchronize(s);
        std::printf("G: cudaFreeAsync of the graph's allocation before any launch: %s, synchronize: %s\n", name(early),
                    name(early_done));
        (void)cudaGetLastError();
        const cudaError_t first = cudaGraphLaunch(exec, s);
        const cudaError_t first_done = cudaStreamSynchronize(s);
        unsigned value = 0;
        const cudaError_t read = cudaMemcpy(&value, p, sizeof value, cudaMemcpyDeviceToHost);
        std::printf("G: then a launch: %s, synchronize: %s; read: %s, value %u (4 expected)\n", name(first),
                    name(first_done), name(read), value);
        (void)cudaGetLastError();
        const cudaError_t second = cudaGraphLaunch(exec, s);
        std::printf("G: a second launch, unfreed since: %s\n", name(second));
        (void)cudaGetLastError();
        (void)cudaStreamSynchronize(s);
        (void)cudaFreeAsync(p, s);
        (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // H
        cudaMemPool_t pool;
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = 0;
        CHECK(cudaMemPoolCreate(&pool, &props));
        cudaGraph_t graph = nullptr;
        unsigned* p = nullptr;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        const cudaError_t allocated = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&p), kBytes, pool, s);
        if (allocated == cudaSuccess) {
            fill<<<264, 256, 0, s>>>(p, 2, kCount);
            (void)cudaFreeAsync(p, s);
        }
        const cudaError_t ended = cudaStreamEndCapture(s, &graph);
        std::printf("H: cudaMallocFromPoolAsync (a pool of its own) in a capture: %s; end of capture: %s\n",
                    name(allocated), name(ended));
        (void)cudaGetLastError();
        if (ended == cudaSuccess && graph != nullptr) {
            print_nodes("H", graph);
            cudaGraphExec_t exec;
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
            CHECK(cudaGraphLaunch(exec, s));
            CHECK(cudaStreamSynchronize(s));
            unsigned long long pool_reserved = 0;
            CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &pool_reserved));
            std::printf("H: after a launch, the pool's reserved memory: %llu MB\n", pool_reserved >> 20);
            print_graph_memory("H after a launch");
            CHECK(cudaGraphExecDestroy(exec));
            CHECK(cudaGraphDestroy(graph));
        }
        CHECK(cudaMemPoolDestroy(pool));
        CHECK(cudaDeviceGraphMemTrim(0));
    }
    {  // I
        unsigned* p = nullptr;
        cudaGraph_t allocating = capture(s, false, 6, &p);
        cudaGraph_t freeing = nullptr;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        const cudaError_t free_call = cudaFreeAsync(p, s);
        const cudaError_t ended = cudaStreamEndCapture(s, &freeing);
        std::printf("I: a captured cudaFreeAsync of another graph's allocation: %s; end of capture: %s\n",
                    name(free_call), name(ended));
        (void)cudaGetLastError();
        if (ended == cudaSuccess && freeing != nullptr) {
            print_nodes("I (the freeing graph)", freeing);
            cudaGraphExec_t a, b;
            CHECK(cudaGraphInstantiate(&a, allocating, 0));
            const cudaError_t made = cudaGraphInstantiate(&b, freeing, 0);
            std::printf("I: instantiate the freeing graph: %s\n", name(made));
            if (made == cudaSuccess) {
                const cudaError_t one = cudaGraphLaunch(a, s);
                const cudaError_t two = cudaGraphLaunch(b, s);
                const cudaError_t three = cudaGraphLaunch(a, s);
                const cudaError_t done = cudaStreamSynchronize(s);
                std::printf("I: launch allocating, freeing, allocating: %s, %s, %s; synchronize: %s\n", name(one),
                            name(two), name(three), name(done));
                (void)cudaGetLastError();
                (void)cudaGraphLaunch(b, s);
                (void)cudaStreamSynchronize(s);
                CHECK(cudaGraphExecDestroy(b));
            }
            CHECK(cudaGraphExecDestroy(a));
            CHECK(cudaGraphDestroy(freeing));
        }
        (void)cudaGetLastError();
        CHECK(cudaGraphDestroy(allocating));
    }
    {  // J
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, false, 1, &p);
        cudaGraphExec_t exec;
        const cudaError_t both = cudaGraphInstantiate(
            &exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority);
        std::printf("J: AutoFreeOnLaunch with UseNodePriority: %s\n", name(both));
        (void)cudaGetLastError();
        if (both == cudaSuccess) {
            const cudaError_t one = cudaGraphLaunch(exec, s);
            const cudaError_t two = cudaGraphLaunch(exec, s);
            std::printf("J: two launches: %s, %s\n", name(one), name(two));
            CHECK(cudaStreamSynchronize(s));
            CHECK(cudaGraphExecDestroy(exec));
            (void)cudaFreeAsync(p, s);
            (void)cudaStreamSynchronize(s);
        }
        (void)cudaGetLastError();
        CHECK(cudaGraphDestroy(graph));
    }
    {  // K
        unsigned long long* address = nullptr;
        CHECK(cudaMalloc(reinterpret_cast<void**>(&address), sizeof(unsigned long long)));
        unsigned* p = nullptr;
        cudaGraph_t graph = nullptr;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p), kBytes, s));
        note_address<<<1, 1, 0, s>>>(p, address);
        CHECK(cudaFreeAsync(p, s));
        CHECK(cudaStreamEndCapture(s, &graph));
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        unsigned long long seen[3] = {};
        for (unsigned long long& at : seen) {
            CHECK(cudaGraphLaunch(exec, s));
            CHECK(cudaStreamSynchronize(s));
            CHECK(cudaMemcpy(&at, address, sizeof at, cudaMemcpyDeviceToHost));
        }
        std::printf("K: the address over three launches: %llx %llx %llx (captured: %llx)\n", seen[0], seen[1], seen[2],
                    reinterpret_cast<unsigned long long>(p));
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        CHECK(cudaFree(address));
    }
    {  // L
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, true, 1, &p);
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        unsigned* q = nullptr;
        cudaGraph_t again = capture(s, true, 2, &q);
        cudaGraphExecUpdateResultInfo info{};
        const cudaError_t updated = cudaGraphExecUpdate(exec, again, &info);
        std::printf("L: cudaGraphExecUpdate from a graph captured again alike: %s, result %d\n", name(updated),
                    static_cast<int>(info.result));
        (void)cudaGetLastError();
        size_t count = 0;
        CHECK(cudaGraphGetNodes(graph, nullptr, &count));
        std::vector<cudaGraphNode_t> nodes(count);
        CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
        for (cudaGraphNode_t node : nodes) {
            cudaGraphNodeType type;
            CHECK(cudaGraphNodeGetType(node, &type));
            if (type != cudaGraphNodeTypeKernel) continue;
            cudaKernelNodeParams params{};
            CHECK(cudaGraphKernelNodeGetParams(node, &params));
            const cudaError_t set = cudaGraphExecKernelNodeSetParams(exec, node, &params);
            std::printf("L: cudaGraphExecKernelNodeSetParams on its kernel node: %s\n", name(set));
            (void)cudaGetLastError();
        }
        const cudaError_t launched = cudaGraphLaunch(exec, s);
        const cudaError_t done = cudaStreamSynchronize(s);
        std::printf("L: launch after: %s, synchronize: %s\n", name(launched), name(done));
        (void)cudaGetLastError();
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(again));
        CHECK(cudaGraphDestroy(graph));
    }
    {  // M
        unsigned* p = nullptr;
        cudaGraph_t inner = capture(s, true, 1, &p);
        cudaGraphExec_t inner_exec;
        CHECK(cudaGraphInstantiate(&inner_exec, inner, 0));
        cudaStream_t t;
        CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
        cudaGraph_t outer = nullptr;
        CHECK(cudaStreamBeginCapture(t, cudaStreamCaptureModeGlobal));
        const cudaError_t launched = cudaGraphLaunch(inner_exec, t);
        const cudaError_t ended = cudaStreamEndCapture(t, &outer);
        std::printf("M: cudaGraphLaunch of an alloc + free graph inside a capture: %s; end of capture: %s\n",
                    name(launched), name(ended));
        (void)cudaGetLastError();
        if (ended == cudaSuccess && outer != nullptr) {
            try_launches("M (outer)", outer, t, 2);
            CHECK(cudaGraphDestroy(outer));
        }
        (void)cudaGetLastError();
        CHECK(cudaGraphExecDestroy(inner_exec));
        CHECK(cudaGraphDestroy(inner));
        CHECK(cudaStreamDestroy(t));
    }
    {  // N
        unsigned* p = nullptr;
        cudaGraph_t child = capture(s, true, 1, &p);
        cudaGraph_t parent = nullptr;
        CHECK(cudaGraphCreate(&parent, 0));
        cudaGraphNode_t node = nullptr;
        const cudaError_t cloned = cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, child);
        std::printf("N: cudaGraphAddChildGraphNode of an alloc + free graph: %s\n", name(cloned));
        (void)cudaGetLastError();
        cudaGraphNodeParams params{};
        params.type = cudaGraphNodeTypeGraph;
        params.graph.graph = child;
        params.graph.ownership = cudaGraphChildGraphOwnershipMove;
        const cudaError_t moved = cloned == cudaSuccess ? cudaErrorUnknown
                                                        : cudaGraphAddNode(&node, parent, nullptr, nullptr, 0, &params);
        std::printf("N: cudaGraphAddNode with cudaGraphChildGraphOwnershipMove: %s\n",
                    cloned == cudaSuccess ? "not tried" : name(moved));
        (void)cudaGetLastError();
        try_launches("N (parent)", parent, s, 2);
        CHECK(cudaGraphDestroy(parent));
        if (moved != cudaSuccess) CHECK(cudaGraphDestroy(child));  // moved: the parent owned it
    }
    {  // O
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, true, 1, &p);
        cudaGraphExec_t exec = launched_once(graph, s);
        CHECK(cudaGraphExecDestroy(exec));
        const cudaError_t again = cudaGraphInstantiate(&exec, graph, 0);
        std::printf("O: instantiate again after the first executable is destroyed: %s\n", name(again));
        (void)cudaGetLastError();
        if (again == cudaSuccess) {
            const cudaError_t launched = cudaGraphLaunch(exec, s);
            const cudaError_t done = cudaStreamSynchronize(s);
            std::printf("O: launch: %s, synchronize: %s\n", name(launched), name(done));
            CHECK(cudaGraphExecDestroy(exec));
        }
        (void)cudaGetLastError();
        CHECK(cudaGraphDestroy(graph));
    }
    {  // P
        cudaStream_t t;
        CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
        cudaEvent_t fork, join;
        CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
        unsigned long long* address = nullptr;
        CHECK(cudaMalloc(reinterpret_cast<void**>(&address), sizeof(unsigned long long)));
        unsigned* p = nullptr;
        cudaGraph_t graph = nullptr;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        CHECK(cudaEventRecord(fork, s));
        CHECK(cudaStreamWaitEvent(t, fork, 0));
        const cudaError_t allocated = cudaMallocAsync(reinterpret_cast<void**>(&p), kBytes, t);
        if (allocated == cudaSuccess) {
            fill<<<264, 256, 0, t>>>(p, 8, kCount);
            note_address<<<1, 1, 0, t>>>(p, address);
        }
        CHECK(cudaEventRecord(join, t));
        CHECK(cudaStreamWaitEvent(s, join, 0));
        const cudaError_t freed = allocated == cudaSuccess ? cudaFreeAsync(p, s) : cudaErrorUnknown;
        const cudaError_t ended = cudaStreamEndCapture(s, &graph);
        std::printf("P: alloc on a forked stream: %s; free on the capture's own stream after the join: %s; end: %s\n",
                    name(allocated), name(freed), name(ended));
        (void)cudaGetLastError();
        if (ended == cudaSuccess && graph != nullptr) {
            print_nodes("P", graph);
            cudaGraphExec_t exec;
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
            cudaError_t launches[3];
            unsigned long long seen[3] = {};
            for (int i = 0; i < 3; ++i) {
                launches[i] = cudaGraphLaunch(exec, s);
                (void)cudaStreamSynchronize(s);
                (void)cudaMemcpy(&seen[i], address, sizeof seen[i], cudaMemcpyDeviceToHost);
            }
            std::printf("P: three launches: %s, %s, %s; addresses %llx %llx %llx\n", name(launches[0]),
                        name(launches[1]), name(launches[2]), seen[0], seen[1], seen[2]);
            CHECK(cudaGraphExecDestroy(exec));
            CHECK(cudaGraphDestroy(graph));
        }
        (void)cudaGetLastError();
        CHECK(cudaFree(address));
        CHECK(cudaEventDestroy(fork));
        CHECK(cudaEventDestroy(join));
        CHECK(cudaStreamDestroy(t));
    }
    {  // Q
        CHECK(cudaDeviceGraphMemTrim(0));
        // Three temporaries in a chain: each filled, the next filled, then freed, in the graph.
        auto temporaries = [&](bool in_graph, unsigned* outside[3]) {
            cudaGraph_t graph = nullptr;
            CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            unsigned* t[3];
            for (int i = 0; i < 3; ++i) {
                if (in_graph) {
                    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&t[i]), kBytes, s));
                } else {
                    t[i] = outside[i];
                }
                fill<<<264, 256, 0, s>>>(t[i], i, kCount);
            }
            if (in_graph) {
                for (int i = 0; i < 3; ++i) CHECK(cudaFreeAsync(t[i], s));
            }
            CHECK(cudaStreamEndCapture(s, &graph));
            return graph;
        };
        auto median_us = [&](cudaGraphExec_t exec) {
            std::vector<double> times;
            for (int i = 0; i < 200; ++i) {
                const auto begin = std::chrono::steady_clock::now();
                CHECK(cudaGraphLaunch(exec, s));
                CHECK(cudaStreamSynchronize(s));
                times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin)
                                    .count());
            }
            std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
            return times[times.size() / 2];
        };
        unsigned* held[3];
        for (unsigned*& h : held) CHECK(cudaMalloc(reinterpret_cast<void**>(&h), kBytes));
        cudaGraph_t with_nodes = temporaries(true, nullptr);
        cudaGraph_t without = temporaries(false, held);
        print_nodes("Q (memory nodes)", with_nodes);
        cudaGraphExec_t a, b;
        CHECK(cudaGraphInstantiate(&a, with_nodes, 0));
        CHECK(cudaGraphInstantiate(&b, without, 0));
        const double us_nodes = median_us(a);
        const double us_held = median_us(b);
        print_graph_memory("Q between launches (memory nodes)");
        std::printf("Q: launch + synchronize, median of 200: memory nodes %.1f us, memory held outside %.1f us "
                    "(%zu MB held outside the graph)\n", us_nodes, us_held, (3 * kBytes) >> 20);
        CHECK(cudaDeviceGraphMemTrim(0));
        print_graph_memory("Q after a trim, executable alive");
        const double us_after_trim = median_us(a);
        std::printf("Q: launch + synchronize after the trim, median of 200: %.1f us\n", us_after_trim);
        CHECK(cudaGraphExecDestroy(a));
        CHECK(cudaGraphExecDestroy(b));
        CHECK(cudaGraphDestroy(with_nodes));
        CHECK(cudaGraphDestroy(without));
        for (unsigned* h : held) CHECK(cudaFree(h));
        CHECK(cudaDeviceGraphMemTrim(0));
    }
    {  // R
        unsigned *p = nullptr, *q = nullptr;
        cudaGraph_t first = capture(s, true, 1, &p);
        cudaGraph_t second = capture(s, true, 2, &q);
        cudaGraphExec_t a, b;
        CHECK(cudaGraphInstantiate(&a, first, 0));
        CHECK(cudaGraphInstantiate(&b, second, 0));
        for (int i = 0; i < 3; ++i) {
            CHECK(cudaGraphLaunch(a, s));
            CHECK(cudaGraphLaunch(b, s));
        }
        CHECK(cudaStreamSynchronize(s));
        print_graph_memory("R after two graphs of one 64 MB temporary each, launched in turn");
        std::printf("R: the captured addresses: %llx and %llx\n", reinterpret_cast<unsigned long long>(p),
                    reinterpret_cast<unsigned long long>(q));
        CHECK(cudaGraphExecDestroy(a));
        CHECK(cudaGraphExecDestroy(b));
        CHECK(cudaGraphDestroy(first));
        CHECK(cudaGraphDestroy(second));
        CHECK(cudaDeviceGraphMemTrim(0));
    }
    {  // T
        unsigned* p = nullptr;
        cudaGraph_t graph = capture(s, false, 5, &p);
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaGraphExecDestroy(exec));  // the allocation of its launch lives on, unfreed
        const cudaError_t again =
            cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
        std::printf("T: instantiate again, the first executable's allocation unfreed: %s\n", name(again));
        (void)cudaGetLastError();
        if (again == cudaSuccess) {
            const cudaError_t first = cudaGraphLaunch(exec, s);
            const cudaError_t first_done = cudaStreamSynchronize(s);
            const cudaError_t second = cudaGraphLaunch(exec, s);
            const cudaError_t second_done = cudaStreamSynchronize(s);
            unsigned value = 0;
            const cudaError_t read = cudaMemcpy(&value, p, sizeof value, cudaMemcpyDeviceToHost);
            std::printf("T: its launches: %s (synchronize %s), %s (synchronize %s); read %s, value %u (5 expected)\n",
                        name(first), name(first_done), name(second), name(second_done), name(read), value);
            (void)cudaGetLastError();
            CHECK(cudaGraphExecDestroy(exec));
        }
        const cudaError_t freed = cudaFreeAsync(p, s);
        const cudaError_t freed_done = cudaStreamSynchronize(s);
        std::printf("T: cudaFreeAsync of the allocation after: %s, synchronize %s\n", name(freed), name(freed_done));
        (void)cudaGetLastError();
        CHECK(cudaGraphDestroy(graph));
        CHECK(cudaDeviceGraphMemTrim(0));
    }
    {  // S, last: a fault loses the context for the rest of the process
        unsigned* temporary = nullptr;
        launched_once(capture(s, true, 5, &temporary), s);  // graph and executable kept: the process ends here
        unsigned value = 0;
        cudaError_t copied = cudaMemcpyAsync(&value, temporary, sizeof value, cudaMemcpyDeviceToHost, s);
        cudaError_t waited = cudaStreamSynchronize(s);
        std::printf("S: a copy from a temporary's address after its launch freed it: %s, synchronize: %s, value %u\n",
                    name(copied), name(waited), value);
        (void)cudaGetLastError();
        unsigned* result = nullptr;
        capture(s, false, 6, &result);
        copied = cudaMemcpyAsync(&value, result, sizeof value, cudaMemcpyDeviceToHost, s);
        waited = cudaStreamSynchronize(s);
        std::printf("S: a copy from an unfreed allocation's address before any launch: %s, synchronize: %s\n",
                    name(copied), name(waited));
        fill<<<1, 32, 0, s>>>(result, 7, 32);
        std::printf("S: then a kernel writing it: launch %s, synchronize %s\n", name(cudaGetLastError()),
                    name(cudaStreamSynchronize(s)));
    }
    CHECK(cudaStreamDestroy(s));
    return 0;
}
