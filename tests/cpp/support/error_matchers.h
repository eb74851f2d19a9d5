// Error matchers of every layer's tests: a seqflow::Error's code and the
// fragments its message must hold.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "seqflow/error.h"

namespace seqflow::test {

// Passes when `fn` throws seqflow::Error with `code` and a message holding
// every fragment.
inline ::testing::AssertionResult throws_code(const std::function<void()>& fn, ErrorCode code,
                                              const std::vector<std::string_view>& fragments = {}) {
  try {
    fn();
  } catch (const Error& error) {
    const std::string message = error.what();
    if (error.code() != code) {
      return ::testing::AssertionFailure()
             << "wrong error code " << static_cast<int>(error.code()) << "; message: " << message;
    }
    for (std::string_view fragment : fragments) {
      if (message.find(fragment) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << fragment << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "threw a non-seqflow exception: " << error.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Passes when `fn` throws seqflow::Error with kInvalidArgument and a message
// that contains every fragment.
inline ::testing::AssertionResult throws_invalid(const std::function<void()>& fn,
                                                 std::initializer_list<std::string_view> fragments) {
  return throws_code(fn, ErrorCode::kInvalidArgument, std::vector<std::string_view>(fragments));
}

}  // namespace seqflow::test
