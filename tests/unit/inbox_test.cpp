// Inbox: the queue between a library's loop thread and the user's threads.
#include <poll.h>

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "core/loop_thread.h"

using namespace std::chrono_literals;

namespace {

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

}  // namespace

TEST(Inbox, PopTimesOutWhenEmpty) {
  canopy::core::Inbox<int> inbox;
  EXPECT_FALSE(inbox.pop(10ms));
  EXPECT_FALSE(inbox.pop(0ms));
  inbox.push(3);
  EXPECT_EQ(inbox.pop(0ms), 3) << "a zero time-out still takes what is there";
}

// A library method that calls into the loop (Backend::view(), Network::status())
// used from a handler the loop itself runs (a Backend::Handler) must not wait for
// the loop: it used to hang the back-end until its parent declared it lost.
TEST(LoopThread, ACallFromTheLoopThreadRunsAtOnce) {
  canopy::core::LoopThread loop;
  auto outer = std::async(std::launch::async, [&] { return loop.call([&] { return loop.call([] { return 7; }); }); });
  ASSERT_EQ(outer.wait_for(5s), std::future_status::ready) << "the nested call waits for its own thread";
  EXPECT_EQ(outer.get(), 7);
}

TEST(Inbox, ItemsComeOutInOrderAcrossThreads) {
  canopy::core::Inbox<int> inbox;
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) inbox.push(i);
  });
  for (int i = 0; i < 1000; ++i) {
    auto v = inbox.pop(5s);
    ASSERT_TRUE(v);
    EXPECT_EQ(*v, i);
  }
  producer.join();
}

TEST(Inbox, EventFdIsReadableExactlyWhileItemsWait) {
  canopy::core::Inbox<int> inbox;
  inbox.push(1);  // before the fd exists: it must start readable
  int fd = inbox.fd();
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(readable(fd));
  inbox.push(2);
  ASSERT_TRUE(inbox.pop(0ms));
  EXPECT_TRUE(readable(fd));
  ASSERT_TRUE(inbox.pop(0ms));
  EXPECT_FALSE(readable(fd));
  inbox.push(3);
  EXPECT_TRUE(readable(fd));
}

TEST(LoopThread, CallRunsOnTheLoopAndReturnsItsResult) {
  canopy::core::LoopThread loop;
  auto id = loop.call([] { return std::this_thread::get_id(); });
  EXPECT_NE(id, std::this_thread::get_id());
}
