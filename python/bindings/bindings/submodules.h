// Each file in python/bindings binds one layer into its submodule.
#pragma once

#include <nanobind/nanobind.h>

namespace seqflow::bindings {

void bind_batch_meta(nanobind::module_ m);
void bind_balance(nanobind::module_ m);
// FitReport, calibrate and OnlineWorkload, into the balance submodule.
void bind_calibration(nanobind::module_ m);
void bind_pack(nanobind::module_ m);
void bind_client(nanobind::module_ m);
// NativeClient, into the client submodule.
void bind_native_client(nanobind::module_ m);
void bind_replay(nanobind::module_ m);
// Change and WatchBatch, into the client submodule.
void bind_watch(nanobind::module_ m);
// DTYPES, the names of the element types the engine stores.
void bind_dtype_names(nanobind::module_ m);
void bind_limits(nanobind::module_ m);
void bind_services(nanobind::module_ m);

}  // namespace seqflow::bindings
