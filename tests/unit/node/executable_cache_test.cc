// ExecutableCache: files checked by SHA-256, one request to the head however many wait,
// only the head's reply counts, and fetched bytes cached only when they match.
#include "node/src/executable_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "core/internal/clock.h"
#include "core/internal/file_hash.h"
#include "core/internal/folder_pack.h"
#include "orrery/ids.h"
#include "tests/fakes/folder_flags.h"
#include "tests/fakes/recording_outbox.h"

namespace orrery::node {
namespace {

using ::orrery::testing::RecordingOutbox;
using proto::MsgType;

class ExecutableCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("orrery-exec-test-" + UniqueId::Random().Hex());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    chmod(path.c_str(), 0755);
    return path;
  }
  // A folder `name` holding `file` (with `text` in it), packed.
  Result<folder_pack::Packed> PackFolder(const std::string& name, const std::string& file,
                                         const std::string& text) {
    std::filesystem::create_directories(dir_ / name);
    Write(name + "/" + file, text);
    return folder_pack::Pack((dir_ / name).string());
  }
  // A folder "project" holding notes.txt ("shipped"), packed.
  Result<folder_pack::Packed> PackProject() {
    return PackFolder("project", "notes.txt", "shipped");
  }
  // The head's answer to the last fetch for `hash`.
  proto::BinaryMsg Answer(const proto::BinaryMsg& ask, bool ok = true) {
    proto::BinaryMsg reply = ask;
    reply.ok = ok;
    reply.message = ok ? "" : "no job registered it";
    return reply;
  }
  std::filesystem::path dir_;
  RecordingOutbox outbox_;
};

TEST_F(ExecutableCacheTest, AFileIsFoundByItsContent) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string path = Write("app", "program one");
  EXPECT_EQ(cache.LocalExecutable(path, HashBytes("program one")), path);
  EXPECT_EQ(cache.LocalExecutable(path, HashBytes("program two")), "");
  Write("app", "program two, rebuilt");  // another file identity: hashed again
  EXPECT_EQ(cache.LocalExecutable(path, HashBytes("program two, rebuilt")), path);
}

TEST_F(ExecutableCacheTest, OneFetchForAllWaitersAndTheBytesAreCached) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string bytes = "the driver's executable";
  std::string hash = HashBytes(bytes);
  EXPECT_FALSE(cache.Vouched(hash));
  cache.Await(hash, "/nonexistent/app", "worker-1", "tcp://node");
  cache.Await(hash, "/nonexistent/app", "job:s1", "tcp://node");
  auto asks = outbox_.Sent(MsgType::kFetchBinary);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].address, "tcp://head");
  auto ask = asks[0].As<proto::BinaryMsg>();
  EXPECT_TRUE(ask.want_bytes);
  EXPECT_EQ(ask.reply_to, "tcp://node");
  auto fetched = cache.OnReply(Answer(ask), bytes);
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(fetched.value().error, "");
  EXPECT_EQ(fetched.value().waiters, (std::vector<std::string>{"worker-1", "job:s1"}));
  EXPECT_TRUE(cache.Vouched(hash));
  EXPECT_EQ(cache.LocalExecutable("", hash), cache.dir() + "/" + hash);
}

TEST_F(ExecutableCacheTest, AReplyThatAnswersNoRequestIsIgnored) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string hash = HashBytes("x");
  proto::BinaryMsg forged;
  forged.hash = hash;
  forged.ok = true;
  EXPECT_EQ(cache.OnReply(forged, "x").status().code(), StatusCode::kNotFound);
  cache.Await(hash, "", "worker-1", "tcp://node");
  forged.request_id = outbox_.Sent(MsgType::kFetchBinary)[0].As<proto::BinaryMsg>().request_id + 1;
  EXPECT_EQ(cache.OnReply(forged, "x").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(cache.Vouched(hash));
}

