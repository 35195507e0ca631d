// Note [Tracing with CUPTI]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CUDA backend's Tracer (Note [Tracing] in cuweave/trace.hpp). CUPTI, the CUDA toolkit's profiling
// interface (also the nvidia-cuda-cupti wheel), is loaded with dlopen when the first trace opens, so cuweave
// imports and runs without it. While a trace is open:
//  * a callback on every runtime and driver API call that queues work (launches, copies, memsets, event
//    records, stream waits, graph launches) runs in the issuing thread and notes, under the call's
//    correlation id, the traces the call belongs to and its Python call site (trace::current_origin());
//  * activity records (concurrent kernels, copies, peer copies, memsets) arrive in buffers; each becomes a
//    trace::Activity delivered to the traces its correlation id was noted for. Records nobody noted (other
//    threads' work, work issued before the trace opened) are dropped;
//  * event records and stream waits become activities in that callback (the stream and event come from the
//    call's parameters; a record and the waits for it share a link). CUPTI's own event and synchronization
//    activity kinds are not used: with them enabled, a loop of records and waits stalled inside
//    cuEventRecord for minutes (H100, driver 580, CUPTI 13.0). Their GPU time is not observed; the views
//    place them where they took effect.
// Kernel records come from CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which leaves kernels concurrent (the plain
// kernel kind would serialize them). The nodes of a graph launch share the launch's correlation id; one more
// activity spans them for the replay itself, on the launch stream's lane.
//
// The same subscription serves the sanitizer's watch of kernels other libraries launch (Note [Kernels other
// libraries launch] in tracer.hpp): while it is on, the launch callbacks (driver and runtime) stay enabled with
// no trace open, and a trace's end leaves them on.
//
// If another tool holds CUPTI's callback subscription (Nsight Systems, a framework's profiler), records cannot
// be told apart by thread: each goes to every open trace, without a call site.
#include "cuda/cupti_tracer.hpp"

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/optional_library.hpp"
#include "cuda/own_calls.hpp"
#include "cuda/own_modules.hpp"
#include "cuda/pointer_attributes.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/foreign_placement.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::cuda {

