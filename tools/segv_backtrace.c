// Debugging aid for a machine without gdb: LD_PRELOAD this library and a crash (SIGSEGV, SIGBUS, SIGABRT)
// prints the native stack (as module(+offset) lines: feed the offsets to addr2line -f -C -e <module>)
// before Python's faulthandler prints the Python one. For a hang, `kill -USR2 <pid>` prints the native
// stack of every thread of the process (the thread that receives it forwards it to the others).
//   gcc -shared -fPIC -O1 -o /tmp/segv_backtrace.so tools/segv_backtrace.c
//   LD_PRELOAD=/tmp/segv_backtrace.so python3 ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static struct sigaction previous[32];
// stderr as it was when the library loaded: pytest later points fd 2 at its capture file.
static int report_fd = 2;

// module(+offset) of an address, as backtrace_symbols_fd prints it.
static void print_address(const char* label, uintptr_t address) {
  Dl_info where;
  char line[512];
  if (dladdr((void*)address, &where) && where.dli_fname) {
    snprintf(line, sizeof line, "%s %s(+0x%lx) [0x%lx]\n", label, where.dli_fname,
             (unsigned long)(address - (uintptr_t)where.dli_fbase), (unsigned long)address);
  } else {
    snprintf(line, sizeof line, "%s ?? [0x%lx]\n", label, (unsigned long)address);
  }
  if (write(report_fd, line, strlen(line)) < 0) return;
}

static void print_stack(int signal_number, siginfo_t* info, void* context) {
  // The faulting instruction, and the words at the stack pointer (return addresses when the fault was a
  // call to a bad address, where backtrace() stops at the signal frame).
  const ucontext_t* uc = (const ucontext_t*)context;
  print_address("faulting pc:", (uintptr_t)uc->uc_mcontext.gregs[REG_RIP]);
  const uintptr_t* sp = (const uintptr_t*)uc->uc_mcontext.gregs[REG_RSP];
  for (int i = 0; i < 48; ++i) print_address("  stack word:", sp[i]);
  void* frames[64];
  const int count = backtrace(frames, 64);
  static const char header[] = "\n== native stack (segv_backtrace):\n";
  if (write(report_fd, header, sizeof header - 1) < 0) return;
  backtrace_symbols_fd(frames, count, report_fd);
  sigaction(signal_number, &previous[signal_number], NULL);  // then faulthandler's or the default action
  raise(signal_number);
  (void)info;
}

static volatile sig_atomic_t forwarding = 0;

static void print_thread_stack(int signal_number, siginfo_t* info, void* context) {
  char header[96];
  const long tid = syscall(SYS_gettid);
  snprintf(header, sizeof header, "\n== native stack of thread %ld (segv_backtrace, SIGUSR2):\n", tid);
  if (write(report_fd, header, strlen(header)) < 0) return;
  void* frames[64];
  const int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, report_fd);
  if (forwarding) return;  // a forwarded signal: print this thread only
  forwarding = 1;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == NULL) return;
  for (struct dirent* entry; (entry = readdir(tasks)) != NULL;) {
    const long other = strtol(entry->d_name, NULL, 10);
    if (other <= 0 || other == tid) continue;
    syscall(SYS_tgkill, getpid(), other, SIGUSR2);
    const struct timespec pause = {0, 100 * 1000 * 1000};  // one thread's stack at a time
    nanosleep(&pause, NULL);
  }
  closedir(tasks);
  forwarding = 0;
  (void)signal_number;
  (void)info;
  (void)context;
}

__attribute__((constructor)) static void install(void) {
  report_fd = dup(2);
  void* warm_up[4];
  backtrace(warm_up, 4);  // loads libgcc's unwinder now, not inside a signal handler
  struct sigaction dump;
  memset(&dump, 0, sizeof dump);
  dump.sa_sigaction = print_thread_stack;
  dump.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR2, &dump, NULL);

  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = print_stack;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGSEGV, &action, &previous[SIGSEGV]);
  sigaction(SIGBUS, &action, &previous[SIGBUS]);
  sigaction(SIGABRT, &action, &previous[SIGABRT]);
}