TEST_F(ExecutableCacheTest, BytesThatDoNotMatchTheHashAreNotKept) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string hash = HashBytes("the real one");
  cache.Await(hash, "", "worker-1", "tcp://node");
  auto ask = outbox_.Sent(MsgType::kFetchBinary)[0].As<proto::BinaryMsg>();
  auto fetched = cache.OnReply(Answer(ask), "something else");
  ASSERT_TRUE(fetched.ok());
  EXPECT_NE(fetched.value().error.find("does not match"), std::string::npos);
  EXPECT_FALSE(cache.Vouched(hash));
  EXPECT_EQ(cache.LocalExecutable("", hash), "");
}

TEST_F(ExecutableCacheTest, WhatTheHeadDoesNotVouchForIsAnError) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string path = Write("app", "local program");
  std::string hash = HashBytes("local program");
  cache.Await(hash, path, "worker-1", "tcp://node");
  auto ask = outbox_.Sent(MsgType::kFetchBinary)[0].As<proto::BinaryMsg>();
  EXPECT_FALSE(ask.want_bytes) << "the node has a copy: only the head's word is needed";
  auto fetched = cache.OnReply(Answer(ask, false), "");
  ASSERT_TRUE(fetched.ok());
  EXPECT_NE(fetched.value().error.find("does not vouch"), std::string::npos);
  EXPECT_FALSE(cache.Vouched(hash));
}

// A runtime env naming the package `hash` of a folder this host does not see.
proto::RuntimeEnvMsg Elsewhere(const std::string& hash) {
  return proto::RuntimeEnvMsg{{}, "/nonexistent-submitter-folder", hash, "another-host:1:2"};
}

TEST_F(ExecutableCacheTest, AWorkingDirIsFetchedOnceAndUnpackedIntoTheCache) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  auto packed = PackProject();
  ASSERT_TRUE(packed.ok());
  auto env = Elsewhere(packed.value().hash);
  EXPECT_EQ(cache.WorkingFolder(env, "worker-1", "tcp://node"), "");
  EXPECT_EQ(cache.WorkingFolder(env, "job:s1", "tcp://node"), "");
  auto asks = outbox_.Sent(MsgType::kFetchBinary);
  ASSERT_EQ(asks.size(), 1u);
  auto ask = asks[0].As<proto::BinaryMsg>();
  EXPECT_TRUE(ask.package);
  auto fetched = cache.OnReply(Answer(ask), packed.value().bytes);
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(fetched.value().error, "");
  EXPECT_TRUE(fetched.value().package);
  EXPECT_EQ(fetched.value().waiters, (std::vector<std::string>{"worker-1", "job:s1"}));
  std::string folder = cache.WorkingFolder(env, "worker-2", "tcp://node");
  ASSERT_NE(folder, "");
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), 1u) << "fetched once, then kept";
  std::ifstream in(folder + "/notes.txt");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "shipped");
  EXPECT_FALSE(cache.Vouched(packed.value().hash)) << "a package is never an executable";
}

// Unpacked copies come and go (UnpackedLimit): their folder spreads each new one to a block
// group of its own where the file system can (docs/benchmarks.md "Log folders apart").
TEST_F(ExecutableCacheTest, TheUnpackedCopiesFolderSpreadsItsSubfolders) {
  if (!testing::KeepsTopdirFlag(dir_.string()))
    GTEST_SKIP() << dir_ << " is on a file system that keeps no FS_TOPDIR_FL";
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  auto packed = PackProject();
  ASSERT_TRUE(packed.ok());
  auto env = Elsewhere(packed.value().hash);
  EXPECT_EQ(cache.WorkingFolder(env, "worker-1", "tcp://node"), "");
  auto asks = outbox_.Sent(MsgType::kFetchBinary);
  ASSERT_EQ(asks.size(), 1u);
  auto fetched = cache.OnReply(Answer(asks[0].As<proto::BinaryMsg>()), packed.value().bytes);
  ASSERT_TRUE(fetched.ok());
  ASSERT_EQ(fetched.value().error, "");
  EXPECT_TRUE(testing::HasTopdirFlag((dir_ / "cache" / "working_dirs").string()));
}