namespace {

struct Cupti {
  decltype(&cuptiSubscribe) subscribe;
  decltype(&cuptiUnsubscribe) unsubscribe;
  decltype(&cuptiEnableDomain) enable_domain;
  decltype(&cuptiEnableCallback) enable_callback;
  decltype(&cuptiGetCallbackName) callback_name;
  decltype(&cuptiActivityEnable) activity_enable;
  decltype(&cuptiActivityDisable) activity_disable;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks;
  decltype(&cuptiActivityFlushAll) flush_all;
  decltype(&cuptiActivityGetNextRecord) next_record;
  decltype(&cuptiGetTimestamp) timestamp;
  decltype(&cuptiGetStreamIdEx) stream_id;
  decltype(&cuptiGetDeviceId) device_id;
  decltype(&cuptiGetResultString) result_string;
  decltype(&cuptiFinalize) finalize;
};

const Cupti& cupti() {
  static std::once_flag once;
  static Cupti* loaded = nullptr;  // leaked: used until the process ends
  std::call_once(once, [] {
    const std::string site = site_packages();
    std::vector<std::string> candidates{"libcupti.so.13", "libcupti.so", site + "/nvidia/cu13/lib/libcupti.so.13",
                                        site + "/nvidia/cuda_cupti/lib/libcupti.so.13"};
    if (const char* home = std::getenv("CUDA_HOME")) {
      candidates.push_back(std::string(home) + "/extras/CUPTI/lib64/libcupti.so.13");
      candidates.push_back(std::string(home) + "/lib64/libcupti.so.13");
    }
    candidates.insert(candidates.end(), {"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                                         "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/lib/libcupti.so.13"});
    void* library = load_optional({"CUPTI", "CUWEAVE_CUPTI", "libcupti.so.13", "tracing on the GPU",
                                   "in the CUDA toolkit's extras/CUPTI or the nvidia-cuda-cupti package",
                                   "pip install nvidia-cuda-cupti"},
                                  candidates);
    auto* table = new Cupti;
    bind(library, "cuptiSubscribe", table->subscribe, "CUPTI");
    bind(library, "cuptiUnsubscribe", table->unsubscribe, "CUPTI");
    bind(library, "cuptiEnableDomain", table->enable_domain, "CUPTI");
    bind(library, "cuptiEnableCallback", table->enable_callback, "CUPTI");
    bind(library, "cuptiGetCallbackName", table->callback_name, "CUPTI");
    bind(library, "cuptiActivityEnable", table->activity_enable, "CUPTI");
    bind(library, "cuptiActivityDisable", table->activity_disable, "CUPTI");
    bind(library, "cuptiActivityRegisterCallbacks", table->register_callbacks, "CUPTI");
    bind(library, "cuptiActivityFlushAll", table->flush_all, "CUPTI");
    bind(library, "cuptiActivityGetNextRecord", table->next_record, "CUPTI");
    bind(library, "cuptiGetTimestamp", table->timestamp, "CUPTI");
    bind(library, "cuptiGetStreamIdEx", table->stream_id, "CUPTI");
    bind(library, "cuptiGetDeviceId", table->device_id, "CUPTI");
    bind(library, "cuptiGetResultString", table->result_string, "CUPTI");
    bind(library, "cuptiFinalize", table->finalize, "CUPTI");
    loaded = table;
  });
  return *loaded;
}

void check(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cupti().result_string(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  std::string message = std::string("CUPTI failed: ") + text;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    message += " (another CUDA tool holds CUPTI in this process, e.g. compute-sanitizer, Nsight Systems or "
               "a profiler: a cuweave trace cannot run beside it; use that tool's timeline, or run without it)";
  }
  throw BackendError(call, static_cast<int>(result), text, message, __FILE__, __LINE__);
}

constexpr CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
};

// CUWEAVE_TRACE_KEEP_CUPTI=1 leaves CUPTI attached between traces (see stop()).
bool detach_when_idle() {
  static const bool detach = [] {
    const char* keep = std::getenv("CUWEAVE_TRACE_KEEP_CUPTI");
    return keep == nullptr || std::strcmp(keep, "1") != 0;
  }();
  return detach;
}

// Counts subscriptions, so that per-thread state from an earlier one is not carried over.
std::atomic<std::uint64_t> subscriptions{0};

// What an API call is, for the tracer (by callback id).
enum class Call : char { Other, Work, GraphLaunch, EventRecord, StreamWait };

// The CUPTI id of a stream named in an API call: default streams are named by a null stream and a flag.
CUptiResult stream_id_of(CUcontext context, CUstream stream, bool per_thread_api, std::uint32_t* id) {
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  const bool legacy = handle == reinterpret_cast<std::uintptr_t>(CU_STREAM_LEGACY);
  const bool per_thread = handle == reinterpret_cast<std::uintptr_t>(CU_STREAM_PER_THREAD) ||
                          (stream == nullptr && per_thread_api);
  return cupti().stream_id(context, legacy || per_thread ? nullptr : stream, per_thread ? 1 : 0, id);
}

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

// A kernel's readable name. Remembered by its mangled name: demangling every record took microseconds, longer
// than a small kernel of a replayed graph runs, so completed buffers queued up faster than they were read (the
// process grew by the backlog). A kernel's name is compared by its text, not by CUPTI's pointer, which a module
// unloaded and another loaded could reuse. One cache per thread that CUPTI hands buffers to.
const std::string& demangled(const char* name) {
  static const std::string kNone;
  if (name == nullptr) return kNone;
  thread_local std::unordered_map<std::string, std::string> known;
  auto found = known.find(name);
  if (found != known.end()) return found->second;
  if (known.size() >= 4096) known.clear();  // a program generating kernels without end: keep it bounded
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && plain != nullptr ? std::string(plain) : std::string(name);
  std::free(plain);
  return known.emplace(name, std::move(result)).first->second;
}

// The fields every timed work record shares (kernels, copies, memsets; CUPTI's structs name them alike).
template <typename Record>
void take_timing(const Record& record, trace::Activity& activity, std::uint32_t& correlation, bool& graph_node) {
  activity.start_ns = record.start;
  activity.end_ns = record.end;
  activity.device = static_cast<int>(record.deviceId);
  activity.stream = record.streamId;
  correlation = record.correlationId;
  graph_node = record.graphNodeId != 0;
}

trace::Direction direction_of(std::uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return trace::Direction::HostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return trace::Direction::DeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return trace::Direction::DeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return trace::Direction::HostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return trace::Direction::PeerToPeer;
    default: return trace::Direction::None;
  }
}

// What the tracer knows about one API call that queued work.
struct Noted {
  trace::Origin origin;
  bool graph_launch = false;
  std::uint64_t launch_stream = 0;  // graph launches: the stream's CUPTI id
  bool launch_stream_known = false;
};

// The span of one graph replay, gathered from its nodes' records.
struct Replay {
  std::uint64_t start_ns = UINT64_MAX;
  std::uint64_t end_ns = 0;
  int device = 0;
  std::uint64_t stream = 0;
  std::size_t nodes = 0;
};

class CuptiTracer final : public Tracer {
 public:
  void start() override {
    attach();
    // Note [CUPTI's setup at the first work]: with activities just enabled, the first work submitted
    // afterwards took 3-4 ms longer (a 1 ms spin measured 4.0 ms by events, 1.0 ms by CUPTI; the first 64 MB
    // copy 6 ms instead of 1.9; H100, CUPTI 13.0), once per trace, whatever the kernel. Submitting a tiny
    // kernel and memset here moves that cost into opening the trace, out of the user's first operation.
    // (Work a capture would record is not submitted: the capture would be invalidated.)
    if (!Capture::any_active()) warm_up();
  }

