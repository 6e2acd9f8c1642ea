// ServiceTable: services found by id; events in registration order, each service
// after those it declares it runs after; taken ids and circles refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/service_table.h"

using canopy::core::NodeEvent;
using canopy::core::Service;
using canopy::core::ServiceId;
using canopy::core::ServiceTable;

namespace {

class Recorder final : public Service {
 public:
  Recorder(ServiceId id, std::string name, std::vector<ServiceId> after, std::vector<std::string>& heard)
      : id_(id), name_(std::move(name)), after_(std::move(after)), heard_(heard) {}
  ServiceId id() const override { return id_; }
  std::string_view name() const override { return name_; }
  std::vector<ServiceId> runs_after() const override { return after_; }
  void on_event(const NodeEvent&) override { heard_.push_back(name_); }

 private:
  ServiceId id_;
  std::string name_;
  std::vector<ServiceId> after_;
  std::vector<std::string>& heard_;
};

const NodeEvent kEvent = canopy::core::events::Stopping{"test"};

}  // namespace

TEST(ServiceTable, EventsRunInRegistrationOrderWhereNothingIsDeclared) {
  std::vector<std::string> heard;
  Recorder a(100, "a", {}, heard), b(101, "b", {}, heard), c(102, "c", {}, heard);
  ServiceTable table;
  ASSERT_TRUE(table.add(c));
  ASSERT_TRUE(table.add(a));
  ASSERT_TRUE(table.add(b));
  table.emit(kEvent);
  EXPECT_EQ(heard, (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(table.find(101), &b);
  EXPECT_EQ(table.find(7), nullptr);
}

// Streams registered before detection and membership still hear a loss after them.
TEST(ServiceTable, AServiceRunsAfterThoseItNamesWhateverOrderTheyWereAddedIn) {
  std::vector<std::string> heard;
  Recorder streams(3, "streams", {2, 6}, heard), detection(2, "detection", {}, heard),
      membership(6, "membership", {}, heard), launch(1, "launch", {}, heard);
  ServiceTable table;
  for (Service* s : std::vector<Service*>{&streams, &launch, &membership, &detection}) ASSERT_TRUE(table.add(*s));
  table.emit(kEvent);
  EXPECT_EQ(heard, (std::vector<std::string>{"launch", "membership", "detection", "streams"}));
}

TEST(ServiceTable, ANamedServiceThatIsNotRegisteredIsNoPredecessor) {
  std::vector<std::string> heard;
  Recorder requests(4, "requests", {3}, heard), echo(100, "echo", {}, heard);
  ServiceTable table;
  ASSERT_TRUE(table.add(requests));
  ASSERT_TRUE(table.add(echo));
  table.emit(kEvent);
  EXPECT_EQ(heard, (std::vector<std::string>{"requests", "echo"}));
}

TEST(ServiceTable, ACircleOrATakenIdIsRefusedAndLeavesTheTableAsItWas) {
  std::vector<std::string> heard;
  Recorder a(100, "a", {101}, heard), b(101, "b", {100}, heard), other(100, "other", {}, heard);
  ServiceTable table;
  ASSERT_TRUE(table.add(a));
  auto circle = table.add(b);
  ASSERT_FALSE(circle);
  EXPECT_NE(circle.error().find("circle"), std::string::npos) << circle.error();
  auto taken = table.add(other);
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("already taken by 'a'"), std::string::npos) << taken.error();
  EXPECT_EQ(table.find(101), nullptr);
  table.emit(kEvent);
  EXPECT_EQ(heard, (std::vector<std::string>{"a"}));
}