TEST_F(ExecutableCacheTest, AFolderThisHostSeesIsUsedInPlace) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string here = dir_.string();
  proto::RuntimeEnvMsg env{{}, here, HashBytes("its package"), folder_pack::FolderIdentity(here)};
  EXPECT_EQ(cache.WorkingFolder(env, "worker-1", "tcp://node"), here);
  env.working_dir_hash.clear();  // no package (the embedded cluster): the folder itself
  env.working_dir_id.clear();
  EXPECT_EQ(cache.WorkingFolder(env, "worker-1", "tcp://node"), here);
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), 0u);
}

TEST_F(ExecutableCacheTest, AFetchTheHeadDoesNotAnswerFailsItsWaiters) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string hash = HashBytes("a package the head never sends");
  EXPECT_EQ(cache.WorkingFolder(Elsewhere(hash), "worker-1", "tcp://node"), "");
  cache.Await(HashBytes("a program"), "", "worker-2", "tcp://node");
  double now = MonotonicSeconds();
  EXPECT_TRUE(cache.Expire(now).empty());
  auto expired = cache.Expire(now + ExecutableCache::kFetchTimeoutS + 1);
  ASSERT_EQ(expired.size(), 2u);
  for (const auto& [h, f] : expired) {
    EXPECT_EQ(f.package, h == hash);
    EXPECT_EQ(f.waiters.size(), 1u);
    EXPECT_NE(f.error.find("did not answer"), std::string::npos) << f.error;
  }
  // Asked again from the start; a late reply to the first request counts for nothing.
  auto first = outbox_.Sent(MsgType::kFetchBinary)[0].As<proto::BinaryMsg>();
  EXPECT_EQ(cache.OnReply(Answer(first), "late").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache.WorkingFolder(Elsewhere(hash), "worker-3", "tcp://node"), "");
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), 3u);
}

// A fetch sent as the head stops dies with its connection: it is sent again, with the same
// nonce, at gaps that grow, until a reply answers it; a reply to a resend after that is
// dropped. Before, the lease's worker waited out kFetchTimeoutS (120 s) for a question the
// restarted head never heard.
TEST_F(ExecutableCacheTest, AFetchNotAnsweredIsSentAgainUntilTheHeadAnswers) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string path = Write("app", "local program");
  std::string hash = HashBytes("local program");
  double start = MonotonicSeconds();
  cache.Await(hash, path, "worker-1", "tcp://node");
  cache.Resend(start);  // not yet due
  ASSERT_EQ(outbox_.Count(MsgType::kFetchBinary), 1u);
  // Sent again 1 s after, then 2 s and 4 s after that, each time with the same request.
  std::vector<double> due;
  for (double t = start; t < start + 8; t += 0.25) {
    size_t before = outbox_.Count(MsgType::kFetchBinary);
    cache.Resend(t);
    if (outbox_.Count(MsgType::kFetchBinary) > before) due.push_back(t - start);
  }
  ASSERT_EQ(due.size(), 3u);
  EXPECT_NEAR(due[0], ExecutableCache::kFirstResendS, 0.3);
  EXPECT_NEAR(due[1], 3, 0.3);
  EXPECT_NEAR(due[2], 7, 0.3);
  auto asks = outbox_.Sent(MsgType::kFetchBinary);
  for (const auto& a : asks) {
    EXPECT_EQ(a.address, "tcp://head");
    EXPECT_EQ(a.As<proto::BinaryMsg>().request_id, asks[0].As<proto::BinaryMsg>().request_id);
    EXPECT_FALSE(a.As<proto::BinaryMsg>().want_bytes);
  }
  // The gap stops growing at kMaxResendGapS.
  size_t before = outbox_.Count(MsgType::kFetchBinary);
  cache.Resend(start + 100);
  cache.Resend(start + 100 + ExecutableCache::kMaxResendGapS - 0.5);
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), before + 1);
  cache.Resend(start + 100 + ExecutableCache::kMaxResendGapS);
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), before + 2);

  auto ask = asks[0].As<proto::BinaryMsg>();
  auto fetched = cache.OnReply(Answer(ask), "");
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(fetched.value().waiters, (std::vector<std::string>{"worker-1"}));
  EXPECT_TRUE(cache.Vouched(hash));
  // Answered: the head's reply to a resend finds nothing, and nothing is sent again.
  EXPECT_EQ(cache.OnReply(Answer(ask), "").status().code(), StatusCode::kNotFound);
  before = outbox_.Count(MsgType::kFetchBinary);
  cache.Resend(start + 1000);
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), before);
  EXPECT_TRUE(cache.Expire(start + 1000).empty());
}