  // Registers the buffers, subscribes to the API callbacks and enables the activity kinds.
  void attach() {
    const Cupti& api = cupti();
    std::lock_guard<std::mutex> lock(mutex_);
    // Once per CUPTI session: registering again while CUPTI still holds buffers (a trace that ended without a
    // finalize, as one does while the launch watch keeps CUPTI attached) would hand their ends to new books.
    if (!buffers_registered_.load(std::memory_order_acquire)) {
      check(api.register_callbacks(&CuptiTracer::buffer_requested, &CuptiTracer::buffer_completed),
            "cuptiActivityRegisterCallbacks");
      buffers_registered_.store(true, std::memory_order_release);
    }
    if (!subscribed_) {
      const CUptiResult subscribed = subscribe_locked(api);
      if (subscribed != CUPTI_SUCCESS && subscribed != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        check(subscribed, "cuptiSubscribe");
      }
    }
    if (subscribed_) {
      check(api.enable_domain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API), "cuptiEnableDomain");
      check(api.enable_domain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API), "cuptiEnableDomain");
    }
    for (CUpti_ActivityKind kind : kActivityKinds) check(api.activity_enable(kind), "cuptiActivityEnable");
    collecting_ = true;
  }

  void stop() noexcept override {
    const Cupti& api = cupti();
    bool detach = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (CUpti_ActivityKind kind : kActivityKinds) (void)api.activity_disable(kind);
      collecting_ = false;
      noted_.clear();
      replays_.clear();
      event_links_.clear();
      if (!subscribed_) return;
      if (watching_locked()) {  // the launch watch keeps the subscription, with its callbacks alone
        (void)api.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
        (void)api.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
        enable_launch_callbacks_locked(true);
        return;
      }
      // Detached, CUPTI leaves no trace in later API calls (Note [Tracing]: no cost while no trace is open).
      // The core calls stop() once the work is synchronized and the buffers flushed, as cuptiFinalize asks.
      detach = detach_when_idle();
      if (!detach) {
        unsubscribe_locked();
        return;
      }
    }
    detach_from_a_callback();
  }

  // Note [Detaching CUPTI from a callback]: cuptiFinalize called from a plain call raced other threads'
  // CUDA calls: 1 run in ~10 of the two-thread tracing test aborted in a native thread (H100, CUPTI 13.0).
  // CUPTI's documented way ("dynamic detach") is to call it from an API callback's exit site, where CUPTI
  // has the calling threads in hand; so stop() asks for it and makes a runtime call itself. Whichever thread
  // reaches an exit site first finalizes (finalizing also unsubscribes), and stop() returns once that is done,
  // so that a trace opened next attaches afresh. If no callback comes (CUPTI already detached by another
  // tool), the subscription is ended the plain way.
  void detach_from_a_callback() noexcept {
    detach_state_.store(kDetachRequested, std::memory_order_release);
    int device = 0;
    (void)cudaGetDevice(&device);  // its exit callback finalizes, unless another thread's came first
    std::unique_lock<std::mutex> lock(detach_mutex_);
    detached_.wait_for(lock, std::chrono::seconds(2),
                       [&] { return detach_state_.load(std::memory_order_acquire) == kDetachIdle; });
    int expected = kDetachRequested;
    if (detach_state_.compare_exchange_strong(expected, kDetachIdle, std::memory_order_acq_rel)) {
      lock.unlock();
      std::lock_guard<std::mutex> state(mutex_);
      unsubscribe_locked();
      return;
    }
    // Finalizing in another thread: wait for it to finish.
    detached_.wait(lock, [&] { return detach_state_.load(std::memory_order_acquire) == kDetachIdle; });
  }

  // Ends the API callbacks and the subscription, leaving CUPTI attached; lets another tool subscribe once no
  // trace is open. LOCK: mutex_ held.
  void unsubscribe_locked() noexcept {
    const Cupti& api = cupti();
    (void)api.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API);
    (void)api.enable_domain(0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API);
    (void)api.unsubscribe(subscriber_);
    subscribed_.store(false, std::memory_order_release);
  }

  // LOCK: mutex_ held.
  CUptiResult subscribe_locked(const Cupti& api) {
    const CUptiResult subscribed = api.subscribe(&subscriber_, &CuptiTracer::on_api_call, nullptr);
    subscribed_.store(subscribed == CUPTI_SUCCESS, std::memory_order_release);
    if (subscribed == CUPTI_SUCCESS) {
      subscriptions.fetch_add(1, std::memory_order_relaxed);
      classify_calls(api);
    }
    return subscribed;
  }

  void watch_launches(std::shared_ptr<ForeignLaunches> watcher) override {
    const Cupti& api = cupti();
    std::shared_ptr<ForeignLaunches> previous;  // let go after the locks: its owner may need them to end
    {
      std::lock_guard<std::mutex> lock(mutex_);
      {
        std::lock_guard<std::mutex> launches(launch_mutex_);
        previous = std::move(watcher_);
        watcher_ = watcher;
        verdicts_.clear();
        watching_.store(watcher_ != nullptr, std::memory_order_release);
      }
      if (watcher) {
        if (!subscribed_) check(subscribe_locked(api), "cuptiSubscribe");
        check(enable_launch_callbacks_locked(true), "cuptiEnableCallback");
        return;
      }
      // An open trace keeps the subscription, and its stop() ends it. Otherwise it ends here, leaving CUPTI
      // attached: sanitize() blocks come and go, and each detach and attach would be a CUPTI finalize and setup.
      if (!subscribed_ || collecting_) return;
      (void)enable_launch_callbacks_locked(false);
      unsubscribe_locked();
    }
  }

  // At an API exit site, with a detach asked for: finalize CUPTI (Note [Detaching CUPTI from a callback]).
  void finalize_if_asked() noexcept {
    int expected = kDetachRequested;
    if (!detach_state_.compare_exchange_strong(expected, kDetachFinalizing, std::memory_order_acq_rel)) return;
    subscribed_.store(false, std::memory_order_release);
    (void)cupti().finalize();
    buffers_registered_.store(false, std::memory_order_release);  // a finalized CUPTI forgets them
    {
      std::lock_guard<std::mutex> lock(detach_mutex_);
      detach_state_.store(kDetachIdle, std::memory_order_release);
    }
    detached_.notify_all();
  }

  void flush() override {
    check(cupti().flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    deliver_replays();
  }

  std::uint64_t now_ns() override {
    std::uint64_t now = 0;
    check(cupti().timestamp(&now), "cuptiGetTimestamp");
    return now;
  }

  std::uint64_t stream_id(StreamHandle stream, int device) override {
    int previous = 0;
    CUWEAVE_CUDA_TRY(cudaGetDevice(&previous));
    if (previous != device) CUWEAVE_CUDA_TRY(cudaSetDevice(device));
    CUWEAVE_CUDA_TRY(cudaFree(nullptr));  // makes the device's primary context current
    CUcontext context = nullptr;          // the context whose default streams `stream` may name
    CUWEAVE_DRIVER_TRY(driver().context_get_current(&context));
    std::uint32_t id = 0;
    const CUptiResult result = stream_id_of(context, static_cast<CUstream>(stream), false, &id);
    if (previous != device) CUWEAVE_CUDA_TRY_QUIET(cudaSetDevice(previous));
    check(result, "cuptiGetStreamIdEx");
    return id;
  }

  static CuptiTracer& instance() {
    static auto* tracer = new CuptiTracer;  // leaked: CUPTI may call back until the process ends
    return *tracer;
  }

  // cuweave's own launch on `stream`, as it is made (tell_own_launch).
  static void own_launch(StreamHandle stream) noexcept {
    if (placing() && instance().watching_.load(std::memory_order_acquire)) {
      ForeignPlacement::this_thread().unmoved(stream);
    }
  }

 private:
  // The driver's launch calls the watch turns on: all but cuweave's own (Note [cuweave's launches beside the
  // launch watch]).
  static constexpr CUpti_CallbackId kWatchedLaunchCalls[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,           CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
  };
  static constexpr CUpti_CallbackId kOwnLaunchCall = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz;

  static bool driver_launch(CUpti_CallbackId cbid) {
    return cbid == kOwnLaunchCall || one_of(kWatchedLaunchCalls, cbid);
  }

  // The runtime's launches: their kernels' parameters are not read (they are no kernels CuPy compiled), but
  // the watcher is asked about each kernel, to say which ones it cannot see.
  static constexpr CUpti_CallbackId kRuntimeLaunchCalls[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
  };

  // The runtime's copies, told to the watcher as other libraries' (Note [cuweave's own runtime calls]), and its
  // memsets (CuPy's zeros), told only as unmoved work while a weave places other libraries' work.
  static constexpr CUpti_CallbackId kRuntimeCopyCalls[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
  };
  static constexpr CUpti_CallbackId kRuntimeMemsetCalls[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
  };

  // The runtime's event records and stream waits: another library's (cuweave makes its own through the driver).
  static constexpr CUpti_CallbackId kRuntimeRecordCalls[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010,
  };
  static constexpr CUpti_CallbackId kRuntimeWaitCalls[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000,
  };

  // The runtime's synchronizes, told at their exit: another library's (Note [cuweave's own runtime calls]).
  static constexpr CUpti_CallbackId kRuntimeSynchronizeCalls[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
  };

  template <std::size_t N>
  static bool one_of(const CUpti_CallbackId (&calls)[N], CUpti_CallbackId cbid) {
    return std::find(std::begin(calls), std::end(calls), cbid) != std::end(calls);
  }

  // LOCK: mutex_ held, subscribed.
  CUptiResult enable_launch_callbacks_locked(bool on) {
    struct Calls {
      CUpti_CallbackDomain domain;
      const CUpti_CallbackId* begin;
      const CUpti_CallbackId* end;
    };
    const Calls watched[] = {
        {CUPTI_CB_DOMAIN_DRIVER_API, std::begin(kWatchedLaunchCalls), std::end(kWatchedLaunchCalls)},
        {CUPTI_CB_DOMAIN_RUNTIME_API, std::begin(kRuntimeLaunchCalls), std::end(kRuntimeLaunchCalls)},
        {CUPTI_CB_DOMAIN_RUNTIME_API, std::begin(kRuntimeCopyCalls), std::end(kRuntimeCopyCalls)},
        {CUPTI_CB_DOMAIN_RUNTIME_API, std::begin(kRuntimeMemsetCalls), std::end(kRuntimeMemsetCalls)},
        {CUPTI_CB_DOMAIN_RUNTIME_API, std::begin(kRuntimeRecordCalls), std::end(kRuntimeRecordCalls)},
        {CUPTI_CB_DOMAIN_RUNTIME_API, std::begin(kRuntimeWaitCalls), std::end(kRuntimeWaitCalls)},
        {CUPTI_CB_DOMAIN_RUNTIME_API, std::begin(kRuntimeSynchronizeCalls), std::end(kRuntimeSynchronizeCalls)},
    };
    for (const Calls& calls : watched) {
      for (const CUpti_CallbackId* cbid = calls.begin; cbid != calls.end; ++cbid) {
        const CUptiResult result = cupti().enable_callback(on ? 1 : 0, subscriber_, calls.domain, *cbid);
        if (result != CUPTI_SUCCESS) return result;
      }
    }
    return CUPTI_SUCCESS;
  }

  // LOCK: mutex_ held.
  bool watching_locked() {
    std::lock_guard<std::mutex> launches(launch_mutex_);
    return watcher_ != nullptr;
  }

  // What the watcher said of one kernel (Note [Kernels other libraries launch]).
  struct Verdict {
    bool wanted = false;
    std::string name;
    std::uintptr_t module = 0;
    std::vector<std::size_t> sizes;  // each parameter's bytes
  };

  void place_foreign_work(bool on) noexcept override {
    placing() = on;
  }

  // Whether this thread's weave places other libraries' work (Note [Other libraries' kernels in a weave]).
  static bool& placing() {
    thread_local bool on = false;
    return on;
  }
  // Tells `watcher` of work left on `stream` while this thread places other libraries' work (the watcher keeps
  // which streams launches were moved off).
  static void tell_unmoved(ForeignLaunches& watcher, CUstream stream) noexcept {
    if (placing()) watcher.unmoved(reinterpret_cast<StreamHandle>(stream));
  }

  // The watcher of a launch a weave moved (Note [Other libraries' kernels in a weave]), from its entry site to its
  // exit, on the launching thread: launches do not nest.
  static std::shared_ptr<ForeignLaunches>& moved_launch() {
    thread_local std::shared_ptr<ForeignLaunches> watcher;
    return watcher;
  }

  // Where a driver launch's kernel, parameter values and stream lie in what its entry site is handed.
  struct LaunchParameters {
    CUfunction function = nullptr;
    CUstream stream = nullptr;
    CUstream* stream_parameter = nullptr;  // where the call's stream lies, for a launch the weave may move
    void** values = nullptr;
  };
  static LaunchParameters launch_parameters(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    LaunchParameters launch;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
      // Its stream lies in the caller's launch configuration, which is not the callback's to change.
      const auto* params = static_cast<const cuLaunchKernelEx_params*>(call.functionParams);  // _ptsz: same fields
      launch.function = params->f;
      launch.stream = params->config != nullptr ? params->config->hStream : nullptr;
      launch.values = params->kernelParams;
    } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
      // The parameters CUPTI hands the entry site are the ones the call goes on with: a stream written there is
      // the one the kernel runs on (tools/probes/cupti_launch_stream_probe.cu).
      auto* params = static_cast<cuLaunchKernel_params*>(const_cast<void*>(call.functionParams));
      launch.function = params->f;
      launch.stream = params->hStream;
      launch.stream_parameter = &params->hStream;
      launch.values = params->kernelParams;
    } else {
      auto* params = static_cast<cuLaunchCooperativeKernel_params*>(const_cast<void*>(call.functionParams));
      launch.function = params->f;
      launch.stream = params->hStream;
      launch.stream_parameter = &params->hStream;
      launch.values = params->kernelParams;
    }
    // The per-thread API's null stream is the thread's own default stream.
    launch.stream = called_stream(call, launch.stream);
    return launch;
  }

  // Another library's driver launch, at its entry site, while the launch watch is on.
  void watch_launch(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    if (call.functionParams == nullptr) return;
    const auto [function, stream, stream_parameter, values] = launch_parameters(call, cbid);
    std::shared_ptr<ForeignLaunches> watcher;
    const std::shared_ptr<const Verdict> verdict = verdict_of(function, function, call.symbolName, watcher);
    if (!verdict || !verdict->wanted) {
      if (watcher) tell_unmoved(*watcher, stream);
      return;
    }
    std::vector<std::string> parameters;
    if (values != nullptr) {  // null: the launch packed them in `extra`, which the watcher is told as none
      parameters.reserve(verdict->sizes.size());
      for (std::size_t i = 0; i < verdict->sizes.size(); ++i) {
        parameters.emplace_back(static_cast<const char*>(values[i]), verdict->sizes[i]);
      }
    }
    const bool movable = stream_parameter != nullptr && placing();
    const StreamHandle placed = watcher->launched(verdict->name.c_str(), verdict->module,
                                                  reinterpret_cast<StreamHandle>(stream), movable, parameters);
    if (placed == nullptr || !movable || placed == reinterpret_cast<StreamHandle>(stream)) {
      tell_unmoved(*watcher, stream);
      return;
    }
    *stream_parameter = static_cast<CUstream>(placed);
    moved_launch() = std::move(watcher);
  }

  // A driver launch, at its exit site: one the weave moved leaves its called stream following the placed one.
  static void launch_returned() noexcept {
    const std::shared_ptr<ForeignLaunches> watcher = std::exchange(moved_launch(), nullptr);
    if (watcher) watcher->launch_queued();
  }

  // A runtime launch, at its entry site, while the launch watch is on: the watcher hears of its kernel once.
  void watch_runtime_launch(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    if (call.functionParams == nullptr) return;
    const bool extended = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 ||
                          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060;
    const void* func = extended ? static_cast<const cudaLaunchKernelExC_v11060_params*>(call.functionParams)->func
                                : static_cast<const cudaLaunchKernel_v7000_params*>(call.functionParams)->func;
    std::shared_ptr<ForeignLaunches> watcher;
    (void)verdict_of(func, nullptr, call.symbolName, watcher);
  }

  // The watcher now, or null once the watch has ended.
  std::shared_ptr<ForeignLaunches> current_watcher() {
    std::lock_guard<std::mutex> launches(launch_mutex_);
    return watcher_;
  }

  // The stream a call names: the null stream of the per-thread API is the calling thread's own default stream.
  static CUstream called_stream(const CUpti_CallbackData& call, CUstream stream) {
    return stream == nullptr && per_thread_api(call) ? CU_STREAM_PER_THREAD : stream;
  }

  // A runtime copy of another library's, at its entry site, while the launch watch is on.
  void watch_copy(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    if (call.functionParams == nullptr) return;
    void* destination = nullptr;
    const void* source = nullptr;
    std::size_t bytes = 0;
    cudaStream_t stream = nullptr;  // the synchronous copies: the legacy default stream, or the thread's own
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 ||
        cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000) {
      const auto* params = static_cast<const cudaMemcpyAsync_v3020_params*>(call.functionParams);  // _ptsz: same
      destination = params->dst;
      source = params->src;
      bytes = params->count;
      stream = params->stream;
    } else {
      const auto* params = static_cast<const cudaMemcpy_v3020_params*>(call.functionParams);  // _ptds: same
      destination = params->dst;
      source = params->src;
      bytes = params->count;
    }
    if (bytes == 0) return;
    stream = called_stream(call, stream);
    const std::shared_ptr<ForeignLaunches> watcher = current_watcher();
    if (!watcher) return;
    watcher->copied(call.functionName != nullptr ? call.functionName : "cudaMemcpy",
                    reinterpret_cast<std::uintptr_t>(destination), memory_of(destination),
                    reinterpret_cast<std::uintptr_t>(source), memory_of(source), bytes,
                    reinterpret_cast<StreamHandle>(stream));
    tell_unmoved(*watcher, static_cast<CUstream>(stream));
  }

  // A runtime event record or stream wait of another library's, at its entry site, while the launch watch is on.
  void watch_ordering(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    if (call.functionParams == nullptr) return;
    const std::shared_ptr<ForeignLaunches> watcher = current_watcher();
    if (!watcher) return;
    auto stream_of = [&call](cudaStream_t stream) {
      return reinterpret_cast<StreamHandle>(called_stream(call, stream));
    };
    if (one_of(kRuntimeRecordCalls, cbid)) {  // cudaEventRecordWithFlags' parameters begin as cudaEventRecord's
      const auto* params = static_cast<const cudaEventRecord_v3020_params*>(call.functionParams);
      watcher->event_recorded(static_cast<EventHandle>(params->event), stream_of(params->stream));
    } else {
      const auto* params = static_cast<const cudaStreamWaitEvent_v3020_params*>(call.functionParams);
      watcher->stream_waited(stream_of(params->stream), static_cast<EventHandle>(params->event));
      tell_unmoved(*watcher, static_cast<CUstream>(stream_of(params->stream)));
    }
  }

  // A runtime memset of another library's, at its entry site, while this thread's weave places their work.
  void watch_memset(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    const std::shared_ptr<ForeignLaunches> watcher = current_watcher();
    if (!watcher) return;
    cudaStream_t stream = nullptr;  // the synchronous memsets: the legacy default stream, or the thread's own
    if (call.functionParams != nullptr && (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020 ||
                                           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000)) {
      stream = static_cast<const cudaMemsetAsync_v3020_params*>(call.functionParams)->stream;  // _ptsz: same
    }
    tell_unmoved(*watcher, called_stream(call, stream));
  }

  // A runtime synchronize of another library's, at its exit site, while the launch watch is on: told if it
  // succeeded.
  void watch_synchronize(const CUpti_CallbackData& call, CUpti_CallbackId cbid) noexcept {
    const auto* result = static_cast<const cudaError_t*>(call.functionReturnValue);
    if (result == nullptr || *result != cudaSuccess) return;
    const std::shared_ptr<ForeignLaunches> watcher = current_watcher();
    if (!watcher) return;
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020) {
      int device = 0;
      if (cudaGetDevice(&device) == cudaSuccess) watcher->device_synchronized(device);
    } else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020) {
      if (call.functionParams == nullptr) return;
      const auto* params = static_cast<const cudaEventSynchronize_v3020_params*>(call.functionParams);
      watcher->event_synchronized(static_cast<EventHandle>(params->event));
    } else {
      if (call.functionParams == nullptr) return;
      const auto* params = static_cast<const cudaStreamSynchronize_v3020_params*>(call.functionParams);  // _ptsz
      watcher->stream_synchronized(reinterpret_cast<StreamHandle>(called_stream(call, params->stream)));
    }
  }

  static ForeignLaunches::Memory memory_of(const void* pointer) noexcept {
    switch (pointer_attributes(pointer).type) {
      case cudaMemoryTypeDevice:
      case cudaMemoryTypeManaged: return ForeignLaunches::Memory::Device;
      case cudaMemoryTypeHost: return ForeignLaunches::Memory::PinnedHost;
      default: return ForeignLaunches::Memory::PageableHost;
    }
  }

  // The watcher's verdict on the kernel of a launch (`key`: its CUfunction, or the runtime's host function),
  // asked at the kernel's first launch; null when the watch has ended.
  std::shared_ptr<const Verdict> verdict_of(const void* key, CUfunction function, const char* symbol,
                                            std::shared_ptr<ForeignLaunches>& watcher) noexcept {
    {
      std::lock_guard<std::mutex> launches(launch_mutex_);
      watcher = watcher_;
      if (!watcher) return nullptr;
      auto found = verdicts_.find(key);
      if (found != verdicts_.end()) return found->second;
    }
    auto verdict = std::make_shared<Verdict>();
    const char* name = symbol;
    if (name == nullptr && (function == nullptr || driver().function_name(&name, function) != CUDA_SUCCESS)) {
      name = nullptr;
    }
    verdict->name = demangled(name);  // the watcher's warnings name kernels as users read them
    CUmodule module = nullptr;
    if (function != nullptr && driver().function_module(&module, function) == CUDA_SUCCESS) {
      verdict->module = reinterpret_cast<std::uintptr_t>(module);
    }
    if (module == nullptr || !loaded_by_cuweave(module)) {
      verdict->wanted = watcher->wants(verdict->name.c_str(), verdict->module);
    }
    for (std::size_t i = 0; verdict->wanted && function != nullptr; ++i) {
      std::size_t offset = 0, size = 0;
      if (driver().function_parameter(function, i, &offset, &size) != CUDA_SUCCESS) break;  // past the last one
      verdict->sizes.push_back(size);
    }
    if (function == nullptr) verdict->wanted = false;  // a runtime launch: its parameters are not read
    std::lock_guard<std::mutex> launches(launch_mutex_);
    if (watcher_ == watcher) verdicts_[key] = verdict;
    return verdict;
  }

  // What each API call is (by callback id, per domain).
  void classify_calls(const Cupti& api) {
    if (!calls_[0].empty()) return;
    struct Prefix {
      const char* text;
      Call call;
    };
    auto classify = [&](CUpti_CallbackDomain domain, std::size_t count, std::vector<Call>& calls,
                        std::initializer_list<Prefix> prefixes) {
      calls.assign(count, Call::Other);
      for (std::size_t cbid = 0; cbid < count; ++cbid) {
        const char* name = nullptr;
        if (api.callback_name(domain, static_cast<std::uint32_t>(cbid), &name) != CUPTI_SUCCESS || !name) continue;
        for (const Prefix& prefix : prefixes) {
          if (std::strncmp(name, prefix.text, std::strlen(prefix.text)) == 0) calls[cbid] = prefix.call;
        }
      }
    };
    classify(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, calls_[0],
             {{"cudaLaunch", Call::Work}, {"cudaMemcpy", Call::Work}, {"cudaMemset", Call::Work},
              {"cudaGraphLaunch", Call::GraphLaunch}, {"cudaEventRecord", Call::EventRecord},
              {"cudaStreamWaitEvent", Call::StreamWait}});
    classify(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, calls_[1],
             {{"cuLaunch", Call::Work}, {"cuMemcpy", Call::Work}, {"cuMemset", Call::Work},
              {"cuGraphLaunch", Call::GraphLaunch}, {"cuEventRecord", Call::EventRecord},
              {"cuStreamWaitEvent", Call::StreamWait}});
  }

  static void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    // Runtime calls run driver calls inside: the record or wait they make is delivered once, as the runtime's.
    // The depth counts from this thread's first call since the subscription (`generation`).
    thread_local int runtime_depth = 0;
    thread_local std::uint64_t depth_generation = 0;
    const std::uint64_t generation = subscriptions.load(std::memory_order_relaxed);
    if (depth_generation != generation) {
      depth_generation = generation;
      runtime_depth = 0;
    }
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    if (runtime && call->callbackSite == CUPTI_API_EXIT) {
      if (runtime_depth > 0) --runtime_depth;
      if (one_of(kRuntimeSynchronizeCalls, cbid) && !OwnCall::active() &&
          instance().watching_.load(std::memory_order_acquire)) {
        instance().watch_synchronize(*call, cbid);
      }
      if (instance().detach_state_.load(std::memory_order_acquire) == kDetachRequested) instance().finalize_if_asked();
      return;
    }
    if (call->callbackSite != CUPTI_API_ENTER) {
      if (domain == CUPTI_CB_DOMAIN_DRIVER_API && driver_launch(cbid)) launch_returned();
      return;
    }
    if (runtime) ++runtime_depth;
    CuptiTracer& self = instance();
    // A launch inside a runtime call is that library's own (PyTorch's kernels), told by its hooks if at all; the
    // depth is counted only while a trace has the runtime's callbacks on.
    // cuweave's own launches reach here only while a trace has every callback on: they are passed over (the core
    // tells the sanitizer and the weave of them; Note [cuweave's launches beside the launch watch]).
    if (self.watching_.load(std::memory_order_acquire)) {
      if (domain == CUPTI_CB_DOMAIN_DRIVER_API && driver_launch(cbid) &&
          (runtime_depth == 0 || !trace::active())) {
        if (!OwnCall::active()) self.watch_launch(*call, cbid);
      } else if (runtime && one_of(kRuntimeLaunchCalls, cbid)) {
        self.watch_runtime_launch(*call, cbid);  // cuweave's own launches all go through the driver
      } else if (runtime && one_of(kRuntimeCopyCalls, cbid) && !OwnCall::active()) {
        self.watch_copy(*call, cbid);
      } else if (runtime && one_of(kRuntimeMemsetCalls, cbid) && placing() && !OwnCall::active()) {
        self.watch_memset(*call, cbid);
      } else if (runtime && (one_of(kRuntimeRecordCalls, cbid) || one_of(kRuntimeWaitCalls, cbid)) &&
                 !OwnCall::active()) {
        self.watch_ordering(*call, cbid);
      }
    }
    if (!trace::active()) return;
    const std::vector<Call>& calls = self.calls_[runtime ? 0 : 1];
    if ((!runtime && domain != CUPTI_CB_DOMAIN_DRIVER_API) || cbid >= calls.size()) return;
    const Call kind = calls[cbid];
    if (kind == Call::Other) return;
    const bool nested = !runtime && runtime_depth > 0;
    if (nested && (kind == Call::EventRecord || kind == Call::StreamWait)) return;
    trace::Origin origin = trace::current_origin();
    if (!origin) return;
    if (kind == Call::EventRecord || kind == Call::StreamWait) {
      self.deliver_event_call(*call, kind, std::move(origin));
      return;
    }
    Noted noted{std::move(origin)};
    if (kind == Call::GraphLaunch && call->functionParams != nullptr) {
      // Every graph launch's parameters start with (exec, stream), in both APIs.
      struct ExecAndStream {
        void* exec;
        CUstream stream;
      };
      const auto* params = static_cast<const ExecAndStream*>(call->functionParams);
      std::uint32_t id = 0;
      noted.graph_launch = true;
      noted.launch_stream_known =
          stream_id_of(call->context, params->stream, per_thread_api(*call), &id) == CUPTI_SUCCESS;
      noted.launch_stream = id;
    }
    std::lock_guard<std::mutex> lock(self.mutex_);
    if (self.collecting_) self.noted_.emplace(call->correlationId, std::move(noted));
  }

  // One memset and one tiny kernel per device, on a stream of their own, waited for.
  static void warm_up() {
    static std::mutex mutex;
    static std::unordered_map<int, void*> scratch;  // LOCK: mutex; 16 bytes per device, kept for later traces
    int count = 0, previous = 0;
    CUWEAVE_CUDA_TRY(cudaGetDeviceCount(&count));
    CUWEAVE_CUDA_TRY(cudaGetDevice(&previous));
    std::lock_guard<std::mutex> lock(mutex);
    for (int device = 0; device < count; ++device) {
      CUWEAVE_CUDA_TRY(cudaSetDevice(device));
      void*& bytes = scratch[device];
      if (bytes == nullptr) CUWEAVE_CUDA_TRY(cudaMalloc(&bytes, 16));
      cudaStream_t stream = nullptr;
      CUWEAVE_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      const std::uint32_t zero = 0;
      cudaError_t status = cudaMemsetAsync(bytes, 0, 16, stream);
      if (status == cudaSuccess) status = launch_fill(bytes, 4, &zero, sizeof(zero), stream);
      if (status == cudaSuccess) {
        const OwnCall own;  // Note [cuweave's own runtime calls]
        status = cudaStreamSynchronize(stream);
      }
      CUWEAVE_CUDA_TRY_QUIET(cudaStreamDestroy(stream));
      CUWEAVE_CUDA_TRY(status);
    }
    CUWEAVE_CUDA_TRY(cudaSetDevice(previous));
  }

  static bool per_thread_api(const CUpti_CallbackData& call) {
    return call.functionName != nullptr &&
           (std::strstr(call.functionName, "_ptsz") != nullptr || std::strstr(call.functionName, "_ptds") != nullptr);
  }

  // An event record or stream wait, as an activity of its own (see the Note).
  void deliver_event_call(const CUpti_CallbackData& call, Call kind, trace::Origin origin) {
    if (call.functionParams == nullptr) return;
    // Records take (event, stream, ...) and waits (stream, event, ...), in both APIs.
    struct TwoHandles {
      void* first;
      void* second;
    };
    const auto* params = static_cast<const TwoHandles*>(call.functionParams);
    const bool record = kind == Call::EventRecord;
    void* event = record ? params->first : params->second;
    auto* stream = static_cast<CUstream>(record ? params->second : params->first);
    std::uint32_t stream_id = 0, device = 0;
    if (stream_id_of(call.context, stream, per_thread_api(call), &stream_id) != CUPTI_SUCCESS) return;
    if (cupti().device_id(call.context, &device) != CUPTI_SUCCESS) return;
    trace::Activity activity;
    activity.kind = record ? trace::Kind::EventRecord : trace::Kind::EventWait;
    activity.device = static_cast<int>(device);
    activity.stream = stream_id;
    activity.correlation = call.correlationId;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!collecting_) return;
      if (record) {
        activity.link = event_links_[event] = ++links_;
      } else {
        auto it = event_links_.find(event);
        activity.link = it != event_links_.end() ? it->second : 0;  // 0: recorded before the trace opened
      }
    }
    trace::deliver(origin, std::move(activity));
  }

  // Buffers are mapped and unmapped, not malloc'ed: once one 8 MB block is freed, glibc serves blocks of that size
  // from its heap and keeps them there, so a burst of records would leave the process at its peak backlog for
  // good (seen: 55 to 95 MB kept after a million-kernel trace on an H200).
  static void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    void* mapped = mmap(nullptr, kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *buffer = mapped == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(mapped);  // none: CUPTI drops records
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                                        std::size_t valid) {
    CuptiTracer& self = instance();
    CUpti_Activity* record = nullptr;
    while (valid > 0 && cupti().next_record(buffer, valid, &record) == CUPTI_SUCCESS) self.convert(*record);
    if (buffer != nullptr) munmap(buffer, kBufferBytes);
  }

  // The origin of a record's API call (or, without the subscription, every open trace); empty if none.
  bool origin_of(std::uint32_t correlation, Noted& noted) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = noted_.find(correlation);
    if (it == noted_.end()) return false;
    noted = it->second;
    return true;
  }

  void convert(const CUpti_Activity& record) {
    trace::Activity activity;
    std::uint32_t correlation = 0;
    bool graph_node = false;
    switch (record.kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto& kernel = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
        activity.kind = trace::Kind::Kernel;
        activity.name = demangled(kernel.name);
        take_timing(kernel, activity, correlation, graph_node);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& copy = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
        activity.kind = trace::Kind::Copy;
        activity.direction = direction_of(copy.copyKind);
        activity.bytes = copy.bytes;
        take_timing(copy, activity, correlation, graph_node);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto& copy = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4&>(record);
        activity.kind = trace::Kind::Copy;
        activity.direction = trace::Direction::PeerToPeer;
        activity.name = "device " + std::to_string(copy.srcDeviceId) + " to device " + std::to_string(copy.dstDeviceId);
        activity.bytes = copy.bytes;
        take_timing(copy, activity, correlation, graph_node);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& memset = reinterpret_cast<const CUpti_ActivityMemset4&>(record);
        activity.kind = trace::Kind::Memset;
        activity.bytes = memset.bytes;
        take_timing(memset, activity, correlation, graph_node);
        break;
      }
      default:
        return;
    }
    activity.correlation = correlation;
    activity.graph_node = graph_node;
    Noted noted;
    if (!origin_of(correlation, noted)) {
      if (subscribed_.load(std::memory_order_acquire) || !trace::active()) return;
      noted.origin = trace::every_open_trace();
      if (!noted.origin) return;
    }
    if (graph_node && noted.graph_launch) note_replay_node(correlation, activity, noted);
    trace::deliver(noted.origin, std::move(activity));
  }

  void note_replay_node(std::uint32_t correlation, const trace::Activity& node, const Noted& noted) {
    std::lock_guard<std::mutex> lock(mutex_);
    Replay& replay = replays_[correlation];
    replay.start_ns = std::min(replay.start_ns, node.start_ns);
    replay.end_ns = std::max(replay.end_ns, node.end_ns);
    replay.device = node.device;
    replay.stream = noted.launch_stream_known ? noted.launch_stream : node.stream;
    ++replay.nodes;
  }

  void deliver_replays() {
    std::unordered_map<std::uint32_t, Replay> replays;
    std::unordered_map<std::uint32_t, Noted> noted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      replays.swap(replays_);
      for (const auto& [correlation, replay] : replays) {
        auto it = noted_.find(correlation);
        if (it != noted_.end()) noted.emplace(correlation, it->second);
      }
    }
    for (const auto& [correlation, replay] : replays) {
      auto it = noted.find(correlation);
      if (it == noted.end()) continue;
      trace::Activity activity;
      activity.kind = trace::Kind::Graph;
      activity.name = "graph (" + std::to_string(replay.nodes) + " nodes)";
      activity.start_ns = replay.start_ns;
      activity.end_ns = replay.end_ns;
      activity.device = replay.device;
      activity.stream = replay.stream;
      activity.correlation = correlation;
      trace::deliver(it->second.origin, std::move(activity));
    }
  }

  std::mutex mutex_;
  bool collecting_ = false;                             // LOCK: mutex_
  std::atomic<bool> buffers_registered_{false};         // since CUPTI's last finalize
  static constexpr int kDetachIdle = 0, kDetachRequested = 1, kDetachFinalizing = 2;
  std::atomic<int> detach_state_{kDetachIdle};  // Note [Detaching CUPTI from a callback]
  std::mutex detach_mutex_;                     // with detached_: waits for a finalize to finish
  std::condition_variable detached_;
  std::atomic<bool> subscribed_{false};                 // written under mutex_ by start/stop
  CUpti_SubscriberHandle subscriber_ = nullptr;         // LOCK: mutex_
  std::vector<Call> calls_[2];                          // runtime, driver; written once, before the first subscription
  std::unordered_map<std::uint32_t, Noted> noted_;      // LOCK: mutex_
  std::unordered_map<std::uint32_t, Replay> replays_;   // LOCK: mutex_
  std::unordered_map<void*, std::uint64_t> event_links_;  // LOCK: mutex_; an event's latest traced recording
  std::uint64_t links_ = 0;                               // LOCK: mutex_
  std::mutex launch_mutex_;                               // after mutex_ where both are held
  std::shared_ptr<ForeignLaunches> watcher_;              // LOCK: launch_mutex_
  std::unordered_map<const void*, std::shared_ptr<const Verdict>> verdicts_;  // LOCK: launch_mutex_
  std::atomic<bool> watching_{false};                     // watcher_ is set
};

}  // namespace

Tracer& cupti_tracer() { return CuptiTracer::instance(); }

void tell_own_launch(StreamHandle stream) noexcept { CuptiTracer::own_launch(stream); }

}  // namespace cuweave::cuda
