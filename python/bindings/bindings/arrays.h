// Moving C++ vectors into numpy arrays without copying.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace seqflow::bindings {

using Int64Array = nanobind::ndarray<nanobind::numpy, int64_t, nanobind::ndim<1>>;
using Int64Input = nanobind::ndarray<const int64_t, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;
using UInt64Input = nanobind::ndarray<const uint64_t, nanobind::ndim<1>, nanobind::c_contig, nanobind::device::cpu>;

// The array owns the vector's buffer through a capsule.
template <typename T>
nanobind::ndarray<nanobind::numpy, T, nanobind::ndim<1>> to_numpy(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  nanobind::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nanobind::ndarray<nanobind::numpy, T, nanobind::ndim<1>>(owned->data(), {owned->size()}, owner);
}

// The policy for properties that return such arrays: they carry their owner
// already, so nanobind must not add one (its default, reference_internal).
inline constexpr auto kArray = nanobind::rv_policy::automatic;

// A read-only view of `values`, a member of `owner`, which must be a Python
// object already (e.g. the self of a property); the view keeps it alive.
template <typename T, typename Owner>
nanobind::ndarray<nanobind::numpy, const T, nanobind::ndim<1>> view_of(const std::vector<T>& values,
                                                                       const Owner& owner) {
  return {values.data(), {values.size()}, nanobind::find(owner)};
}

inline std::span<const int64_t> as_span(const Int64Input& array) { return {array.data(), array.shape(0)}; }

// A BatchMeta's generations: none (not known) or one per sample.
inline std::span<const uint64_t> as_span(const std::optional<UInt64Input>& array) {
  if (!array) return {};
  return {array->data(), array->shape(0)};
}

}  // namespace seqflow::bindings
