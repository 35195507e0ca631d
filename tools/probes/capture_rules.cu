// Which runtime calls are legal while a stream is being captured (global / thread-local / relaxed)?
// A probe, not part of the build: tools/gpu-check can compile and run it. Prints one line per case.
#include <cuda_runtime.h>
#include <cstdio>
#include <thread>

static cudaStream_t cap, other;
static cudaEvent_t before_ev, ev2;
static cudaMemPool_t pool;
static void* dptr;
static void* hpinned;
static char hpage[4096];

__global__ void tiny(float* p) { if (p) p[0] += 1; }

static const char* cs(cudaStreamCaptureStatus s) {
  return s == cudaStreamCaptureStatusNone ? "none" : s == cudaStreamCaptureStatusActive ? "active" : "invalidated";
}

template <class F>
void probe(const char* name, cudaStreamCaptureMode mode, F f, bool other_thread = false) {
  cudaGetLastError();
  cudaError_t b = cudaStreamBeginCapture(cap, mode);
  cudaError_t r;
  if (other_thread) { std::thread t([&] { r = f(); }); t.join(); } else r = f();
  cudaStreamCaptureStatus st; cudaStreamIsCapturing(cap, &st);
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(cap, &g);
  cudaError_t last = cudaGetLastError();
  size_t n = 0; if (g) { cudaGraphGetNodes(g, nullptr, &n); cudaGraphDestroy(g); }
  cudaError_t after = cudaStreamSynchronize(cap);
  printf("%-44s mode=%d begin=%s call=%s status=%s end=%s last=%s nodes=%zu after_sync=%s\n", name, (int)mode,
         cudaGetErrorName(b), cudaGetErrorName(r), cs(st), cudaGetErrorName(e), cudaGetErrorName(last), n,
         cudaGetErrorName(after));
}

void host_fn(void*) {}

int main() {
  cudaSetDevice(0);
  cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&before_ev, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming);
  cudaEventRecord(before_ev, other);
  cudaDeviceGetDefaultMemPool(&pool, 0);
  cudaMalloc(&dptr, 1 << 20);
  cudaHostAlloc(&hpinned, 1 << 20, 0);
  cudaDeviceSynchronize();
  for (auto mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed}) {
    probe("event query (recorded before, other stream)", mode, [] { return cudaEventQuery(before_ev); });
    probe("event record on other stream", mode, [] { return cudaEventRecord(ev2, other); });
    probe("stream query other", mode, [] { return cudaStreamQuery(other); });
    probe("stream sync other", mode, [] { return cudaStreamSynchronize(other); });
    probe("event sync (before)", mode, [] { return cudaEventSynchronize(before_ev); });
    probe("mallocFromPoolAsync other + free other", mode, [] {
      void* p; cudaError_t r = cudaMallocFromPoolAsync(&p, 256, pool, other);
      if (r) return r; return cudaFreeAsync(p, other); });
    probe("cudaMalloc+cudaFree", mode, [] { void* p; cudaError_t r = cudaMalloc(&p, 256); if (r) return r; return cudaFree(p); });
    probe("cudaHostAlloc+FreeHost", mode, [] { void* p; cudaError_t r = cudaHostAlloc(&p, 4096, 0); if (r) return r; return cudaFreeHost(p); });
    probe("memcpy pageable H2D on cap", mode, [] { return cudaMemcpyAsync(dptr, hpage, 64, cudaMemcpyDefault, cap); });
    probe("memcpy pinned H2D on cap", mode, [] { return cudaMemcpyAsync(dptr, hpinned, 64, cudaMemcpyDefault, cap); });
    probe("sync capturing stream", mode, [] { return cudaStreamSynchronize(cap); });
    probe("query capturing stream", mode, [] { return cudaStreamQuery(cap); });
    probe("mallocFromPoolAsync on cap", mode, [] { void* p; return cudaMallocFromPoolAsync(&p, 256, pool, cap); });
    probe("freeAsync outside mem on cap", mode, [] { void* p; cudaMalloc(&p, 256); return cudaFreeAsync(p, cap); });
    probe("host func on cap", mode, [] { return cudaLaunchHostFunc(cap, host_fn, nullptr); });
    probe("record on cap then query", mode, [] { cudaEventRecord(ev2, cap); return cudaEventQuery(ev2); });
    probe("fork not joined", mode, [] { cudaEventRecord(ev2, cap); cudaStreamWaitEvent(other, ev2, 0);
      tiny<<<1,1,0,other>>>(nullptr); return cudaGetLastError(); });
    probe("legacy memset", mode, [] { return cudaMemsetAsync(dptr, 0, 64, 0); });
    probe("wait legacy-recorded event", mode, [] { cudaEventRecord(ev2, 0); return cudaStreamWaitEvent(cap, ev2, 0); });
    probe("wait before_ev (external event)", mode, [] { return cudaStreamWaitEvent(cap, before_ev, 0); });
    probe("device sync", mode, [] { return cudaDeviceSynchronize(); });
    probe("other thread: cudaMalloc", mode, [] { void* p; cudaError_t r = cudaMalloc(&p, 256); if (!r) cudaFree(p); return r; }, true);
    probe("other thread: event query", mode, [] { return cudaEventQuery(before_ev); }, true);
    probe("kernel on cap", mode, [] { tiny<<<1,1,0,cap>>>((float*)dptr); return cudaGetLastError(); });
  }
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  printf("done %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
}
