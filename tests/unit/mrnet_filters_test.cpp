// canopy_mrnet_filters.so (mrnet/filters/, docs/mrnet.md decision 3), loaded with
// Canopy's own loader: MRNet 5.0.1's built-in filters on MRNet packets, and the adapter
// running unchanged MRNet filter functions (tests/unit/plugins/mrnet_style_filter.cpp).
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "filters/filter.h"
#include "mrnet/conventions.h"
#include "mrnet/packet_codec.h"

using canopy::FilterContext;
using canopy::Packet;
using canopy::Rank;
using canopy::filters::Filter;
using canopy::filters::FilterRegistry;

namespace {

const char* const kPlugin = CANOPY_TEST_MRNET_FILTERS_PLUGIN;
const char* const kToolFilter = CANOPY_TEST_MRNET_STYLE_FILTER;

const FilterRegistry& registry() {
  static const FilterRegistry loaded = [] {
    FilterRegistry r;
    for (const char* name : {"mrnet_sum", "mrnet_avg", "mrnet_max", "mrnet_min", "mrnet_array_concat",
                             "mrnet_int_eq_class", "mrnet_function", "mrnet_function_recoverable"}) {
      auto ok = r.load(kPlugin, name);
      EXPECT_TRUE(ok) << name << ": " << ok.error();
    }
    return r;
  }();
  return loaded;
}

std::unique_ptr<Filter> make(const std::string& name, const Packet& params = {}, const FilterContext& context = {}) {
  auto filter = registry().create(name, context, params);
  EXPECT_TRUE(filter) << filter.error();
  return filter ? std::move(*filter) : nullptr;
}

std::string create_error(const std::string& name, const Packet& params, const FilterContext& context = {}) {
  auto filter = registry().create(name, context, params);
  EXPECT_FALSE(filter) << name << " was created";
  return filter ? std::string() : filter.error();
}

// An MRNet packet from back-end `source`, as the layer sends it.
template <typename... Args>
Packet mrnet(Rank source, int tag, const char* format, Args... values) {
  MRN::Packet packet(0, tag, format, values...);
  EXPECT_FALSE(packet.has_Error()) << format;
  Packet p = MRN::codec::to_canopy(packet);
  p.set_source(source);
  return p;
}

// The single MRNet packet a wave gives.
MRN::PacketPtr run(Filter& filter, const std::vector<Packet>& wave) {
  std::vector<Packet> out;
  auto r = filter.execute(wave, out);
  EXPECT_TRUE(r) << r.error();
  EXPECT_EQ(out.size(), 1u);
  if (!r || out.size() != 1) return MRN::PacketPtr();
  auto decoded = MRN::codec::from_canopy(out[0], 0);
  EXPECT_TRUE(decoded) << decoded.error();
  return decoded ? *decoded : MRN::PacketPtr();
}

// The error of a wave that must fail, which must output nothing.
std::string failure(Filter& filter, const std::vector<Packet>& wave) {
  std::vector<Packet> out;
  auto r = filter.execute(wave, out);
  EXPECT_FALSE(r) << "the wave was accepted";
  EXPECT_TRUE(out.empty());
  return r ? std::string() : r.error();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The packet's only value, read as a tool reads it.
template <typename T>
T only(const MRN::PacketPtr& p, const char* format) {
  T value{};
  EXPECT_TRUE(p);
  if (!p) return value;
  EXPECT_STREQ(p->get_FormatString(), format);
  EXPECT_EQ(p->unpack(format, &value), 0);
  return value;
}

template <typename T>
std::vector<T> array_of(const MRN::PacketPtr& p, const char* format) {
  T* data = nullptr;
  std::uint32_t n = 0;
  EXPECT_TRUE(p);
  if (!p) return {};
  EXPECT_STREQ(p->get_FormatString(), format);
  EXPECT_EQ(p->unpack(format, &data, &n), 0);
  std::vector<T> out(data, data + n);
  std::free(data);
  return out;
}

// The adapter's parameters: the tool's shared object, its function, then an MRNet
// packet of set_FilterParameters, if any.
Packet function_params(const std::string& function, const std::string& path = kToolFilter,
                       std::vector<canopy::Value> params = {}) {
  std::vector<canopy::Value> values{path, function};
  values.insert(values.end(), params.begin(), params.end());
  return Packet(0, std::move(values));
}

std::vector<canopy::Value> mrnet_params(int value) {
  return MRN::codec::to_canopy(MRN::Packet(0, 0, "%d", value)).values();
}

}  // namespace

// ---- the plug-in ----

TEST(MrnetFilters, EveryFilterNameOfTheLayersConventionsLoadsFromThePlugin) {
  for (MRN::FilterId id : {MRN::TFILTER_SUM, MRN::TFILTER_AVG, MRN::TFILTER_MAX, MRN::TFILTER_MIN,
                           MRN::TFILTER_ARRAY_CONCAT, MRN::TFILTER_INT_EQ_CLASS}) {
    const std::string name = MRN::layer::builtin_filter_name(id);
    EXPECT_TRUE(registry().contains(name)) << name;
    EXPECT_EQ(registry().plugin_path(name), kPlugin);
    EXPECT_FALSE(registry().state_recoverable(name)) << name;
  }
  EXPECT_TRUE(registry().contains(MRN::layer::kFunctionFilter));
  EXPECT_FALSE(registry().state_recoverable(MRN::layer::kFunctionFilter));
  EXPECT_TRUE(registry().state_recoverable(MRN::layer::kRecoverableFunctionFilter));
}

TEST(MrnetFilters, PluginGivesToolsFiltersTheMrnetPacketCode) {
  // The tool's filter links nothing: creating the adapter loads it, which works only
  // once the plug-in's MRN:: symbols are global.
  auto filter = make(MRN::layer::kFunctionFilter, function_params("IntegerSum"));
  ASSERT_TRUE(filter);
  void* unpack = dlsym(RTLD_DEFAULT, "_ZN3MRN6Packet6unpackEPKcz");  // MRN::Packet::unpack(const char*, ...)
  ASSERT_NE(unpack, nullptr) << "MRN::Packet::unpack is not in the global scope";
  Dl_info where{};
  ASSERT_NE(dladdr(unpack, &where), 0);
  EXPECT_TRUE(std::filesystem::equivalent(where.dli_fname, kPlugin)) << where.dli_fname;
}

// ---- built-in filters ----

TEST(MrnetFilters, SumAddsTheValuesAndKeepsTheFirstPacketsTag) {
  auto sum = make("mrnet_sum");
  auto out = run(*sum, {mrnet(0, 105, "%d", 1), mrnet(1, 106, "%d", -7), mrnet(2, 107, "%d", 40)});
  EXPECT_EQ(only<std::int32_t>(out, "%d"), 34);
  EXPECT_EQ(out->get_Tag(), 105);
}

TEST(MrnetFilters, SumKeepsEachScalarDirectiveAndItsType) {
  auto sum = make("mrnet_sum");
  EXPECT_EQ(only<char>(run(*sum, {mrnet(0, 1, "%c", 'A'), mrnet(1, 1, "%c", 2)}), "%c"), 'C');
  EXPECT_EQ(only<unsigned char>(run(*sum, {mrnet(0, 1, "%uc", 200), mrnet(1, 1, "%uc", 50)}), "%uc"), 250);
  EXPECT_EQ(only<std::int16_t>(run(*sum, {mrnet(0, 1, "%hd", -300), mrnet(1, 1, "%hd", 100)}), "%hd"), -200);
  EXPECT_EQ(only<std::uint16_t>(run(*sum, {mrnet(0, 1, "%uhd", 60000), mrnet(1, 1, "%uhd", 5000)}), "%uhd"), 65000);
  EXPECT_EQ(only<std::uint32_t>(run(*sum, {mrnet(0, 1, "%ud", 4000000000u), mrnet(1, 1, "%ud", 1u)}), "%ud"),
            4000000001u);
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_EQ(only<std::int64_t>(run(*sum, {mrnet(0, 1, "%ld", big), mrnet(1, 1, "%ld", -big - 1)}), "%ld"), -1);
  const std::uint64_t huge = std::uint64_t{1} << 63;
  EXPECT_EQ(only<std::uint64_t>(run(*sum, {mrnet(0, 1, "%uld", huge), mrnet(1, 1, "%uld", std::uint64_t{5})}), "%uld"),
            huge + 5);
  EXPECT_EQ(only<float>(run(*sum, {mrnet(0, 1, "%f", 1.5), mrnet(1, 1, "%f", 2.25)}), "%f"), 3.75f);
  EXPECT_EQ(only<double>(run(*sum, {mrnet(0, 1, "%lf", 0.5), mrnet(1, 1, "%lf", 0.25)}), "%lf"), 0.75);
}

TEST(MrnetFilters, SumWrapsAroundInTheDirectivesType) {
  auto sum = make("mrnet_sum");
  EXPECT_EQ(only<unsigned char>(run(*sum, {mrnet(0, 1, "%uc", 200), mrnet(1, 1, "%uc", 100)}), "%uc"), 44);
  EXPECT_EQ(only<std::int16_t>(run(*sum, {mrnet(0, 1, "%hd", 30000), mrnet(1, 1, "%hd", 30000)}), "%hd"), -5536);
  EXPECT_EQ(only<std::int32_t>(run(*sum, {mrnet(0, 1, "%d", std::numeric_limits<std::int32_t>::max()),
                                          mrnet(1, 1, "%d", 1)}),
                               "%d"),
            std::numeric_limits<std::int32_t>::min());
}

TEST(MrnetFilters, MinAndMaxPickTheLeastAndTheGreatestValue) {
  auto min = make("mrnet_min");
  auto max = make("mrnet_max");
  const std::vector<Packet> ints{mrnet(0, 9, "%d", 5), mrnet(1, 8, "%d", -3), mrnet(2, 7, "%d", 11)};
  auto least = run(*min, ints);
  EXPECT_EQ(only<std::int32_t>(least, "%d"), -3);
  EXPECT_EQ(least->get_Tag(), 9);
  EXPECT_EQ(only<std::int32_t>(run(*max, ints), "%d"), 11);
  const std::vector<Packet> unsigned_longs{mrnet(0, 1, "%uld", std::uint64_t{1} << 63), mrnet(1, 1, "%uld", std::uint64_t{2})};
  EXPECT_EQ(only<std::uint64_t>(run(*min, unsigned_longs), "%uld"), 2u);
  EXPECT_EQ(only<std::uint64_t>(run(*max, unsigned_longs), "%uld"), std::uint64_t{1} << 63);
  EXPECT_EQ(only<double>(run(*max, {mrnet(0, 1, "%lf", -0.5), mrnet(1, 1, "%lf", -0.25)}), "%lf"), -0.25);
  EXPECT_EQ(only<char>(run(*min, {mrnet(0, 1, "%c", 'b'), mrnet(1, 1, "%c", 'a')}), "%c"), 'a');
}

TEST(MrnetFilters, AvgWeighsEachAverageByItsCount) {
  auto avg = make("mrnet_avg");
  auto out = run(*avg, {mrnet(0, 33, "%d %d", 10, 2), mrnet(1, 34, "%d %d", 4, 1)});
  ASSERT_TRUE(out);
  EXPECT_STREQ(out->get_FormatString(), "%d %d");
  std::int32_t average = 0, count = 0;
  ASSERT_EQ(out->unpack("%d %d", &average, &count), 0);
  EXPECT_EQ(average, 8);  // (10*2 + 4*1) / 3
  EXPECT_EQ(count, 3);
  EXPECT_EQ(out->get_Tag(), 33);

  out = run(*avg, {mrnet(0, 1, "%lf %d", 1.0, 1), mrnet(1, 1, "%lf %d", 2.0, 3)});
  double mean = 0;
  ASSERT_TRUE(out);
  ASSERT_EQ(out->unpack("%lf %d", &mean, &count), 0);
  EXPECT_EQ(mean, 1.75);
  EXPECT_EQ(count, 4);
}

TEST(MrnetFilters, AvgComputesInTheDirectivesTypeAsMrnetDoes) {
  auto avg = make("mrnet_avg");
  // Integer division truncates; the product 100*3 wraps to 44 in an unsigned char.
  auto out = run(*avg, {mrnet(0, 1, "%d %d", 5, 1), mrnet(1, 1, "%d %d", 6, 1)});
  std::int32_t average = 0, count = 0;
  ASSERT_TRUE(out);
  ASSERT_EQ(out->unpack("%d %d", &average, &count), 0);
  EXPECT_EQ(average, 5);
  out = run(*avg, {mrnet(0, 1, "%uc %d", 100, 3), mrnet(1, 1, "%uc %d", 0, 1)});
  unsigned char small = 0;
  ASSERT_TRUE(out);
  ASSERT_EQ(out->unpack("%uc %d", &small, &count), 0);
  EXPECT_EQ(small, 11);  // 44 / 4
  EXPECT_EQ(count, 4);
}

TEST(MrnetFilters, AvgOfIntegersWithCountsAddingUpToZeroIsAnError) {
  auto avg = make("mrnet_avg");
  auto error = failure(*avg, {mrnet(0, 1, "%d %d", 5, 0)});
  EXPECT_TRUE(contains(error, "mrnet_avg") && contains(error, "add up to 0")) << error;
}

TEST(MrnetFilters, ArrayConcatJoinsTheArraysInWaveOrder) {
  auto concat = make("mrnet_array_concat");
  const std::int32_t a[] = {1, 2};
  const std::int32_t b[] = {3};
  auto out = run(*concat, {mrnet(0, 12, "%ad", a, 2u), mrnet(1, 13, "%ad", b, 1u),
                           mrnet(2, 14, "%ad", static_cast<const std::int32_t*>(nullptr), 0u)});
  EXPECT_EQ(array_of<std::int32_t>(out, "%ad"), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(out->get_Tag(), 12);

  const char* s1[] = {"x"};
  const char* s2[] = {"y", "z"};
  out = run(*concat, {mrnet(0, 1, "%as", s1, 1u), mrnet(1, 1, "%as", s2, 2u)});
  char** strings = nullptr;
  std::uint32_t n = 0;
  ASSERT_TRUE(out);
  ASSERT_EQ(out->unpack("%as", &strings, &n), 0);
  ASSERT_EQ(n, 3u);
  EXPECT_STREQ(strings[0], "x");
  EXPECT_STREQ(strings[1], "y");
  EXPECT_STREQ(strings[2], "z");
  for (std::uint32_t i = 0; i < n; ++i) std::free(strings[i]);
  std::free(strings);

  const char bytes1[] = {'a', 'b'};
  const char bytes2[] = {'c'};
  EXPECT_EQ(array_of<char>(run(*concat, {mrnet(0, 1, "%ac", bytes1, 2u), mrnet(1, 1, "%ac", bytes2, 1u)}), "%ac"),
            (std::vector<char>{'a', 'b', 'c'}));

  const double d1[] = {0.5};
  const double d2[] = {1.5, 2.5};
  out = run(*concat, {mrnet(0, 1, "%Alf", d1, std::uint64_t{1}), mrnet(1, 1, "%Alf", d2, std::uint64_t{2})});
  double* doubles = nullptr;
  std::uint64_t count = 0;
  ASSERT_TRUE(out);
  ASSERT_EQ(out->unpack("%Alf", &doubles, &count), 0);
  EXPECT_EQ(std::vector<double>(doubles, doubles + count), (std::vector<double>{0.5, 1.5, 2.5}));
  std::free(doubles);
}

TEST(MrnetFilters, IntEqClassMergesClassesByValue) {
  auto classes = make("mrnet_int_eq_class");
  // Packet 1: class 7 = {10, 11}, class 3 = {12}; packet 2: class 3 = {20, 21}.
  const std::uint32_t v1[] = {7, 3}, c1[] = {2, 1}, m1[] = {10, 11, 12};
  const std::uint32_t v2[] = {3}, c2[] = {2}, m2[] = {20, 21};
  auto out = run(*classes, {mrnet(0, 150, "%aud %aud %aud", v1, 2u, c1, 2u, m1, 3u),
                            mrnet(1, 151, "%aud %aud %aud", v2, 1u, c2, 1u, m2, 2u)});
  ASSERT_TRUE(out);
  EXPECT_STREQ(out->get_FormatString(), "%aud %aud %aud");
  EXPECT_EQ(out->get_Tag(), 150);
  std::uint32_t *values = nullptr, *counts = nullptr, *members = nullptr;
  std::uint32_t nv = 0, nc = 0, nm = 0;
  ASSERT_EQ(out->unpack("%aud %aud %aud", &values, &nv, &counts, &nc, &members, &nm), 0);
  EXPECT_EQ(std::vector<std::uint32_t>(values, values + nv), (std::vector<std::uint32_t>{3, 7}));
  EXPECT_EQ(std::vector<std::uint32_t>(counts, counts + nc), (std::vector<std::uint32_t>{3, 2}));
  EXPECT_EQ(std::vector<std::uint32_t>(members, members + nm), (std::vector<std::uint32_t>{12, 20, 21, 10, 11}));
  std::free(values);
  std::free(counts);
  std::free(members);
}

TEST(MrnetFilters, IntEqClassRefusesCountsThatDoNotMatchItsArrays) {
  auto classes = make("mrnet_int_eq_class");
  const std::uint32_t values[] = {1, 2}, one_count[] = {1}, too_many[] = {5}, members[] = {9};
  auto error = failure(*classes, {mrnet(4, 1, "%aud %aud %aud", values, 2u, one_count, 1u, members, 1u)});
  EXPECT_TRUE(contains(error, "mrnet_int_eq_class") && contains(error, "2 class values but 1 member counts") &&
              contains(error, "from rank 4"))
      << error;
  error = failure(*classes, {mrnet(4, 1, "%aud %aud %aud", values, 1u, too_many, 1u, members, 1u)});
  EXPECT_TRUE(contains(error, "counts more members")) << error;
}

TEST(MrnetFilters, BuiltinsRefuseWavesOfMixedFormats) {
  auto sum = make("mrnet_sum");
  auto error = failure(*sum, {mrnet(3, 1, "%d", 1), mrnet(8, 1, "%ud", 2u)});
  EXPECT_TRUE(contains(error, "mrnet_sum") && contains(error, "\"%d\"") && contains(error, "\"%ud\"") &&
              contains(error, "from rank 8"))
      << error;
  auto concat = make("mrnet_array_concat");
  const std::int32_t a[] = {1};
  const std::uint32_t b[] = {2};
  error = failure(*concat, {mrnet(0, 1, "%ad", a, 1u), mrnet(1, 1, "%aud", b, 1u)});
  EXPECT_TRUE(contains(error, "mrnet_array_concat") && contains(error, "\"%aud\"")) << error;
}

TEST(MrnetFilters, BuiltinsRefuseFormatsTheyDoNotTake) {
  const std::int32_t array[] = {1};
  struct Case {
    const char* filter;
    Packet packet;
  };
  const std::vector<Case> cases{
      {"mrnet_sum", mrnet(0, 1, "%d %d", 1, 2)},
      {"mrnet_sum", mrnet(0, 1, "%s", "text")},
      {"mrnet_min", mrnet(0, 1, "%ad", array, 1u)},
      {"mrnet_max", mrnet(0, 1, "", 0)},
      {"mrnet_avg", mrnet(0, 1, "%d", 1)},
      {"mrnet_avg", mrnet(0, 1, "%s %d", "text", 1)},
      {"mrnet_avg", mrnet(0, 1, "%d %ud", 1, 1u)},
      {"mrnet_array_concat", mrnet(0, 1, "%d", 1)},
      {"mrnet_array_concat", mrnet(0, 1, "%ad %ad", array, 1u, array, 1u)},
      {"mrnet_int_eq_class", mrnet(0, 1, "%ad %ad %ad", array, 1u, array, 1u, array, 1u)},
  };
  for (const auto& c : cases) {
    auto filter = make(c.filter);
    const std::string format = (*MRN::codec::from_canopy(c.packet, 0))->get_FormatString();
    auto error = failure(*filter, {c.packet});
    EXPECT_TRUE(contains(error, c.filter) && contains(error, "\"" + format + "\"")) << c.filter << ": " << error;
  }
}

TEST(MrnetFilters, BuiltinsRefusePacketsThatAreNotMrnetPackets) {
  auto sum = make("mrnet_sum");
  // A format first that its values do not match (values alone are the compact form).
  Packet plain(1, {std::string("%d %d"), std::int32_t{5}});
  plain.set_source(6);
  auto error = failure(*sum, {plain});
  EXPECT_TRUE(contains(error, "mrnet_sum") && contains(error, "not an MRNet packet") && contains(error, "from rank 6"))
      << error;
}

TEST(MrnetFilters, BuiltinsTakeNoParameters) {
  auto error = create_error("mrnet_sum", Packet(0, {std::int32_t{1}}));
  EXPECT_TRUE(contains(error, "no parameters")) << error;
}

// ---- the adapter for MRNet filter functions ----

TEST(MrnetFilters, FunctionFilterSumsEachWaveAndKeepsTheFirstPacketsTag) {
  auto sum = make(MRN::layer::kFunctionFilter, function_params("IntegerSum"));
  ASSERT_TRUE(sum);
  auto out = run(*sum, {mrnet(0, 120, "%d", 1), mrnet(1, 121, "%d", 2), mrnet(2, 122, "%d", 39)});
  EXPECT_EQ(only<std::int32_t>(out, "%d"), 42);
  EXPECT_EQ(out->get_Tag(), 120);
  EXPECT_EQ(only<std::int32_t>(run(*sum, {mrnet(0, 120, "%d", -2)}), "%d"), -2);
  EXPECT_FALSE(sum->state_recoverable());
}

TEST(MrnetFilters, RecoverableFunctionFilterExtractsTheStateKeptAcrossWaves) {
  auto sum = make(MRN::layer::kRecoverableFunctionFilter, function_params("IntegerSum"),
                  FilterContext{1000001, 2, true, 2});
  auto other = make(MRN::layer::kRecoverableFunctionFilter, function_params("IntegerSum"));
  ASSERT_TRUE(sum && other);
  EXPECT_TRUE(sum->state_recoverable());
  EXPECT_EQ(only<std::int32_t>(run(*sum, {mrnet(0, 1, "%d", 1), mrnet(1, 1, "%d", 2)}), "%d"), 3);
  EXPECT_EQ(only<std::int32_t>(run(*sum, {mrnet(0, 1, "%d", 10)}), "%d"), 10);

  auto state = sum->extract_state();
  ASSERT_TRUE(state) << state.error();
  auto decoded = MRN::codec::from_canopy(*state, 0);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(only<std::int32_t>(*decoded, "%d"), 13);  // IntegerSum_get_state: the running total
  EXPECT_EQ((*decoded)->get_Tag(), FirstApplicationTag);

  // Each instance has its own state; the state is a packet the function takes.
  EXPECT_EQ(only<std::int32_t>(run(*other, {*state}), "%d"), 13);
  auto other_state = other->extract_state();
  ASSERT_TRUE(other_state) << other_state.error();
  EXPECT_EQ(only<std::int32_t>(*MRN::codec::from_canopy(*other_state, 0), "%d"), 13);
}

TEST(MrnetFilters, FunctionIsToldItsNodeStreamAndSources) {
  auto describe = make(MRN::layer::kFunctionFilter, function_params("Describe"),
                       FilterContext{.rank = 1000002, .stream = 3, .upstream = true, .children = 4, .descendants = 9});
  ASSERT_TRUE(describe);
  const double xs[] = {1.0};
  auto out = run(*describe, {mrnet(5, 140, "%alf %s", xs, 1u, "a"), mrnet(6, 141, "%alf %s", xs, 1u, "b")});
  ASSERT_TRUE(out);
  std::uint32_t rank = 0, children = 0, descendants = 0, stream = 0, source = 0, count = 0;
  std::int32_t param = 0;
  char* format = nullptr;
  ASSERT_EQ(out->unpack("%ud %ud %ud %ud %ud %ud %d %s", &rank, &children, &descendants, &stream, &source, &count,
                        &param, &format),
            0);
  EXPECT_EQ(rank, 1000002u);
  EXPECT_EQ(children, 4u);
  EXPECT_EQ(descendants, 9u);
  EXPECT_EQ(stream, MRN::layer::mrnet_stream_id(3, 5));
  EXPECT_EQ(source, 5u);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(param, -1);  // no parameters: Packet::NullPacket
  EXPECT_STREQ(format, "%alf %s");
  EXPECT_EQ(out->get_Tag(), 140);
  std::free(format);
}

// TopologyLocalInfo inside a commnode: the node's place in the live tree, as the
// node knew it when the stream was created (FilterContext).
TEST(MrnetFilters, FunctionIsToldWhereItsNodeStandsInTheTree) {
  const FilterContext context{.rank = 1000003, .stream = 2, .upstream = true, .children = 3, .siblings = 1,
                              .descendants = 5, .backends = 4, .depth = 1, .height = 2};
  auto place = make(MRN::layer::kFunctionFilter, function_params("Place"), context);
  ASSERT_TRUE(place);
  auto out = run(*place, {mrnet(0, 100, "%d", 1)});
  ASSERT_TRUE(out);
  std::uint32_t u[7] = {};
  ASSERT_EQ(out->unpack("%ud %ud %ud %ud %ud %ud %ud", &u[0], &u[1], &u[2], &u[3], &u[4], &u[5], &u[6]), 0);
  // rank, children, siblings, descendants, leaf descendants, root distance, max leaf distance
  EXPECT_EQ(std::vector<std::uint32_t>(u, u + 7), (std::vector<std::uint32_t>{1000003, 3, 1, 5, 4, 1, 2}));

  // The tree changed (an orphan adopted here): the next wave is told so.
  FilterContext now = context;
  now.children = 4;
  now.descendants = 6;
  now.backends = 5;
  ASSERT_TRUE(place->set_context(now));
  out = run(*place, {mrnet(0, 100, "%d", 1)});
  ASSERT_TRUE(out);
  ASSERT_EQ(out->unpack("%ud %ud %ud %ud %ud %ud %ud", &u[0], &u[1], &u[2], &u[3], &u[4], &u[5], &u[6]), 0);
  EXPECT_EQ(std::vector<std::uint32_t>(u, u + 7), (std::vector<std::uint32_t>{1000003, 4, 1, 6, 5, 1, 2}));
}

TEST(MrnetFilters, FunctionOnThePerBackendStreamSeesTheBackendsStreamId) {
  auto describe = make(MRN::layer::kFunctionFilter, function_params("Describe"),
                       FilterContext{1000000, MRN::layer::kPerBackendStream, true, 1});
  ASSERT_TRUE(describe);
  auto out = run(*describe, {mrnet(7, 100, "%d", 1)});
  ASSERT_TRUE(out);
  std::uint32_t u[6] = {};
  std::int32_t param = 0;
  char* format = nullptr;
  ASSERT_EQ(out->unpack("%ud %ud %ud %ud %ud %ud %d %s", &u[0], &u[1], &u[2], &u[3], &u[4], &u[5], &param, &format), 0);
  std::free(format);
  EXPECT_EQ(u[3], 7u);  // MRNet's per-back-end stream id: the back-end's rank
}

TEST(MrnetFilters, FilterParametersReachTheFunction) {
  auto describe = make(MRN::layer::kFunctionFilter, function_params("Describe", kToolFilter, mrnet_params(7)));
  ASSERT_TRUE(describe);
  auto param_of = [&] {
    auto out = run(*describe, {mrnet(0, 100, "%d", 1)});
    std::uint32_t u[6] = {};
    std::int32_t param = 0;
    char* format = nullptr;
    EXPECT_TRUE(out);
    if (!out) return -100;
    EXPECT_EQ(out->unpack("%ud %ud %ud %ud %ud %ud %d %s", &u[0], &u[1], &u[2], &u[3], &u[4], &u[5], &param, &format), 0);
    std::free(format);
    return param;
  };
  EXPECT_EQ(param_of(), 7);
  auto r = describe->set_params(function_params("Describe", kToolFilter, mrnet_params(42)));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(param_of(), 42);
  r = describe->set_params(function_params("Describe"));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(param_of(), -1);

  r = describe->set_params(function_params("IntegerSum", kToolFilter, mrnet_params(1)));
  EXPECT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "keeps its function")) << r.error();
  EXPECT_EQ(param_of(), -1);
}

