// orrery::RuntimeEnv: the process environment of a task's or an actor's worker (docs/api.md
// "Runtime environments"), as Ray's runtime_env.
#pragma once

#include <map>
#include <string>

namespace orrery {

// Variables added to the worker's environment, and the folder it starts in. Workers of
// different environments are never shared. Given to SetRuntimeEnv on a task or an actor, or
// to Config::runtime_env as the default of a job's tasks and actors.
struct RuntimeEnv {
  std::map<std::string, std::string> env_vars;
  // A folder on the submitting host, made absolute at submission. Empty: the node's own.
  std::string working_dir;
  bool empty() const { return env_vars.empty() && working_dir.empty(); }
};

}  // namespace orrery