TEST_F(ExecutableCacheTest, UnpackedCopiesAreBoundedTheLeastRecentlyUsedNotInUseGoingFirst) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  cache.SetUnpackedLimit(2);
  std::string in_use;
  cache.SetInUse([&](const std::string& folder) { return folder == in_use; });
  std::vector<std::string> folders;
  auto fetch = [&](const std::string& name) {
    auto packed = PackFolder(name, "file.txt", name);
    EXPECT_TRUE(packed.ok());
    auto env = Elsewhere(packed.value().hash);
    EXPECT_EQ(cache.WorkingFolder(env, "worker", "tcp://node"), "");
    auto ask = outbox_.Sent(MsgType::kFetchBinary).back().As<proto::BinaryMsg>();
    EXPECT_EQ(cache.OnReply(Answer(ask), packed.value().bytes).value().error, "");
    std::string folder = cache.WorkingFolder(env, "worker", "tcp://node");
    EXPECT_NE(folder, "");
    // Each older than the next, whatever the file system's time resolution.
    std::filesystem::last_write_time(folder, std::filesystem::file_time_type::clock::now() -
                                                 std::chrono::hours(10 - int(folders.size())));
    folders.push_back(folder);
  };
  fetch("a");
  fetch("b");
  in_use = folders[0];  // the oldest, but a worker runs in it
  fetch("c");
  EXPECT_TRUE(std::filesystem::exists(folders[0]));
  EXPECT_FALSE(std::filesystem::exists(folders[1]));
  EXPECT_TRUE(std::filesystem::exists(folders[2]));
}

TEST_F(ExecutableCacheTest, APackageReplyDoesNotAnswerAnExecutableRequest) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string bytes = "a program";
  std::string hash = HashBytes(bytes);
  cache.Await(hash, "", "worker-1", "tcp://node");
  auto ask = outbox_.Sent(MsgType::kFetchBinary)[0].As<proto::BinaryMsg>();
  proto::BinaryMsg reply = Answer(ask);
  reply.package = true;
  EXPECT_EQ(cache.OnReply(reply, bytes).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(cache.Vouched(hash));
}

TEST_F(ExecutableCacheTest, AHostileOrMismatchedPackageIsAnErrorAndNotKept) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  std::string hostile = std::string("\x91\x93\xa4../x\x01\xc4\x01z", 11);
  std::string hash = HashBytes(hostile);
  EXPECT_EQ(cache.WorkingFolder(Elsewhere(hash), "worker-1", "tcp://node"), "");
  auto ask = outbox_.Sent(MsgType::kFetchBinary)[0].As<proto::BinaryMsg>();
  auto fetched = cache.OnReply(Answer(ask), hostile);
  ASSERT_TRUE(fetched.ok());
  EXPECT_NE(fetched.value().error.find("cannot be unpacked"), std::string::npos)
      << fetched.value().error;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "x"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "cache" / "x"));
  EXPECT_EQ(cache.WorkingFolder(Elsewhere(hash), "worker-2", "tcp://node"), "")
      << "nothing kept: asked again";
  ask = outbox_.Sent(MsgType::kFetchBinary)[1].As<proto::BinaryMsg>();
  fetched = cache.OnReply(Answer(ask), "other bytes");
  ASSERT_TRUE(fetched.ok());
  EXPECT_NE(fetched.value().error.find("does not match"), std::string::npos);
}

