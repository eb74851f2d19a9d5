// Workload models: cost formulas, parsing, and overflow that is reported, never wrapped.
#include <gtest/gtest.h>

#include "seqflow/workload.h"
#include "test_support.h"

namespace seqflow {
namespace {

using test::throws_invalid;

constexpr int64_t kVerlLinear = 24576;  // verl's 6 * hidden (4096)

TEST(Workload, TokensCostIsTheLength) {
  const Workload w = Workload::tokens();
  for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4096}, int64_t{1} << 30}) {
    EXPECT_EQ(w.cost(length), length);
  }
  EXPECT_TRUE(w.is_tokens());
  EXPECT_EQ(w.name(), "tokens");
}

TEST(Workload, VerlCostIsLinearPlusSquare) {
  const Workload w = Workload::verl();
  for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{1000}, int64_t{32768}, int64_t{1} << 20}) {
    EXPECT_EQ(w.cost(length), kVerlLinear * length + length * length) << "length " << length;
  }
  EXPECT_FALSE(w.is_tokens());
  EXPECT_EQ(w.name(), "verl");
  EXPECT_EQ(w.linear(), kVerlLinear);
  EXPECT_EQ(w.quadratic_term(), 1);
}

TEST(Workload, QuadraticCostIsALinearPlusBSquare) {
  const int64_t coefficients[][2] = {{1, 0}, {0, 1}, {3, 2}, {100, 7}, {0, 5}, {12, 0}};
  for (auto [a, b] : coefficients) {
    const Workload w = Workload::quadratic(a, b);
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{9}, int64_t{12345}}) {
      EXPECT_EQ(w.cost(length), a * length + b * length * length) << "a=" << a << " b=" << b;
    }
  }
  EXPECT_TRUE(Workload::quadratic(1, 0).is_tokens());
  EXPECT_EQ(Workload::quadratic(3, 2).name(), "quadratic(3,2)");
}

TEST(Workload, CostsAppliesTheModelToEveryLength) {
  const test::Weights lengths = {0, 5, 17, 300};
  const Workload w = Workload::quadratic(4, 3);
  const std::vector<int64_t> costs = w.costs(lengths);
  ASSERT_EQ(costs.size(), lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_EQ(costs[i], 4 * lengths[i] + 3 * lengths[i] * lengths[i]);
  }
  EXPECT_EQ(Workload::tokens().costs(lengths), lengths);
}

TEST(Workload, ParseAcceptsEverySpelling) {
  EXPECT_TRUE(Workload::parse("tokens").is_tokens());
  EXPECT_EQ(Workload::parse("verl").name(), "verl");
  EXPECT_EQ(Workload::parse("verl").cost(10), kVerlLinear * 10 + 100);
  for (const char* spec : {"quadratic(5,2)", "quadratic:5,2", "quadratic( 5 , 2 )"}) {
    const Workload w = Workload::parse(spec);
    EXPECT_EQ(w.linear(), 5) << spec;
    EXPECT_EQ(w.quadratic_term(), 2) << spec;
    EXPECT_EQ(w.cost(10), 5 * 10 + 2 * 100) << spec;
  }
}

TEST(Workload, ParseRejectsBadSpecsNamingThem) {
  for (const char* spec : {"cubic", "", "Tokens", "quadratic", "quadratic(1)", "quadratic(a,b)", "quadratic(1,2",
                           "quadratic(-1,2)", "quadratic(1,-2)", "quadratic(1.5,2)", "quadratic(0,0)"}) {
    EXPECT_TRUE(throws_invalid([&] { Workload::parse(spec); }, {"workload"})) << spec;
  }
  EXPECT_TRUE(throws_invalid([] { Workload::parse("cubic"); }, {"workload", "'cubic'"}));
  EXPECT_TRUE(throws_invalid([] { Workload::parse("quadratic(x,2)"); }, {"workload", "x"}));
}

TEST(Workload, QuadraticRejectsNegativeOrZeroCoefficients) {
  EXPECT_TRUE(throws_invalid([] { Workload::quadratic(-1, 2); }, {"a=-1"}));
  EXPECT_TRUE(throws_invalid([] { Workload::quadratic(1, -3); }, {"b=-3"}));
  EXPECT_TRUE(throws_invalid([] { Workload::quadratic(0, 0); }, {"quadratic(0, 0)"}));
}

TEST(Workload, NegativeLengthIsRejected) {
  EXPECT_TRUE(throws_invalid([] { Workload::verl().cost(-4); }, {"-4"}));
  const test::Weights lengths = {3, 1, -7};
  EXPECT_TRUE(throws_invalid([&] { Workload::tokens().costs(lengths, "seqlens"); }, {"seqlens[2]", "-7"}));
}

TEST(Workload, CostOverflowIsReportedNotWrapped) {
  // Largest length whose verl cost fits, found from the formula in 128 bits.
  int64_t lo = 0;
  int64_t hi = int64_t{1} << 32;
  while (lo + 1 < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    (test::model_cost(kVerlLinear, 1, mid) ? lo : hi) = mid;
  }
  EXPECT_EQ(Workload::verl().cost(lo), *test::model_cost(kVerlLinear, 1, lo));
  EXPECT_TRUE(throws_invalid([&] { Workload::verl().cost(hi); }, {std::to_string(hi), "overflow"}));
  EXPECT_TRUE(throws_invalid([] { Workload::verl().cost(INT64_MAX); }, {"overflow"}));
  // The linear term alone can overflow too.
  EXPECT_TRUE(throws_invalid([] { Workload::quadratic(4, 0).cost(INT64_MAX / 2); }, {"overflow"}));
  EXPECT_TRUE(throws_invalid([] { Workload::quadratic(3, 1).cost(INT64_MAX / 2); }, {"overflow"}));
}

// Without a square term, L * L must not matter: a cost that fits is returned.
TEST(Workload, LinearModelsDoNotOverflowOnAnUnusedSquare) {
  const int64_t beyond_square = int64_t{1} << 33;  // its square does not fit in int64
  EXPECT_EQ(Workload::tokens().cost(beyond_square), beyond_square);
  EXPECT_EQ(Workload::tokens().cost(INT64_MAX), INT64_MAX);
  EXPECT_EQ(Workload::quadratic(5, 0).cost(beyond_square), 5 * beyond_square);
  EXPECT_EQ(Workload::quadratic(2, 0).cost(INT64_MAX / 2), INT64_MAX - 1);
  const test::Weights lengths = {beyond_square, 7};
  EXPECT_EQ(Workload::quadratic(5, 0).costs(lengths), (std::vector<int64_t>{5 * beyond_square, 35}));
}

// Workload::costs is documented to name the parameter and the index on error,
// overflow included.
TEST(Workload, CostsNamesParameterAndIndexOnOverflow) {
  const test::Weights lengths = {10, 4000000000};
  EXPECT_TRUE(throws_invalid([&] { Workload::verl().costs(lengths, "weights"); }, {"weights[1]", "4000000000"}));
}

}  // namespace
}  // namespace seqflow
