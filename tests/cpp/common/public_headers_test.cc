// The public headers name no third-party or src/ header: an installed
// seqflow compiles with nothing but its include/ directory (the ctest
// PublicHeadersStandAlone compiles each header alone to prove it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace seqflow {
namespace {

// The #include lines of `text` that name neither a standard header (<name>,
// no directory, no extension) nor a public one ("seqflow/name.h").
std::vector<std::string> foreign_includes(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t at = line.find("#include");
    if (at == std::string::npos || line.find_first_not_of(" \t") != at) continue;
    const size_t open = line.find_first_of("<\"", at);
    const size_t close = open == std::string::npos ? open : line.find_first_of(">\"", open + 1);
    if (close == std::string::npos) {
      out.push_back(line);
      continue;
    }
    const std::string name = line.substr(open + 1, close - open - 1);
    const bool standard = line[open] == '<' && name.find_first_of("/.") == std::string::npos;
    const bool is_public = line[open] == '"' && name.starts_with("seqflow/") && name.ends_with(".h") &&
                           name.find('/', 8) == std::string::npos;
    if (!standard && !is_public) out.push_back(name);
  }
  return out;
}

TEST(PublicHeaders, CheckFindsThirdPartyAndInternalIncludes) {
  EXPECT_EQ(foreign_includes("#include <vector>\n#include \"seqflow/value.h\"\n// #include <zmq.hpp>\n"),
            std::vector<std::string>{});
  EXPECT_EQ(foreign_includes("#include <nlohmann/json.hpp>\n#include \"core/custom_meta.h\"\n#include <zmq.hpp>\n"
                             "#include \"seqflow/../core/x.h\"\n"),
            (std::vector<std::string>{"nlohmann/json.hpp", "core/custom_meta.h", "zmq.hpp", "seqflow/../core/x.h"}));
}

TEST(PublicHeaders, IncludeOnlyStandardAndPublicHeaders) {
  size_t headers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SEQFLOW_PUBLIC_INCLUDE_DIR)) {
    if (entry.path().extension() != ".h") continue;
    ++headers;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    EXPECT_EQ(foreign_includes(text.str()), std::vector<std::string>{}) << entry.path();
  }
  EXPECT_GT(headers, 10u);
}

}  // namespace
}  // namespace seqflow
