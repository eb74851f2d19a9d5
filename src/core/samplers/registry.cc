// make_sampler: samplers by name with JSON arguments, as in config files.
// Unknown names, unknown argument names and wrong types are errors, so a
// typo in a config cannot silently fall back to a default.
#include <set>

#include "seqflow/error.h"
#include "seqflow/sampler.h"

namespace seqflow {
namespace {

class Arguments {
 public:
  Arguments(const std::string& sampler, const Value& args, std::set<std::string> known)
      : sampler_(sampler), args_(args.is_null() ? Value::object() : args) {
    if (!args_.is_object()) {
      throw_invalid("arguments of sampler '" + sampler + "' must be a JSON object, got " + args.dump());
    }
    for (const auto& [key, value] : args_.as_object()) {
      if (known.count(key) == 0) {
        throw_invalid("sampler '" + sampler + "' has no argument '" + key + "'");
      }
    }
  }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback) const {
    const Value* it = args_.find(key);
    if (it == nullptr) {
      if (!fallback) throw_invalid("sampler '" + sampler_ + "' needs argument '" + key + "'");
      return *fallback;
    }
    if (!it->is_integer()) {
      throw_invalid("argument '" + key + "' of sampler '" + sampler_ + "' must be an integer, got " + it->dump());
    }
    return it->as_int();
  }

  Workload workload() const {
    const Value* it = args_.find("workload");
    if (it == nullptr) return Workload::tokens();
    if (it->is_string()) return Workload::parse(it->as_string());
    if (it->is_object()) return Workload::from_json(it->dump());
    throw_invalid("argument 'workload' of sampler '" + sampler_ +
                  "' must be a spec string or a workload JSON object, got " + it->dump());
  }

  std::string text(const std::string& key, const std::string& fallback) const {
    const Value* it = args_.find(key);
    if (it == nullptr) return fallback;
    if (!it->is_string()) {
      throw_invalid("argument '" + key + "' of sampler '" + sampler_ + "' must be a string, got " + it->dump());
    }
    return it->as_string();
  }

 private:
  std::string sampler_;
  Value args_;
};

}  // namespace

std::shared_ptr<Sampler> make_sampler(const std::string& name, const Value& args) {
  if (name == "sequential") {
    Arguments(name, args, {});
    return make_sequential_sampler();
  }
  if (name == "rank_aware") {
    Arguments(name, args, {});
    return make_rank_aware_sampler();
  }
  if (name == "grpo_group_n") {
    const Arguments a(name, args, {"n_samples_per_prompt"});
    return make_grpo_group_n_sampler(a.integer("n_samples_per_prompt", std::nullopt));
  }
  if (name == "seqlen_balanced") {
    const Arguments a(name, args, {"n_samples_per_prompt", "dp_size", "algorithm", "default_length", "workload"});
    return make_seqlen_balanced_sampler(a.integer("n_samples_per_prompt", 1), a.integer("dp_size", std::nullopt),
                                        a.text("algorithm", "auto"), a.integer("default_length", -1), a.workload());
  }
  if (name == "token_budget") {
    const Arguments a(name, args, {"max_tokens", "n_samples_per_prompt", "dp_size", "default_length", "workload"});
    return make_token_budget_sampler(a.integer("max_tokens", std::nullopt), a.integer("n_samples_per_prompt", 1),
                                     a.integer("dp_size", std::nullopt), a.integer("default_length", -1), a.workload());
  }
  throw_invalid("unknown sampler '" + name +
                "'; known: sequential, grpo_group_n, rank_aware, seqlen_balanced, token_budget");
}

}  // namespace seqflow
