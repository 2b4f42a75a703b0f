// The cluster credential's building blocks (core/internal/security.h): token files, secrets,
// hashes and the key pair derived from a token.
#include "core/internal/security.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/fakes/temp_dir.h"

namespace orrery::security {
namespace {

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    chmod(path.c_str(), 0600);
    return path;
  }
  orrery::testing::TempDir tmp_{"orrery_security_test"};
  const std::string& dir_ = tmp_.path();
};

TEST_F(SecurityTest, NewTokensAreLongRandomAndReadBack) {
  std::string a = NewToken(), b = NewToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  std::string path = dir_ + "/token";
  ASSERT_TRUE(WriteSecretFile(path, a).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto read = ReadTokenFile(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read.value(), a);
}

TEST_F(SecurityTest, BadTokenFilesAreRefusedNamingTheFile) {
  auto missing = ReadTokenFile(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir_ + "/nope"), std::string::npos);
  EXPECT_FALSE(ReadTokenFile(Write("short", "abc\n")).ok());
  EXPECT_FALSE(
      ReadTokenFile(Write("spaces", std::string(40, 'a') + " " + std::string(40, 'b'))).ok());
  EXPECT_FALSE(
      ReadTokenFile(Write("binary", std::string(40, 'a') + std::string("\xff\x00", 2))).ok());
  EXPECT_FALSE(ReadTokenFile(Write("huge", std::string(5000, 'a'))).ok());
  EXPECT_FALSE(ReadTokenFile(dir_).ok()) << "a directory is not a token file";
  auto padded = ReadTokenFile(Write("padded", "\n  " + std::string(40, 'x') + "  \n\n"));
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(padded.value(), std::string(40, 'x'));
}

TEST_F(SecurityTest, SecretFilesHoldOneLine) {
  EXPECT_TRUE(ReadSecretFile(Write("pw", "hunter2\n")).ok());
  EXPECT_FALSE(ReadSecretFile(Write("empty", "\n")).ok());
  EXPECT_FALSE(ReadSecretFile(Write("two", "a\nb\n")).ok());
}

TEST_F(SecurityTest, Sha256MatchesTheStandardVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto file = Sha256File(Write("abc", "abc"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file.value(), Sha256Hex("abc"));
  EXPECT_FALSE(Sha256File(dir_ + "/missing").ok());
}

TEST_F(SecurityTest, TheKeyPairIsAFunctionOfTheToken) {
  std::string token = NewToken();
  Credentials a = FromToken(token, "a"), b = FromToken(token, "b"),
              other = FromToken(NewToken(), "c");
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.public_key.size(), 32u);
  EXPECT_EQ(a.secret_key.size(), 32u);
  EXPECT_EQ(a.public_key, b.public_key);
  EXPECT_EQ(a.secret_key, b.secret_key);
  EXPECT_NE(a.public_key, other.public_key);
  EXPECT_NE(a.public_key, a.secret_key);
}

TEST_F(SecurityTest, SecretEqualsComparesWholeValues) {
  EXPECT_TRUE(SecretEquals("abc", "abc"));
  EXPECT_FALSE(SecretEquals("abc", "abd"));
  EXPECT_FALSE(SecretEquals("abc", "abcd"));
  EXPECT_TRUE(SecretEquals("", ""));
}

TEST_F(SecurityTest, UseCredentialsSaysWhereTheTokenIsExpected) {
  setenv("ORRERY_TMPDIR", dir_.c_str(), 1);  // no sessions here
  auto none = UseCredentials(false, "", "tcp://127.0.0.1:1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(none.status().message().find("ORRERY_TOKEN_FILE"), std::string::npos);
  // A session of this host for that head is found.
  std::string session = dir_ + "/session_1_1";
  std::filesystem::create_directories(session);
  std::ofstream(session + "/session.json")
      << R"({"values": {"head_address": "127.0.0.1:1", "started": "1"}, "pids": []})";
  ASSERT_TRUE(WriteSecretFile(session + "/token", NewToken()).ok());
  EXPECT_EQ(FindSessionTokenFile("tcp://127.0.0.1:1"), session + "/token");
  // A newer session of that head whose start did not complete (a failed `orrery start
  // --address` with a wrong token) is not picked.
  std::string failed = dir_ + "/session_3_3";
  std::filesystem::create_directories(failed);
  std::ofstream(failed + "/session.json")
      << R"({"values": {"head_address": "127.0.0.1:1"}, "pids": []})";
  ASSERT_TRUE(WriteSecretFile(failed + "/token", NewToken()).ok());
  std::filesystem::last_write_time(
      failed, std::filesystem::last_write_time(session) + std::chrono::seconds(10));
  EXPECT_EQ(FindSessionTokenFile("tcp://127.0.0.1:1"), session + "/token");
  EXPECT_EQ(FindSessionTokenFile("127.0.0.1:2"), "");
  // A garbage session file is skipped, not trusted.
  std::string bad = dir_ + "/session_2_2";
  std::filesystem::create_directories(bad);
  std::ofstream(bad + "/session.json") << "{\"values\": [1, 2";
  EXPECT_EQ(FindSessionTokenFile("127.0.0.1:1"), session + "/token");
  auto found = UseCredentials(false, "", "tcp://127.0.0.1:1");
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_TRUE(Enabled());
  auto off = UseCredentials(true, "", "");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(Enabled());
  unsetenv("ORRERY_TMPDIR");
}

}  // namespace
}  // namespace orrery::security
