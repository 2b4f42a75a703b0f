// A trainer's Entrypoint run by one worker of the group (docs/train.md "Framework
// processes"): the worker starts the command as its child, in a process group of its own
// that dies with the worker, with torchrun's variables (and the XLA and JAX ones on a TPU
// slice) in its environment and the Python module orrery_train on PYTHONPATH, and serves
// the module's requests over a Unix socket, one JSON object a line (docs/train.md "The
// line protocol"). The child's stdout and stderr go to the worker's, each line prefixed
// with the rank, so the log plane carries them to the driver.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "orrery/train/context.h"

namespace orrery::train::internal {

struct EntrypointRun {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // on top of the worker's (the group's variables)
  std::string working_dir;                 // "" -> the worker's
  double silence_s = 1800;                 // no request from the process for this long: failed
  std::string hostname;
};

// Why the process failed (it exited non-zero, was killed or stayed silent): the message
// names the rank, the host, the exit status or signal and the last lines of its stderr.
// The trainer restarts the group for it, within max_failures.
class ProcessFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `run` to its end, answering its requests with `ctx` (reports and checkpoints go where
// a C++ loop's go). Returns when it exits 0; throws ProcessFailed otherwise, and Error when
// it cannot be started. Its process group is killed before this returns, whatever happens.
void RunEntrypoint(Context& ctx, const EntrypointRun& run);

// The line protocol's answer to one request line (exposed for tests): a JSON object
// without the newline.
std::string AnswerRequest(Context& ctx, const std::string& line);

// Removes the socket folders (`<root>/orrery-train-<pid>-XXXXXX`) that this user's workers
// left when they were killed (a group torn down SIGKILLs its workers, so no destructor ran):
// those whose process no longer exists. Each run calls it for /tmp before making its own;
// exposed for tests. Anything not a folder of this user is left alone.
void RemoveEndedSocketFolders(const std::string& root);

// Where the Python module orrery_train is: $ORRERY_PYTHON_PATH, else <dir of this
// library>/../share/orrery/python, else the configured prefix's, else the source tree's.
std::string PythonModuleDir();

}  // namespace orrery::train::internal
