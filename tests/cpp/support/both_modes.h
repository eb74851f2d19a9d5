// Runs a check of the control plane on an embedded controller and on a
// remote one (a controller service in this process), so both modes keep one
// meaning.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>

#include "client/remote_control_plane.h"
#include "server/controller_service.h"
#include "seqflow/controller.h"

namespace seqflow::test {

inline void in_both_modes(const std::function<void(ControlPlane&)>& check) {
  using namespace std::chrono_literals;
  {
    SCOPED_TRACE("embedded");
    Controller controller;
    check(controller);
  }
  {
    SCOPED_TRACE("remote");
    server::ControllerService service({});
    service.start();
    transport::ConnectionOptions options;
    options.timeout = 5s;
    RemoteControlPlane control(
        std::make_shared<transport::ConnectionPool>(std::make_shared<zmq::context_t>(1), service.endpoint(), options),
        5s);
    check(control);
  }
}

}  // namespace seqflow::test
