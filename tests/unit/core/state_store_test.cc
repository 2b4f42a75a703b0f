// The in-memory state store: tables, and streams that append each entry at most once.
#include "core/internal/state_store.h"

#include <gtest/gtest.h>

namespace orrery {
namespace {

TEST(InMemoryStateStore, PutDeleteGetAll) {
  InMemoryStateStore store;
  store.Put("actors", "a", "{}");
  store.Put("actors", "b", "{\"x\":1}");
  store.Put("actors", "a", "{\"x\":2}");
  store.Delete("actors", "b");
  auto all = store.GetAll("actors").value();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all["a"], "{\"x\":2}");
  EXPECT_TRUE(store.GetAll("nodes").value().empty());
}

TEST(InMemoryStateStore, StreamEntryResentIsAppendedOnce) {
  InMemoryStateStore store;
  store.StreamAdd("s", 0, {{"iteration", "1"}});
  store.StreamAdd("s", 1, {{"iteration", "2"}});
  store.StreamAdd("s", 1, {{"iteration", "2"}});  // resent
  store.StreamAdd("s", 0, {{"iteration", "1"}});  // resent, older
  store.StreamAdd("s", 2, {{"iteration", "3"}});
  auto entries = store.Stream("s");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[2][0].second, "3");
  store.StreamAdd("t", 5, {{"iteration", "6"}});  // streams are independent
  EXPECT_EQ(store.Stream("t").size(), 1u);
}

}  // namespace
}  // namespace orrery
