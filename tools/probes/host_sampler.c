// Found (one H200, driver 580.159.04): woven, the wide DAG's compiled spins (8 chains in turn, empty kernels)
// spend 5.6% of the process's samples in placement (Weave::place and its callers, about 0.4 µs an operation),
// 2-4% in moving arrays' frees between streams (DeviceArray::uses_on, LifetimeTracker) and 58% in cuLaunchKernel;
// by hand, 76% in cuLaunchKernel and no moves. Sampling the wall clock (HOST_SAMPLER_WALL=1), 20 µs spins: the
// placement alone, 7.1% of the woven side's samples, is more than the sides' whole difference (+5.9%), and
// cuLaunchKernel takes as many samples on both (wide_dag_sampled_probe.py). Cited by: the weave benchmark's
// wide-DAG rows.
//
// A sampling profiler for the GPU machine, which has no perf: preloaded, it takes a backtrace of whichever
// thread SIGPROF lands on every 200 µs of the process's CPU time while sampling is on, and at exit writes one
// line a sample, each frame as module+offset. host_sampler_report.py names the frames (addr2line) and counts
// them, self and inclusive. Build cuweave with -C cmake.build-type=RelWithDebInfo for its names.
//
//   gcc -O2 -shared -fPIC -o /tmp/host_sampler.so tools/probes/host_sampler.c -ldl -lrt
//   SAMPLER_OUT=/tmp/samples.txt LD_PRELOAD=/tmp/host_sampler.so python3 program.py
//   python3 tools/probes/host_sampler_report.py /tmp/samples.txt
//
// The program may call host_sampler_set(0 or 1) (ctypes.CDLL(None).host_sampler_set) to sample one part only;
// sampling is on from the start unless HOST_SAMPLER_OFF is set. ITIMER_PROF fires at the kernel's tick (every 4 ms
// on the GPU machine, whatever the interval asked): HOST_SAMPLER_WALL=1 samples the main thread every 50 µs of wall
// time instead (a POSIX timer signalling that thread), for a thread that keeps the CPU busy.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define DEPTH 40
#define MAX_SAMPLES 200000

static void* samples[MAX_SAMPLES][DEPTH];
static int depths[MAX_SAMPLES];
static volatile int count = 0;
static volatile int sampling = 0;

static void on_signal(int signal_number) {
  (void)signal_number;
  if (!sampling || count >= MAX_SAMPLES) return;
  const int i = count;
  count = i + 1;
  depths[i] = backtrace(samples[i], DEPTH);
}

__attribute__((constructor)) static void start(void) {
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder now: the first call allocates, which a signal handler must not
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &action, 0);
  if (getenv("HOST_SAMPLER_WALL") != 0) {
    struct sigevent to_main;
    memset(&to_main, 0, sizeof to_main);
    to_main.sigev_notify = SIGEV_THREAD_ID;
    to_main.sigev_signo = SIGPROF;
    to_main.sigev_notify_thread_id = gettid();
    timer_t timer;
    struct itimerspec every = {{0, 50000}, {0, 50000}};
    if (timer_create(CLOCK_MONOTONIC, &to_main, &timer) == 0) timer_settime(timer, 0, &every, 0);
  } else {
    struct itimerval every = {{0, 200}, {0, 200}};
    setitimer(ITIMER_PROF, &every, 0);
  }
  sampling = getenv("HOST_SAMPLER_OFF") == 0;
}

void host_sampler_set(int on) { sampling = on; }

__attribute__((destructor)) static void write_samples(void) {
  sampling = 0;
  const char* path = getenv("SAMPLER_OUT");
  FILE* out = fopen(path ? path : "samples.txt", "w");
  if (!out) return;
  for (int i = 0; i < count; ++i) {
    for (int d = 2; d < depths[i]; ++d) {  // 0 and 1: the handler and the signal trampoline
      Dl_info info;
      if (dladdr(samples[i][d], &info) && info.dli_fname) {
        // A return address points past its call: one byte back is inside it.
        fprintf(out, "%s+%lx ", info.dli_fname, (unsigned long)((char*)samples[i][d] - (char*)info.dli_fbase - 1));
      } else {
        fprintf(out, "?+%lx ", (unsigned long)samples[i][d]);
      }
    }
    fputc('\n', out);
  }
  fclose(out);
}
