// The union workload's record files (tools/union_record.h): reading them, old format
// included, and checking a union against them when back-ends failed.
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

#include "union_record.h"

using namespace std::chrono_literals;
using canopy::demo::check_union;
using canopy::demo::read_record;
using canopy::demo::RecordedValue;
using canopy::demo::WallClock;

namespace {

// A record file with `text`, removed with the fixture.
class RecordFile : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(path_.c_str()); }
  std::string write(const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
    return path_;
  }
  std::string path_ = "/tmp/canopy-union-record-" + std::to_string(getpid()) + ".txt";
};

const WallClock::time_point kKill = WallClock::time_point(1'800'000'000s);

RecordedValue at(std::int32_t value, WallClock::duration before_failure) {
  return {value, kKill - before_failure};
}

}  // namespace

TEST_F(RecordFile, ValuesAreReadWithTheirTimesInMicroseconds) {
  auto values = read_record(write(canopy::demo::record_line(42, kKill) + "7 1800000000000001\n"));
  ASSERT_TRUE(values) << values.error();
  ASSERT_EQ(values->size(), 2u);
  EXPECT_EQ((*values)[0].value, 42);
  EXPECT_EQ((*values)[0].time, kKill);
  EXPECT_EQ((*values)[1].value, 7);
  EXPECT_EQ((*values)[1].time, kKill + 1us);
}

TEST_F(RecordFile, OldFilesOfOneIntegerALineAreReadWithoutTimes) {
  auto values = read_record(write("5\n6\n\n"));
  ASSERT_TRUE(values) << values.error();
  ASSERT_EQ(values->size(), 2u);
  EXPECT_EQ((*values)[1].value, 6);
  EXPECT_FALSE((*values)[1].time);
}

TEST_F(RecordFile, ALastLineCutShortByAKillIsNotRead) {
  auto values = read_record(write("5 100\n6 1"));
  ASSERT_TRUE(values) << values.error();
  EXPECT_EQ(values->size(), 1u);
}

TEST_F(RecordFile, AMalformedLineIsAnErrorNamingFileAndLine) {
  auto values = read_record(write("5 100\nfive 100\n"));
  ASSERT_FALSE(values);
  EXPECT_NE(values.error().find(path_ + ":2: "), std::string::npos) << values.error();
  EXPECT_FALSE(read_record(write("5 100 7\n")));
  EXPECT_FALSE(read_record("/nonexistent/be-0.txt"));
}

TEST(UnionCheck, EveryValueOfTheSurvivorsIsRequired) {
  auto check = check_union({1, 2}, {{0, {at(1, 10s), at(2, 0s)}}, {1, {at(3, -1s)}}}, {});
  EXPECT_EQ(check.expected, 3u);
  EXPECT_EQ(check.missing, 1u);
  EXPECT_EQ(check.extra, 0u);
  EXPECT_FALSE(check.ok());
}

TEST(UnionCheck, AFailedBackEndsValuesOfItsLastSecondAreLateNotRequired) {
  // Back-end 1 failed at kKill: 10 and 11 are older than a second, 12 and 13 are not.
  std::map<canopy::Rank, std::vector<RecordedValue>> records{
      {0, {at(1, 5s)}}, {1, {at(10, 5s), at(11, 1s + 1us), at(12, 1s), at(13, 0s)}}};
  auto check = check_union({1, 10, 11, 13}, records, {{1, kKill}});
  EXPECT_EQ(check.expected, 3u);
  EXPECT_EQ(check.missing, 0u);
  EXPECT_EQ(check.late_values, 2u);
  EXPECT_EQ(check.late_arrived, 1u);
  EXPECT_TRUE(check.ok());

  auto without_old = check_union({1, 10, 12, 13}, records, {{1, kKill}});
  EXPECT_EQ(without_old.missing, 1u);
  EXPECT_FALSE(without_old.ok());
}

TEST(UnionCheck, ALateValueThatAnotherBackEndAlsoSentIsRequired) {
  auto check = check_union({1}, {{0, {at(7, 5s)}}, {1, {at(7, 0s)}}}, {{1, kKill}});
  EXPECT_EQ(check.expected, 1u);
  EXPECT_EQ(check.missing, 1u);
  EXPECT_EQ(check.late_values, 0u);
}

TEST(UnionCheck, AFailedBackEndsValuesWithoutTimesAreRequired) {
  auto check = check_union({}, {{1, {RecordedValue{9, std::nullopt}}}}, {{1, kKill}});
  EXPECT_EQ(check.expected, 1u);
  EXPECT_EQ(check.missing, 1u);
}

TEST(UnionCheck, AValueNoBackEndRecordedIsExtra) {
  auto check = check_union({1, 99}, {{0, {at(1, 5s)}}}, {});
  EXPECT_EQ(check.extra, 1u);
  EXPECT_FALSE(check.ok());
}
