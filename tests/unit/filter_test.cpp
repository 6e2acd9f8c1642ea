// Built-in filters: each aggregates a wave as documented and rejects unsuitable input.
#include <gtest/gtest.h>

#include "filters/filter.h"

using canopy::Packet;
using canopy::filters::FilterRegistry;

namespace {

Packet from(canopy::Rank source, std::vector<canopy::Value> values, std::uint32_t contributors = 1) {
  Packet p{0, std::move(values)};
  p.set_source(source);
  p.set_contributors(contributors);
  return p;
}

canopy::Result<Packet> run(const std::string& name, std::vector<Packet> wave) {
  auto registry = FilterRegistry::with_builtins();
  auto filter = registry.create(name, canopy::FilterContext{});
  if (!filter) return canopy::Error{filter.error()};
  std::vector<Packet> out;
  if (auto r = (*filter)->execute(wave, out); !r) return canopy::Error{r.error()};
  EXPECT_EQ(out.size(), 1u);
  return out.front();
}

}  // namespace

TEST(SumFilter, AddsScalarsAndArraysElementWise) {
  auto out = run("sum", {from(0, {1, std::vector<double>{1, 2}}), from(1, {2, std::vector<double>{10, 20}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<std::int32_t>((*out)[0]), 3);
  EXPECT_EQ(std::get<std::vector<double>>((*out)[1]), (std::vector<double>{11, 22}));
  EXPECT_EQ(out->contributors(), 2u);
}

TEST(SumFilter, RejectsStringsNamingTheValue) {
  auto out = run("sum", {from(0, {std::string("a")}), from(1, {std::string("b")})});
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().find("value 1"), std::string::npos) << out.error();
}

TEST(SumFilter, RejectsPacketsOfDifferentFormats) {
  auto out = run("sum", {from(0, {1}), from(3, {1.0})});
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().find("rank 3"), std::string::npos) << out.error();
}

TEST(MinMaxFilters, PickTheExtremes) {
  auto lo = run("min", {from(0, {5}), from(1, {-2}), from(2, {9})});
  auto hi = run("max", {from(0, {5}), from(1, {-2}), from(2, {9})});
  EXPECT_EQ(std::get<std::int32_t>((*lo)[0]), -2);
  EXPECT_EQ(std::get<std::int32_t>((*hi)[0]), 9);
}

TEST(AvgFilter, WeighsInputsByTheirContributors) {
  // An average of 3 back-ends (2.0) and of 1 back-end (6.0) is 3.0, not 4.0.
  auto out = run("avg", {from(0, {2.0}, 3), from(1, {6}, 1)});
  ASSERT_FALSE(out);  // different types are refused...
  out = run("avg", {from(0, {2.0}, 3), from(1, {6.0}, 1)});
  ASSERT_TRUE(out) << out.error();
  EXPECT_DOUBLE_EQ(std::get<double>((*out)[0]), 3.0);
  EXPECT_EQ(out->contributors(), 4u);
}

TEST(ConcatFilter, GathersScalarsAndAppendsArrays) {
  auto out = run("concat", {from(0, {1}), from(1, {2})});
  EXPECT_EQ(std::get<std::vector<std::int32_t>>((*out)[0]), (std::vector<std::int32_t>{1, 2}));
  out = run("concat", {from(0, {std::vector<std::int32_t>{1, 2}}), from(1, {std::vector<std::int32_t>{3}})});
  EXPECT_EQ(std::get<std::vector<std::int32_t>>((*out)[0]), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(UnionFilter, KeepsEachIntegerOnceSorted) {
  auto out = run("union", {from(0, {std::vector<std::int64_t>{5, 1, 5}}), from(1, {std::vector<std::int64_t>{3, 1}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<std::vector<std::int64_t>>((*out)[0]), (std::vector<std::int64_t>{1, 3, 5}));
}

TEST(UnionFilter, RejectsFloatingPoint) {
  EXPECT_FALSE(run("union", {from(0, {std::vector<double>{1.0}}), from(1, {std::vector<double>{2.0}})}));
}

TEST(FilterRegistry, UnknownNameListsTheKnownOnes) {
  auto registry = FilterRegistry::with_builtins();
  auto f = registry.create("median", canopy::FilterContext{});
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().find("sum"), std::string::npos) << f.error();
}

TEST(PassFilter, EveryPacketOfTheWaveGoesOnUnchangedInChildOrder) {
  auto registry = FilterRegistry::with_builtins();
  auto filter = registry.create("pass", canopy::FilterContext{});
  ASSERT_TRUE(filter) << filter.error();
  std::vector<Packet> wave{from(3, {std::string("%s"), std::string("x")}, 2), from(5, {7})};
  std::vector<Packet> out;
  ASSERT_TRUE((*filter)->execute(wave, out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], wave[0]);
  EXPECT_EQ(out[1], wave[1]);
  EXPECT_EQ(out[0].contributors(), 2u);
}

namespace {

// Tells, in each wave, the number of descendants of its last context.
class ContextRecorder {
 public:
  explicit ContextRecorder(const canopy::FilterContext& context, const Packet&) : descendants_(context.descendants) {}
  canopy::Result<void> execute(std::span<const Packet>, std::vector<Packet>& out) {
    out.push_back(Packet{0, {static_cast<std::int32_t>(descendants_)}});
    return {};
  }
  void set_context(const canopy::FilterContext& context) { descendants_ = context.descendants; }

 private:
  std::uint32_t descendants_;
};

std::int32_t told(canopy::filters::Filter& filter) {
  std::vector<Packet> out;
  EXPECT_TRUE(filter.execute(std::vector<Packet>{from(0, {1})}, out));
  return out.size() == 1 ? std::get<std::int32_t>(out[0][0]) : -1;
}

}  // namespace

// A filter with set_context hears the tree change (StreamService calls it on every
// change); one built for ABI version 1, whose descriptor ends before set_context, is
// never asked.
TEST(FilterContext, AFilterIsToldItsNewContextUnlessBuiltForVersionOne) {
  FilterRegistry registry;
  registry.add(canopy::filter_descriptor<ContextRecorder>("recorder"));
  static canopy_filter_descriptor version_one = *canopy::filter_descriptor<ContextRecorder>("recorder");
  version_one.name = "recorder_v1";
  version_one.abi_version = 1;
  registry.add(&version_one);

  for (const char* name : {"recorder", "recorder_v1"}) {
    auto filter = registry.create(name, canopy::FilterContext{.descendants = 3});
    ASSERT_TRUE(filter) << filter.error();
    EXPECT_EQ(told(**filter), 3);
    ASSERT_TRUE((*filter)->set_context(canopy::FilterContext{.descendants = 5}));
    EXPECT_EQ(told(**filter), std::string(name) == "recorder" ? 5 : 3) << name;
  }
}
