// errors: every failure reaches the driver as an exception derived from orrery::Error,
// with enough detail to act on. This example provokes each common one and prints it.
//
//   ./errors
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "orrery/orrery.h"

int ParsePositive(std::string text) {
  int v = std::stoi(text);  // throws std::invalid_argument for "abc"
  if (v <= 0) throw std::out_of_range("not positive: " + text);
  return v;
}

int SlowEcho(int x, int delay_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  return x;
}

int NeverRegistered(int x) { return x; }  // deliberately missing from ORRERY_REMOTE

class Account {
 public:
  explicit Account(int balance) : balance_(balance) {}
  static Account* Create(int balance) {
    if (balance < 0) throw std::invalid_argument("an account cannot open with a negative balance");
    return new Account(balance);
  }
  int Withdraw(int amount) {
    if (amount > balance_) throw std::runtime_error("insufficient funds");
    balance_ -= amount;
    return balance_;
  }

 private:
  int balance_;
};

ORRERY_REMOTE(ParsePositive, SlowEcho, Account::Create, &Account::Withdraw);

namespace {

int failures = 0;

// Runs `body`, which must throw E; prints what was caught.
template <typename E, typename F>
void Expect(const char* what, F body) {
  std::printf("%s\n", what);
  try {
    body();
    std::printf("  FAIL nothing was thrown\n");
    ++failures;
  } catch (const E& e) {
    std::printf("  ok   %s: %s\n", e.kind(), e.what());
  } catch (const orrery::Error& e) {
    std::printf("  FAIL unexpected %s: %s\n", e.kind(), e.what());
    ++failures;
  }
}

void Run() {
  Expect<orrery::RemoteError>(
      "a task throws: RemoteError carries the exception's type and message", [] {
        try {
          orrery::Get(orrery::Task(ParsePositive).Remote(std::string("abc")));
        } catch (const orrery::RemoteError& e) {
          std::printf("       type %s, message \"%s\", in %s at %s\n", e.type().c_str(),
                      e.message().c_str(), e.function().c_str(), e.where().c_str());
          throw;
        }
      });

  auto account = orrery::Actor(Account::Create).Remote(100);
  Expect<orrery::RemoteError>("an actor method throws: RemoteError, and the actor lives on",
                              [&] { orrery::Get(account.Task(&Account::Withdraw).Remote(500)); });
  int left = *orrery::Get(account.Task(&Account::Withdraw).Remote(30));
  std::printf("  ok   the account still works: balance %d\n", left);
  if (left != 70) ++failures;

  Expect<orrery::GetTimeoutError>("Get with a timeout on a slow task: GetTimeoutError", [] {
    orrery::Get(orrery::Task(SlowEcho).Remote(1, 3000), /*timeout_ms=*/100);
  });

  Expect<orrery::InfeasibleError>("a demand no node can hold: InfeasibleError", [] {
    orrery::Get(orrery::Task(SlowEcho).SetResources({{"Unobtainium", 1}}).Remote(1, 0));
  });

  Expect<orrery::ConfigError>("an invalid resource demand: ConfigError at submission", [] {
    orrery::Task(SlowEcho).SetResources({{"CPU", 1.5}}).Remote(1, 0);
  });

  Expect<orrery::FunctionNotFoundError>("calling a function missing from ORRERY_REMOTE",
                                        [] { orrery::Task(NeverRegistered).Remote(1); });

  Expect<orrery::ActorDiedError>("the factory throws: calls fail with ActorDiedError", [] {
    auto broken = orrery::Actor(Account::Create).Remote(-5);
    orrery::Get(broken.Task(&Account::Withdraw).Remote(1));
  });

  account.Kill();
  Expect<orrery::ActorDiedError>("a killed actor: ActorDiedError",
                                 [&] { orrery::Get(account.Task(&Account::Withdraw).Remote(1)); });
}

}  // namespace

int main(int argc, char** argv) {
  // Give up on infeasible demands after one second instead of the default five.
  orrery::Config config;
  config.infeasible_timeout_s = 1.0;
  orrery::Init(config, argc, argv);
  try {
    Run();
  } catch (const orrery::Error& e) {
    std::printf("unexpected %s: %s\n", e.kind(), e.what());
    ++failures;
  }
  orrery::Shutdown();
  std::printf("%s\n", failures == 0 ? "errors: all good" : "errors: FAILED");
  return failures == 0 ? 0 : 1;
}
