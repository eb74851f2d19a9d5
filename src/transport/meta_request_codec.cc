#include "common/msgpack_writer.h"
#include "transport/wire_codec.h"

namespace seqflow::transport::wire {
namespace {

std::string meta_request_bytes(const MetaRequest& request) {
  const char* mode = request.mode == MetaMode::kInsert  ? "insert"
                     : request.mode == MetaMode::kFetch ? "fetch"
                                                        : "force_fetch";
  const bool has_extra = !request.sampling.extra.is_null();
  const bool leases = request.lease.count() != 0;
  MsgpackWriter out(256);
  out.map(10 + (has_extra ? 1 : 0) + (leases ? 1 : 0));
  out.string("fields");
  out.array(request.fields.size());
  for (const std::string& field : request.fields) out.string(field);
  out.string("batch_size");
  out.integer(request.batch_size);
  out.string("partition_id");
  out.string(request.partition_id);
  out.string("mode");
  out.string(mode);
  out.string("task_name");
  out.string(request.task_name);
  out.string("dp_rank");
  out.integer(request.sampling.dp_rank);
  out.string("batch_index");
  out.integer(request.sampling.batch_index);
  out.string("dp_rank_given");
  out.boolean(request.sampling.dp_rank_given);
  if (has_extra) {  // absent when empty: a plain fetch pays nothing for it
    out.string("sampling_extra");
    out.value(request.sampling.extra);
  }
  out.string("polling");
  out.boolean(request.polling);
  out.string("timeout_ms");
  out.integer(request.timeout.count());
  if (leases) {  // absent when 0, as sampling_extra
    out.string("lease_ms");
    out.integer(request.lease.count());
  }
  return std::move(out).take();
}

MetaRequest meta_request_of(std::string_view bytes, std::string_view what) {
  const EncodedMap header =
      encoded_header(bytes, what,
                     {"fields", "batch_size", "partition_id", "mode", "task_name", "dp_rank", "batch_index",
                      "dp_rank_given", "sampling_extra", "polling", "timeout_ms", "lease_ms"});
  MetaRequest request;
  request.fields = header.texts("fields");
  request.batch_size = header.integer("batch_size");
  request.partition_id = header.text("partition_id");
  request.mode = parse_meta_mode(header.text("mode"));
  request.task_name = header.text("task_name");
  request.sampling.dp_rank = header.integer("dp_rank");
  request.sampling.batch_index = header.integer("batch_index");
  request.sampling.dp_rank_given = header.boolean("dp_rank_given");
  if (header.has("sampling_extra")) {
    request.sampling.extra = header.decoded("sampling_extra");
    if (!request.sampling.extra.is_object()) header.fail("sampling_extra", "must be a map");
  }
  request.polling = header.boolean("polling");
  request.timeout = std::chrono::milliseconds(header.integer("timeout_ms"));
  if (header.has("lease_ms")) request.lease = std::chrono::milliseconds(header.integer("lease_ms"));
  return request;
}

}  // namespace

zmq::message_t meta_request_frame(const MetaRequest& request) { return copy_frame(meta_request_bytes(request)); }

MetaRequest read_meta_request(const Frames& frames, size_t index, std::string_view what) {
  return meta_request_of(header_bytes(frames, index, what), what);
}

}  // namespace seqflow::transport::wire
