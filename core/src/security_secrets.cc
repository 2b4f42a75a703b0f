// Tokens, secret files and hashes (docs/security.md): reading and writing the cluster's
// token and other small secret files, SHA-256, and the key pair derived from a token.
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/internal/log.h"
#include "core/internal/rate_limit.h"
#include "core/internal/security.h"
#include "core/internal/text.h"

namespace orrery::security {

namespace {

constexpr size_t kMaxSecretFileBytes = 4096;
constexpr size_t kMinTokenChars = 32;

void InitSodium() {
  static const int rc = sodium_init();  // 0, or 1 when already initialised
  if (rc < 0) LOG_ERROR("libsodium could not be initialised");
}

std::string Hex(const unsigned char* data, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(d[data[i] >> 4]);
    out.push_back(d[data[i] & 15]);
  }
  return out;
}

Result<std::string> ReadSmallFile(const std::string& path, const char* what) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::NotFound("cannot read the " + std::string(what) + " " + path + ": " +
                            std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument("the " + std::string(what) + " " + path +
                                   " is not a regular file");
  }
  if (size_t(st.st_size) > kMaxSecretFileBytes) {
    close(fd);
    return Status::InvalidArgument("the " + std::string(what) + " " + path + " is " +
                                   std::to_string(st.st_size) + " bytes; at most " +
                                   std::to_string(kMaxSecretFileBytes) + " are allowed");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    static RateLimitedLog mode_log(60);
    uint64_t suppressed = 0;
    if (mode_log.ShouldLog(&suppressed)) {
      LOG_WARN("the " + std::string(what) + " " + path + " can be read by other users (mode " +
               std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
               std::to_string(st.st_mode & 7) + "); chmod 600 it");
    }
  }
  std::string content(kMaxSecretFileBytes + 1, '\0');
  size_t got = 0;
  while (got < content.size()) {
    ssize_t n = read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  close(fd);
  content.resize(got);
  if (got > kMaxSecretFileBytes) {
    return Status::InvalidArgument("the " + std::string(what) + " " + path + " is larger than " +
                                   std::to_string(kMaxSecretFileBytes) + " bytes");
  }
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!content.empty() && space(content.back())) content.pop_back();
  size_t start = 0;
  while (start < content.size() && space(content[start])) ++start;
  return content.substr(start);
}

}  // namespace

std::string NewToken() {
  InitSodium();
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof(bytes));
  return Hex(bytes, sizeof(bytes));
}

Result<std::string> ReadTokenFile(const std::string& path) {
  auto content = ReadSmallFile(path, "cluster token file");
  if (!content.ok()) return content.status();
  const std::string& t = content.value();
  if (t.size() < kMinTokenChars || !text::IsPrintableToken(t)) {
    return Status::InvalidArgument(
        "the cluster token file " + path + " does not hold a token (at least " +
        std::to_string(kMinTokenChars) +
        " printable characters without spaces; `orrery start --head` writes one)");
  }
  return t;
}

Result<std::string> ReadSecretFile(const std::string& path) {
  auto content = ReadSmallFile(path, "secret file");
  if (!content.ok()) return content.status();
  const std::string& t = content.value();
  if (t.empty() || t.find('\n') != std::string::npos || t.find('\0') != std::string::npos) {
    return Status::InvalidArgument("the secret file " + path + " must hold one non-empty line");
  }
  return t;
}

Status WriteSecretFile(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  std::string data = content + "\n";
  bool ok = fchmod(fd, 0600) == 0 && write(fd, data.data(), data.size()) == ssize_t(data.size()) &&
            fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

bool SecretEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string Sha256Hex(const std::string& bytes) {
  InitSodium();
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return Hex(out, sizeof(out));
}

Result<std::string> Sha256File(const std::string& path) {
  InitSodium();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("cannot read " + path + ": " + std::strerror(errno));
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<unsigned char> buf(1 << 16);
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Status::Unavailable("cannot read " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    crypto_hash_sha256_update(&st, buf.data(), size_t(n));
  }
  close(fd);
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, out);
  return Hex(out, sizeof(out));
}

// ---------------------------------------------------------------- credentials

Credentials FromToken(const std::string& token, const std::string& source) {
  InitSodium();
  // The secret key is a hash of the token under a fixed label, so every holder of the token
  // derives the same pair and nobody else can; Curve25519 accepts any 32 bytes as a secret.
  unsigned char secret[crypto_box_SECRETKEYBYTES];
  unsigned char hashed[crypto_hash_sha256_BYTES];
  std::string label = "orrery cluster curve key v1\n" + token;
  crypto_hash_sha256(hashed, reinterpret_cast<const unsigned char*>(label.data()), label.size());
  std::memcpy(secret, hashed, sizeof(secret));
  unsigned char pub[crypto_box_PUBLICKEYBYTES];
  crypto_scalarmult_base(pub, secret);
  Credentials c;
  c.enabled = true;
  c.secret_key.assign(reinterpret_cast<const char*>(secret), sizeof(secret));
  c.public_key.assign(reinterpret_cast<const char*>(pub), sizeof(pub));
  c.source = source;
  sodium_memzero(secret, sizeof(secret));
  sodium_memzero(hashed, sizeof(hashed));
  return c;
}

}  // namespace orrery::security