// What the node's inbox is to a cache that unpacks in the background: the functions the
// cache's thread posts wait here until the test runs them, as the inbox thread would.
class Posted {
 public:
  void Push(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fns_.push_back(std::move(fn));
    from_ = std::this_thread::get_id();
    cv_.notify_all();
  }
  // Runs the next posted function on this thread; false when none came within 30 s.
  bool RunNext() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return !fns_.empty(); })) return false;
    auto fn = std::move(fns_.front());
    fns_.pop_front();
    lock.unlock();
    fn();
    return true;
  }
  std::thread::id from() {
    std::lock_guard<std::mutex> lock(mu_);
    return from_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> fns_;
  std::thread::id from_;
};

struct Handed {
  std::string hash;
  ExecutableCache::Fetched fetched;
};

void InBackground(ExecutableCache& cache, Posted& posted, std::vector<Handed>& handed) {
  cache.UnpackInBackground([&posted](std::function<void()> fn) { posted.Push(std::move(fn)); },
                           [&handed](const std::string& hash, const ExecutableCache::Fetched& f) {
                             handed.push_back({hash, f});
                           });
}

TEST_F(ExecutableCacheTest, InTheBackgroundAPackageIsUnpackedOffTheCallersThreadForAllItsWaiters) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  Posted posted;
  std::vector<Handed> handed;
  InBackground(cache, posted, handed);
  auto packed = PackProject();
  ASSERT_TRUE(packed.ok());
  auto env = Elsewhere(packed.value().hash);
  EXPECT_EQ(cache.WorkingFolder(env, "worker-1", "tcp://node"), "");
  auto ask = outbox_.Sent(MsgType::kFetchBinary).at(0).As<proto::BinaryMsg>();
  auto fetched = cache.OnReply(Answer(ask), packed.value().bytes);
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(fetched.value().error, "");
  EXPECT_TRUE(fetched.value().waiters.empty()) << "handed back once unpacked";
  // Asked for while it is unpacked: waits with the others, no second fetch.
  EXPECT_EQ(cache.WorkingFolder(env, "job:s1", "tcp://node"), "");
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), 1u);
  ASSERT_TRUE(posted.RunNext()) << "the unpacking never finished";
  EXPECT_NE(posted.from(), std::this_thread::get_id());
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].hash, packed.value().hash);
  EXPECT_EQ(handed[0].fetched.error, "");
  EXPECT_TRUE(handed[0].fetched.package);
  EXPECT_EQ(handed[0].fetched.waiters, (std::vector<std::string>{"worker-1", "job:s1"}));
  std::string folder = cache.WorkingFolder(env, "worker-2", "tcp://node");
  ASSERT_NE(folder, "");
  std::ifstream in(folder + "/notes.txt");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "shipped");
}

TEST_F(ExecutableCacheTest, InTheBackgroundAHostilePackageFailsItsWaitersAndLeavesNothing) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  Posted posted;
  std::vector<Handed> handed;
  InBackground(cache, posted, handed);
  std::string hostile = std::string("\x91\x93\xa4../x\x01\xc4\x01z", 11);
  std::string hash = HashBytes(hostile);
  EXPECT_EQ(cache.WorkingFolder(Elsewhere(hash), "worker-1", "tcp://node"), "");
  auto ask = outbox_.Sent(MsgType::kFetchBinary).at(0).As<proto::BinaryMsg>();
  ASSERT_TRUE(cache.OnReply(Answer(ask), hostile).ok());
  ASSERT_TRUE(posted.RunNext()) << "the unpacking never finished";
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_NE(handed[0].fetched.error.find("cannot be unpacked"), std::string::npos)
      << handed[0].fetched.error;
  EXPECT_EQ(handed[0].fetched.waiters, std::vector<std::string>{"worker-1"});
  EXPECT_FALSE(std::filesystem::exists(dir_ / "cache" / "x"));
  EXPECT_EQ(cache.WorkingFolder(Elsewhere(hash), "worker-2", "tcp://node"), "")
      << "nothing kept: asked again";
  EXPECT_EQ(outbox_.Count(MsgType::kFetchBinary), 2u);
}

