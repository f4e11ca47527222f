// A crash report for a sandbox child that dies by a signal (the sandbox only says which): preloaded
// into the child, it prints the faulting address, its library and symbol, and a backtrace to the
// child's stderr, which the sandbox returns as the failure's log. The GPU machine has no gdb.
// Symbolize the offsets here: addr2line -f -C -i -e build/worker/sandbox/forge-sandbox-child 0x...
//   gcc -O1 -shared -fPIC -o .gpu/libbacktrace_preload.so benchmarks/gpu/child_backtrace/backtrace_preload.c -ldl
//   FORGE_SANDBOX_CHILD=$PWD/benchmarks/gpu/child_backtrace/run_child.sh <a GPU test or bench>
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <dlfcn.h>
static void handler(int sig, siginfo_t* info, void* ctx) {
  ucontext_t* uc = (ucontext_t*)ctx;
  void* pc = (void*)uc->uc_mcontext.gregs[REG_RIP];
  Dl_info dl; char buf[512];
  if (dladdr(pc, &dl)) {
    snprintf(buf, sizeof buf, "SIGNAL %d at %p in %s (%s+%#lx) base %p\n", sig, pc, dl.dli_fname,
             dl.dli_sname ? dl.dli_sname : "?", (unsigned long)((char*)pc - (char*)(dl.dli_saddr ? dl.dli_saddr : dl.dli_fbase)), dl.dli_fbase);
  } else snprintf(buf, sizeof buf, "SIGNAL %d at %p\n", sig, pc);
  write(2, buf, strlen(buf));
  void* frames[64]; int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL); raise(sig);
}
__attribute__((constructor)) static void install(void) {
  struct sigaction sa; memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler; sa.sa_flags = SA_SIGINFO;
  sigaction(SIGILL, &sa, 0); sigaction(SIGSEGV, &sa, 0); sigaction(SIGABRT, &sa, 0);
}
