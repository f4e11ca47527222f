// The sandbox child's main loop (the forge-sandbox-child executable runs it): owns one GPU's CUDA
// context, says hello, then judges and times candidates on request until the parent closes the
// socket or a CUDA error leaves the context unusable.
#ifndef FORGE_WORKER_SANDBOX_SANDBOX_CHILD_H_
#define FORGE_WORKER_SANDBOX_SANDBOX_CHILD_H_

#include "worker/judge/judge.h"

namespace forge::sandbox {

// The child's exit status after it reported a lost CUDA context.
inline constexpr int kContextLostExitStatus = 86;

struct ChildOptions {
  int socket_fd = -1;  // the child's end of the parent's socket pair
  int gpu_ordinal = 0;
  judge::ReferenceFn reference;
  // Honour TestBehaviourRequest (sleep forever, crash, exit): only the sandbox's tests set it.
  bool allow_test_behaviours = false;
};

// Serves requests until the parent closes the socket (returns 0), the socket fails (returns 1) or
// the CUDA context is lost (returns kContextLostExitStatus once the answer is sent). Without a
// usable GPU it still serves pings and test behaviours, and answers judge and time requests with
// the driver's Unavailable error.
int RunSandboxChild(const ChildOptions& options);

}  // namespace forge::sandbox

#endif  // FORGE_WORKER_SANDBOX_SANDBOX_CHILD_H_