TEST(MrnetFilters, MissingSharedObjectIsAnError) {
  auto error = create_error(MRN::layer::kFunctionFilter, function_params("IntegerSum", "/nonexistent/dir/filters.so"));
  EXPECT_TRUE(contains(error, "cannot load the MRNet filter") && contains(error, "/nonexistent/dir/filters.so"))
      << error;
}

TEST(MrnetFilters, MissingFunctionIsAnError) {
  auto error = create_error(MRN::layer::kFunctionFilter, function_params("NoSuchFilter"));
  EXPECT_TRUE(contains(error, kToolFilter) && contains(error, "no function NoSuchFilter")) << error;
}

TEST(MrnetFilters, MissingFormatStringIsAnError) {
  auto error = create_error(MRN::layer::kFunctionFilter, function_params("NoFormat"));
  EXPECT_TRUE(contains(error, kToolFilter) && contains(error, "no symbol NoFormat_format_string")) << error;
}

TEST(MrnetFilters, RecoverableFunctionFilterNeedsGetState) {
  auto error = create_error(MRN::layer::kRecoverableFunctionFilter, function_params("Describe"));
  EXPECT_TRUE(contains(error, "Describe_get_state") && contains(error, kToolFilter)) << error;
}

TEST(MrnetFilters, BadAdapterParametersAreAnError) {
  auto error = create_error(MRN::layer::kFunctionFilter, Packet{});
  EXPECT_TRUE(contains(error, "takes [0] the path")) << error;
  error = create_error(MRN::layer::kFunctionFilter, Packet(0, {std::string(kToolFilter)}));
  EXPECT_TRUE(contains(error, "takes [0] the path")) << error;
  error = create_error(MRN::layer::kFunctionFilter,
                       function_params("IntegerSum", kToolFilter, {std::string("%d %d"), std::int32_t{5}}));
  EXPECT_TRUE(contains(error, "IntegerSum") && contains(error, "not an MRNet packet")) << error;
}

// As in MRNet, NAME_format_string is not compared with the packets: the function
// gets a packet of another format and decides (SendBack takes "%d" and, called,
// fills packets_out_reverse, which is the error seen here).
TEST(MrnetFilters, APacketOfAnotherFormatThanTheFunctionsStillReachesItAsInMrnet) {
  auto back = make(MRN::layer::kFunctionFilter, function_params("SendBack"));
  ASSERT_TRUE(back);
  auto error = failure(*back, {mrnet(9, 1, "%ud", 2u)});
  EXPECT_TRUE(contains(error, "packets_out_reverse")) << error;
}

TEST(MrnetFilters, PacketsOutReverseIsAnErrorNotADrop) {
  auto send_back = make(MRN::layer::kFunctionFilter, function_params("SendBack"));
  ASSERT_TRUE(send_back);
  auto error = failure(*send_back, {mrnet(0, 1, "%d", 1)});
  EXPECT_TRUE(contains(error, "SendBack") && contains(error, "packets_out_reverse")) << error;
}