// A trimmed copy is gone from its name at once and removed on the cache's thread.
TEST_F(ExecutableCacheTest, InTheBackgroundATrimmedCopyIsRenamedAwayThenRemoved) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  Posted posted;
  std::vector<Handed> handed;
  InBackground(cache, posted, handed);
  cache.SetUnpackedLimit(1);
  std::vector<std::string> folders;
  for (std::string name : {"a", "b"}) {
    auto packed = PackFolder(name, "file.txt", name);
    ASSERT_TRUE(packed.ok());
    auto env = Elsewhere(packed.value().hash);
    EXPECT_EQ(cache.WorkingFolder(env, "worker", "tcp://node"), "");
    auto ask = outbox_.Sent(MsgType::kFetchBinary).back().As<proto::BinaryMsg>();
    ASSERT_TRUE(cache.OnReply(Answer(ask), packed.value().bytes).ok());
    ASSERT_TRUE(posted.RunNext()) << "the unpacking never finished";
    folders.push_back(cache.WorkingFolder(env, "worker", "tcp://node"));
    ASSERT_NE(folders.back(), "");
    std::filesystem::last_write_time(folders.back(), std::filesystem::file_time_type::clock::now() -
                                                         std::chrono::hours(3 - folders.size()));
  }
  // b's unpacking trimmed a (the limit is 1) before handing b back.
  EXPECT_FALSE(std::filesystem::exists(folders[0]));
  EXPECT_TRUE(std::filesystem::exists(folders[1]));
  auto left = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "cache" / "working_dirs")) {
      (void)e;
      ++n;
    }
    return n;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (left() > 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(left(), 1u) << "the renamed copy was never removed";
}

// What waits for the background thread is bounded: past the backlog's limit a package is
// unpacked on the calling thread, its waiters handed back at once.
TEST_F(ExecutableCacheTest, InTheBackgroundAPackagePastTheBacklogIsUnpackedOnTheCallersThread) {
  ExecutableCache cache(outbox_, "tcp://head", (dir_ / "cache").string());
  Posted posted;
  std::vector<Handed> handed;
  InBackground(cache, posted, handed);
  std::vector<folder_pack::Packed> packs;
  for (std::string name : {"a", "b", "c"}) {
    auto packed = PackFolder(name, "file.txt", name);
    ASSERT_TRUE(packed.ok());
    packs.push_back(packed.value());
    EXPECT_EQ(cache.WorkingFolder(Elsewhere(packed.value().hash), name, "tcp://node"), "");
  }
  cache.SetBacklogLimit(packs[0].bytes.size() + packs[1].bytes.size() - 1);
  auto answer = [&](size_t i) {
    auto ask = outbox_.Sent(MsgType::kFetchBinary).at(i).As<proto::BinaryMsg>();
    auto fetched = cache.OnReply(Answer(ask), packs[i].bytes);
    EXPECT_TRUE(fetched.ok());
    return fetched.ok() ? fetched.value() : ExecutableCache::Fetched{};
  };
  EXPECT_TRUE(answer(0).waiters.empty()) << "a goes to the background thread";
  auto b = answer(1);  // a's bytes still wait there: b would pass the limit
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(b.waiters, std::vector<std::string>{"b"});
  EXPECT_NE(cache.WorkingFolder(Elsewhere(packs[1].hash), "b2", "tcp://node"), "");
  ASSERT_TRUE(posted.RunNext()) << "the unpacking never finished";
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].fetched.waiters, std::vector<std::string>{"a"});
  EXPECT_TRUE(answer(2).waiters.empty()) << "a's bytes are gone: c goes to the background";
  ASSERT_TRUE(posted.RunNext()) << "the unpacking never finished";
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_EQ(handed[1].fetched.waiters, std::vector<std::string>{"c"});
}

}  // namespace
}  // namespace orrery::node
