// The remote functions and actor classes the integration tests call. Defined in
// remote_functions.cc, which registers them with ORRERY_REMOTE; every integration binary
// links it, so every worker process of every binary knows them all.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "orrery/orrery.h"

struct Point {
  int x = 0;
  int y = 0;
  bool operator==(const Point& o) const { return x == o.x && y == o.y; }
  MSGPACK_DEFINE(x, y);
};

// A user-defined exception type: RemoteError::type() should name it.
class CustomTestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Counter;

// ---- Tasks ----
int Add(int a, int b);
std::string Echo(std::string s);
std::vector<int> Range(int n);
Point Mirror(Point p);
std::map<std::string, std::vector<int>> EchoNested(std::map<std::string, std::vector<int>> m);
void Nothing(int x);
int ThrowInvalidArgument(std::string message);
int ThrowCustom(std::string message);
int ThrowNonStandard(int code);
// Submits Add(a, b) from inside a task and Gets it.
int NestedAdd(int a, int b);
// Gets every ref (refs travel inside a value) and sums them.
int SumRefs(std::vector<orrery::ObjectRef<int>> refs);
int WorkerPid();
// Calls the counter from inside a task.
int IncViaTask(orrery::ActorHandle<Counter> counter, int by);
// Looks a named counter up from inside a task and calls it; -1 when it is not found.
int IncNamed(std::string name, std::string namespace_, int by);
// The first call for a given marker file creates it and kills its worker process; later
// calls find the file and return 7. Lets a test see a retry on a fresh worker.
int CrashOnce(std::string marker);
// Defined but deliberately not registered with ORRERY_REMOTE.
int NotRegistered(int x);

// ---- Actors ----
class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  static Counter* Create(int start);
  int Inc(int by);
  int Value() const;
  int Pid();
  // Throws std::runtime_error(message).
  int Fail(std::string message);
  // The worker's own ZeroMQ address (test hook), empty when the hook is unavailable.
  std::string Address();
  // Ends the worker process abruptly, as a crash would.
  int Crash();
  // As the task CrashOnce; on success returns the counter's value.
  int CrashOnce(std::string marker);
  int NotRegisteredMethod();

 private:
  int value_;
};

// Blocks callers of WaitOpen until Open is called. Needs max_concurrency >= 2.
class Gate {
 public:
  static Gate* Create();
  void Open();
  // Returns `value` once the gate is open; throws std::runtime_error after timeout_ms.
  int WaitOpen(int value, int timeout_ms);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// n callers meet inside the actor: Arrive(n, t) returns true once n calls have arrived,
// false if timeout_ms passed first. Only concurrent calls can all return true.
class Barrier {
 public:
  static Barrier* Create();
  bool Arrive(int n, int timeout_ms);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

// Records the order in which calls ran.
class Log {
 public:
  static Log* Create();
  // Returns the length of the log after appending.
  int Append(int x);
  std::vector<int> Items() const;

 private:
  std::vector<int> items_;
};

// Makes nested calls from inside an actor method.
class Caller {
 public:
  static Caller* Create();
  int IncOther(orrery::ActorHandle<Counter> counter, int by);
  int AddViaTask(int a, int b);
  int WaitForRef(std::vector<orrery::ObjectRef<int>> refs);
};

// Its factory always throws.
class Faulty {
 public:
  static Faulty* Create(std::string message);
  int Ping();
};
