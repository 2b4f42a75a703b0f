// concurrency: by default an actor runs one call at a time, each to its end, also while it
// waits in Get (so a method's read, wait, write loses no update). SetMaxConcurrency(n) lets
// up to n calls run at once, each on its own thread, so calls that block (here: waiting
// for each other at a rendezvous) do not hold up the rest.
//
//   ./concurrency
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "example_main.h"
#include "orrery/orrery.h"

// Each call to Arrive blocks until `expected` calls have arrived (or the timeout passes),
// so it can only succeed when that many calls run at the same time.
class Rendezvous {
 public:
  static Rendezvous* Create() { return new Rendezvous(); }
  bool Arrive(int expected, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return arrived_ >= expected; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

int Fee(int amount) { return amount / 10; }

// Deposit reads the balance, waits on a task for the fee, then writes the balance back.
class Account {
 public:
  static Account* Create() { return new Account(); }
  int Deposit(int amount) {
    int before = balance_;
    int fee = *orrery::Get(orrery::Task(Fee).Remote(amount));
    balance_ = before + amount - fee;
    return balance_;
  }
  int Balance() { return balance_; }

 private:
  int balance_ = 0;
};

ORRERY_REMOTE(Rendezvous::Create, &Rendezvous::Arrive, Fee, Account::Create, &Account::Deposit,
              &Account::Balance);

namespace {

using orrery_examples::Check;

bool Run() {
  bool ok = true;
  constexpr int kCalls = 4;

  std::printf("an actor with SetMaxConcurrency(%d):\n", kCalls);
  auto meeting = orrery::Actor(Rendezvous::Create).SetMaxConcurrency(kCalls).Remote();
  std::vector<orrery::ObjectRef<bool>> arrivals;
  for (int i = 0; i < kCalls; ++i)
    arrivals.push_back(meeting.Task(&Rendezvous::Arrive).Remote(kCalls, 30000));
  int met = 0;
  for (const auto& r : orrery::Get(arrivals)) met += *r ? 1 : 0;
  ok &= Check(met == kCalls, std::to_string(met) + " of " + std::to_string(kCalls) +
                                 " blocking calls met inside the actor at once");

  meeting.Kill();

  std::printf("the default, one call at a time:\n");
  auto serial = orrery::Actor(Rendezvous::Create).Remote();
  auto first = serial.Task(&Rendezvous::Arrive).Remote(2, 500);
  auto second = serial.Task(&Rendezvous::Arrive).Remote(2, 500);
  bool first_met = *orrery::Get(first);
  bool second_met = *orrery::Get(second);
  ok &= Check(!first_met && second_met,
              "the first call waited alone and gave up; the second found it had arrived earlier");

  serial.Kill();

  std::printf("a default actor holds itself while a method waits in Get:\n");
  auto account = orrery::Actor(Account::Create).Remote();
  std::vector<orrery::ObjectRef<int>> deposits;
  for (int i = 0; i < 10; ++i) deposits.push_back(account.Task(&Account::Deposit).Remote(100));
  orrery::Get(deposits);
  int balance = *orrery::Get(account.Task(&Account::Balance).Remote());
  ok &= Check(balance == 900, "10 deposits of 100 (fee 10 each) read, waited and wrote back: " +
                                  std::to_string(balance) + " (900 expected)");
  account.Kill();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  orrery::Init(argc, argv);
  return orrery_examples::RunThenShutdown("concurrency", Run);
}
