// streaming: a task and an actor method that co_yield their results one by one
// (orrery::Stream<T>); the caller reads each value while the producer still runs
// (ObjectRefGenerator<T>::Next), sees a producer's error after its values, and stops an
// endless producer (docs/api.md "Streaming results").
//
//   ./streaming
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"

// The first n squares.
orrery::Stream<int64_t> Squares(int n) {
  for (int64_t i = 1; i <= n; ++i) co_yield i* i;
}

// Parses numbers until one is not a number.
orrery::Stream<int> ParseAll(std::vector<std::string> words) {
  for (const auto& w : words) co_yield std::stoi(w);
}

// An actor that hands out tickets until it is told to stop.
class Dispenser {
 public:
  static Dispenser* Create(std::string prefix) { return new Dispenser(std::move(prefix)); }
  orrery::Stream<std::string> Tickets() {
    for (int i = 1;; ++i) co_yield prefix_ + std::to_string(i);
  }
  int Ping() { return 1; }

 private:
  explicit Dispenser(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string prefix_;
};

ORRERY_REMOTE(Squares, ParseAll, Dispenser::Create, &Dispenser::Tickets, &Dispenser::Ping);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;
  // Each value arrives as soon as it is yielded; the end is std::nullopt.
  auto squares = orrery::Task(Squares).Remote(1000);
  int64_t sum = 0;
  int count = 0;
  while (auto ref = squares.Next()) {
    sum += *orrery::Get(*ref);
    ++count;
  }
  ok &= Check(count == 1000 && sum == 333833500,
              "1,000 squares streamed from a task, sum " + std::to_string(sum));

  // The producer's error comes after the values it yielded.
  auto parsed = orrery::Task(ParseAll).Remote(std::vector<std::string>{"1", "2", "three"});
  int got = 0;
  try {
    while (auto ref = parsed.Next()) got += *orrery::Get(*ref);
    ok &= Check(false, "a producer that throws ended without its error");
  } catch (const orrery::RemoteError& e) {
    ok &= Check(got == 3, "values 1 and 2, then the producer's " + e.type() + ": " + e.message());
  }

  // An endless producer on an actor, stopped by the reader.
  auto dispenser = orrery::Actor(Dispenser::Create).Remote(std::string("A-"));
  auto tickets = dispenser.Task(&Dispenser::Tickets).Remote();
  std::string first = *orrery::Get(*tickets.Next());
  std::string second = *orrery::Get(*tickets.Next());
  ok &= Check(first == "A-1" && second == "A-2", "tickets " + first + ", " + second);
  tickets.Cancel();
  try {
    while (tickets.Next()) {
    }
    ok &= Check(false, "a cancelled stream ended as if it were done");
  } catch (const orrery::TaskCancelledError&) {
    ok &= Check(true, "the endless stream was cancelled");
  }
  // The actor runs one call at a time: Ping runs once the producer has stopped.
  ok &= Check(*orrery::Get(dispenser.Task(&Dispenser::Ping).Remote()) == 1,
              "the actor is free again once its stream stopped");
  dispenser.Kill();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  return orrery_examples::RunThenShutdown("streaming", Run);
}
