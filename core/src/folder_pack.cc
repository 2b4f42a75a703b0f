#include "core/internal/folder_pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <vector>

#include "core/internal/file_hash.h"
#include "core/internal/log.h"
#include "core/internal/process_exists.h"
#include "orrery/api/serialize.h"

namespace orrery::folder_pack {

namespace fs = std::filesystem;

namespace {

enum Kind : int { kFolder = 0, kFile = 1, kExecutable = 2 };

struct Entry {
  std::string path;  // relative
  int kind = kFolder;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
};

struct Listing {
  std::vector<Entry> entries;
  size_t skipped = 0;
  bool too_big = false;  // over a limit: the listing stopped there
};

Status TooBig(const std::string& dir) {
  return Status::InvalidArgument("working_dir '" + dir + "' is too big to ship (at most " +
                                 std::to_string(kMaxPackageBytes >> 20) + " MiB in " +
                                 std::to_string(kMaxEntries) + " entries, " +
                                 std::to_string(kMaxDepth) + " folders deep)");
}

// Every folder and regular file under `dir`, sorted by path, without following links.
Result<Listing> List(const std::string& dir) {
  Listing out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  // Each entry's msgpack framing takes at most this many bytes besides its path and content.
  constexpr uint64_t kEntryFraming = 16;
  uint64_t bytes = 8;
  for (; !ec && it != end; it.increment(ec)) {
    struct stat st;
    const std::string full = it->path().string();
    if (lstat(full.c_str(), &st) != 0) {
      return Status::InvalidArgument("working_dir: cannot read '" + full +
                                     "': " + std::strerror(errno));
    }
    Entry e;
    e.path = it->path().lexically_relative(dir).string();
    if (S_ISDIR(st.st_mode)) {
      e.kind = kFolder;
    } else if (S_ISREG(st.st_mode)) {
      e.kind = (st.st_mode & S_IXUSR) ? kExecutable : kFile;
      e.size = uint64_t(st.st_size);
    } else {
      ++out.skipped;  // a link, a socket, a device: not shipped
      continue;
    }
    e.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    e.inode = uint64_t(st.st_ino);
    bytes += e.size + e.path.size() + kEntryFraming;
    // A path Unpack would refuse counts as over the limits too.
    if (bytes > kMaxPackageBytes || out.entries.size() >= kMaxEntries ||
        size_t(it.depth()) >= kMaxDepth || e.path.size() > kMaxPathBytes) {
      out.too_big = true;
      break;
    }
    out.entries.push_back(std::move(e));
  }
  if (ec) return Status::InvalidArgument("working_dir '" + dir + "': " + ec.message());
  std::sort(out.entries.begin(), out.entries.end(),
            [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return out;
}

// The content of the regular file `e` under `dir`, as listed: not a link put in its place.
Result<std::string> ReadFile(const std::string& dir, const Entry& e) {
  std::string path = dir + "/" + e.path;
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return Status::InvalidArgument("working_dir: cannot read '" + path +
                                   "': " + std::strerror(errno));
  struct stat st;
  std::string bytes(e.size, '\0');
  size_t done = 0;
  bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_ino) == e.inode &&
              uint64_t(st.st_size) == e.size;
  while (same && done < e.size) {
    ssize_t n = read(fd, bytes.data() + done, e.size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  close(fd);
  if (!same || done != e.size)
    return Status::InvalidArgument("working_dir: '" + path + "' changed while it was packed");
  return bytes;
}

// Whether a package's path may be made under the destination: relative, and every
// component a plain name.
bool SafePath(const std::string& p) {
  if (p.empty() || p.size() > kMaxPathBytes || p[0] == '/' || p.find('\0') != std::string::npos)
    return false;
  if (size_t(std::count(p.begin(), p.end(), '/')) >= kMaxDepth) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    std::string_view part(p.data() + start, slash - start);
    if (part.empty() || part == "." || part == ".." || part.size() > 255) return false;
    start = slash + 1;
  }
  return true;
}

std::string ParentOf(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

Status WriteFile(const std::string& path, const msgpack::object& content, bool executable) {
  if (content.type != msgpack::type::BIN && content.type != msgpack::type::STR)
    return Status::InvalidArgument("a file's content is not bytes");
  const char* data = content.type == msgpack::type::BIN ? content.via.bin.ptr : content.via.str.ptr;
  size_t size = content.type == msgpack::type::BIN ? content.via.bin.size : content.via.str.size;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                executable ? 0755 : 0644);
  if (fd < 0)
    return Status::InvalidArgument("cannot create '" + path + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      return Status::Internal("cannot write '" + path + "': " + std::strerror(err));
    }
    done += size_t(n);
  }
  if (close(fd) != 0)
    return Status::Internal("cannot write '" + path + "': " + std::strerror(errno));
  return Status::Ok();
}

// Writes the package's entries under `root` (an empty folder of this process's).
Status UnpackInto(std::string_view bytes, const std::string& root) {
  msgpack::object_handle oh;
  try {
    oh = internal::UnpackUntrusted(bytes.data(), bytes.size(),
                                   {4, kMaxEntries, 4 * kMaxEntries + 1});
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("malformed package: ") + e.what());
  }
  const msgpack::object& all = oh.get();
  if (all.type != msgpack::type::ARRAY) return Status::InvalidArgument("a package is an array");
  std::set<std::string> folders{""};
  std::string previous;
  for (uint32_t i = 0; i < all.via.array.size; ++i) {
    const msgpack::object& e = all.via.array.ptr[i];
    if (e.type != msgpack::type::ARRAY || e.via.array.size != 3 ||
        e.via.array.ptr[0].type != msgpack::type::STR ||
        e.via.array.ptr[1].type != msgpack::type::POSITIVE_INTEGER) {
      return Status::InvalidArgument("a package entry is not [path, kind, content]");
    }
    std::string path(e.via.array.ptr[0].via.str.ptr, e.via.array.ptr[0].via.str.size);
    uint64_t kind = e.via.array.ptr[1].via.u64;
    if (!SafePath(path)) return Status::InvalidArgument("a package path is not a relative name");
    if (i > 0 && path <= previous)
      return Status::InvalidArgument("package entries are not in order, or repeat a path");
    if (!folders.count(ParentOf(path)))
      return Status::InvalidArgument("a package entry's folder is not in the package");
    previous = path;
    std::string full = root + "/" + path;
    if (kind == kFolder) {
      if (mkdir(full.c_str(), 0755) != 0)
        return Status::Internal("cannot make '" + full + "': " + std::strerror(errno));
      folders.insert(path);
    } else if (kind == kFile || kind == kExecutable) {
      if (Status s = WriteFile(full, e.via.array.ptr[2], kind == kExecutable); !s.ok()) return s;
    } else {
      return Status::InvalidArgument("a package entry of unknown kind " + std::to_string(kind));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Packed> Pack(const std::string& dir) {
  Result<Listing> listing = List(dir);
  if (!listing.ok()) return listing.status();
  if (listing.value().too_big) return TooBig(dir);
  Packed out;
  out.skipped = listing.value().skipped;
  internal::StringWriter w{out.bytes};
  msgpack::packer<internal::StringWriter> pk(w);
  pk.pack_array(uint32_t(listing.value().entries.size()));
  for (const Entry& e : listing.value().entries) {
    pk.pack_array(3);
    pk.pack(e.path);
    pk.pack(e.kind);
    if (e.kind == kFolder) {
      pk.pack_bin(0);
      continue;
    }
    Result<std::string> content = ReadFile(dir, e);
    if (!content.ok()) return content.status();
    pk.pack_bin(uint32_t(content.value().size()));
    pk.pack_bin_body(content.value().data(), uint32_t(content.value().size()));
    ++out.files;
  }
  if (out.bytes.size() > kMaxPackageBytes) return TooBig(dir);
  out.hash = HashBytes(out.bytes);
  return out;
}

Result<Scan> Fingerprint(const std::string& dir) {
  Result<Listing> listing = List(dir);
  if (!listing.ok()) return listing.status();
  std::string digest;
  for (const Entry& e : listing.value().entries) {
    digest += e.path;
    digest += '\0';
    digest += std::to_string(e.kind) + ":" + std::to_string(e.size) + ":" +
              std::to_string(e.mtime_ns) + ":" + std::to_string(e.inode) + "\n";
  }
  return Scan{HashBytes(digest), listing.value().too_big};
}

namespace {

constexpr const char kTempMark[] = ".tmp";

// The pid in a temporary folder's name "<name>.tmp<pid>-<n>"; 0 for any other name.
long TempFolderPid(const std::string& name) {
  size_t mark = name.rfind(kTempMark);
  if (mark == std::string::npos || mark == 0) return 0;
  size_t at = mark + sizeof(kTempMark) - 1, dash = name.find('-', at);
  if (dash == std::string::npos || dash + 1 == name.size() ||
      name.find_first_not_of("0123456789", dash + 1) != std::string::npos)
    return 0;
  return PidFromDigits(std::string_view(name).substr(at, dash - at));
}

}  // namespace

int RemoveAbandoned(const std::string& parent, double min_age_s) {
  return RemoveFoldersOfEndedProcesses(parent, TempFolderPid, min_age_s);
}

std::string TempFolderFor(const std::string& dest) {
  std::random_device rd;
  return dest + kTempMark + std::to_string(getpid()) + "-" + std::to_string(rd());
}

Status Unpack(std::string_view bytes, const std::string& dest) {
  std::string tmp = TempFolderFor(dest);
  if (mkdir(tmp.c_str(), 0755) != 0)
    return Status::Internal("cannot make '" + tmp + "': " + std::strerror(errno));
  Status s = UnpackInto(bytes, tmp);
  if (s.ok() && rename(tmp.c_str(), dest.c_str()) != 0) {
    struct stat st;
    bool made_meanwhile = stat(dest.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (!made_meanwhile)
      s = Status::Internal("cannot store '" + dest + "': " + std::strerror(errno));
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);  // nothing left once renamed
  if (ec) LOG_WARN("cannot remove " + tmp + ": " + ec.message());
  return s;
}

std::string FolderIdentity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "";
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!std::getline(in, boot) || boot.empty()) return "";
  return boot + ":" + std::to_string(uint64_t(st.st_dev)) + ":" +
         std::to_string(uint64_t(st.st_ino));
}

}  // namespace orrery::folder_pack
