#include <gtest/gtest.h>

#include <numeric>

#include "seqflow/error.h"
#include "seqflow/packed_sequence.h"
#include "test_support.h"

namespace seqflow::pack {
namespace {

using test::throws_invalid;

// Sample i holds ids 100 * i + 1, 100 * i + 2, ...
std::vector<std::vector<int64_t>> ids_for(const std::vector<int64_t>& lengths) {
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    out.emplace_back(static_cast<size_t>(lengths[i]));
    std::iota(out.back().begin(), out.back().end(), static_cast<int64_t>(100 * i + 1));
  }
  return out;
}

std::vector<std::span<const int64_t>> spans_of(const std::vector<std::vector<int64_t>>& samples) {
  return {samples.begin(), samples.end()};
}

Plan small_plan(PadTo pad_to, int64_t pad_chunk = 4) {
  const std::vector<int64_t> lengths = {5, 3, 7, 2, 9, 4};
  Options options;
  options.dp_size = 2;
  options.pack_max_length = 16;
  options.pad_to = pad_to;
  options.pad_chunk = pad_chunk;
  return plan(lengths, options);
}

TEST(PackMaterialize, PacksSamplesThenPaddingSequences) {
  const Plan p = small_plan(PadTo::kCap);
  const auto ids = ids_for(p.lengths);
  const auto spans = spans_of(ids);
  for (int64_t rank = 0; rank < 2; ++rank) {
    const auto packed = materialize(p, rank, 0, spans, {}, {7, -1});
    const auto& packs = p.packs[static_cast<size_t>(rank)][0];
    ASSERT_EQ(packed.size(), packs.size());
    for (size_t slot = 0; slot < packs.size(); ++slot) {
      const PackedSequence& seq = packed[slot];
      EXPECT_EQ(seq.samples, packs[slot].samples);
      EXPECT_EQ(seq.padding, packs[slot].padding);
      std::vector<int64_t> expected_ids;
      std::vector<int64_t> sizes;
      for (int64_t i : packs[slot].samples) {
        expected_ids.insert(expected_ids.end(), ids[static_cast<size_t>(i)].begin(), ids[static_cast<size_t>(i)].end());
        sizes.push_back(p.lengths[static_cast<size_t>(i)]);
      }
      const size_t real = expected_ids.size();
      expected_ids.resize(16, 7);
      EXPECT_EQ(seq.input_ids, expected_ids);
      std::vector<int64_t> expected_labels(expected_ids.begin(),
                                           expected_ids.begin() + static_cast<std::ptrdiff_t>(real));
      expected_labels.resize(16, -1);
      EXPECT_EQ(seq.labels, expected_labels);
      for (int64_t pad : padding_sequences(packs[slot].padding, 4)) sizes.push_back(pad);
      std::vector<int32_t> bounds = {0};
      std::vector<int64_t> positions;
      for (int64_t size : sizes) {
        bounds.push_back(bounds.back() + static_cast<int32_t>(size));
        for (int64_t q = 0; q < size; ++q) positions.push_back(q);
      }
      EXPECT_EQ(seq.cu_seqlens, bounds);
      EXPECT_EQ(seq.position_ids, positions);
    }
  }
}

TEST(PackMaterialize, TakesLabelsAndFlatSamples) {
  const Plan p = small_plan(PadTo::kNone);
  const auto ids = ids_for(p.lengths);
  std::vector<int64_t> flat;
  std::vector<int64_t> offsets = {0};
  for (const auto& sample : ids) {
    flat.insert(flat.end(), sample.begin(), sample.end());
    offsets.push_back(static_cast<int64_t>(flat.size()));
  }
  const auto split = split_flat(flat, offsets, "token_ids");
  std::vector<std::vector<int64_t>> labels = ids;
  for (auto& sample : labels) {
    for (auto& v : sample) v = -v;
  }
  const auto packed = materialize(p, 0, 0, split, spans_of(labels), {});
  const auto plain = materialize(p, 0, 0, spans_of(ids), {}, {});
  ASSERT_EQ(packed.size(), plain.size());
  for (size_t slot = 0; slot < packed.size(); ++slot) {
    EXPECT_EQ(packed[slot].input_ids, plain[slot].input_ids);
    for (size_t t = 0; t < packed[slot].labels.size(); ++t) EXPECT_EQ(packed[slot].labels[t], -plain[slot].labels[t]);
  }
}

TEST(PackMaterialize, NamesBadInput) {
  const Plan p = small_plan(PadTo::kCap);
  auto ids = ids_for(p.lengths);
  const auto spans = spans_of(ids);
  EXPECT_TRUE(throws_invalid([&] { materialize(p, 2, 0, spans, {}, {}); }, {"rank must be in 0..1, got 2"}));
  EXPECT_TRUE(throws_invalid([&] { materialize(p, 0, -1, spans, {}, {}); }, {"step must be in 0..0, got -1"}));
  EXPECT_TRUE(throws_invalid([&] { materialize(p, 0, 0, std::span(spans).first(5), {}, {}); },
                             {"token_ids has 5 samples but the plan has 6"}));
  EXPECT_TRUE(throws_invalid([&] { materialize(p, 0, 0, spans, std::span(spans).first(2), {}); },
                             {"labels has 2 samples but token_ids has 6"}));
  ids[4].pop_back();
  const auto short_spans = spans_of(ids);
  EXPECT_TRUE(throws_invalid(
      [&] {
        for (int64_t rank = 0; rank < 2; ++rank) materialize(p, rank, 0, short_spans, {}, {});
      },
      {"token_ids[4] has 8 tokens but the plan was made with length 9"}));
  Plan bad = p;
  bad.packs[0][0][0].samples.push_back(17);
  EXPECT_TRUE(throws_invalid([&] { materialize(bad, 0, 0, spans, {}, {}); }, {"sample 17", "6 samples"}));
  bad = p;
  bad.packs[0][0][0].padding = kMaxPackLength;
  EXPECT_TRUE(throws_invalid([&] { materialize(bad, 0, 0, spans, {}, {}); }, {"2147483647"}));
  const std::vector<int64_t> flat = {1, 2, 3};
  EXPECT_TRUE(throws_invalid(
      [&] {
        split_flat(flat, std::vector<int64_t>{0, 2, 1}, "token_ids");
      },
      {"token_ids.offsets must be ascending and within values"}));
  EXPECT_TRUE(throws_invalid([&] { split_flat(flat, std::vector<int64_t>{0, 4}, "labels"); }, {"labels.offsets"}));
  EXPECT_TRUE(throws_invalid([&] { split_flat(flat, {}, "labels"); }, {"labels.offsets"}));
}

TEST(PackMicroBatchOrder, OrdersAndRestores) {
  MicroBatchPlan plan;
  plan.batches = {{{3, 0}, {5}}, {{1, 4}, {2}}};
  EXPECT_EQ(micro_batch_order(plan, std::nullopt), (std::vector<int64_t>{3, 0, 5, 1, 4, 2}));
  EXPECT_EQ(micro_batch_order(plan, 1), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_TRUE(throws_invalid([&] { micro_batch_order(plan, 2); }, {"rank must be in 0..1, got 2"}));
  const std::vector<int64_t> order = {3, 0, 5, 1, 4, 2};
  EXPECT_EQ(restore_order(order), inverse_permutation(order));
  EXPECT_EQ(restore_order(std::vector<int64_t>{9, 1, 4}), (std::vector<int64_t>{1, 2, 0}));
}

}  // namespace
}  // namespace seqflow::pack
