#pragma once
// A HandlerClient (sidecar/delivery/handler_client.h) with no sockets behind it, for unit tests of
// what sits above the delivery seam (DeliveryPump, HealthProbe): it keeps every request it was
// given and answers only when the test says so. As the seam promises, no `done` runs inside the
// call that passed it; Abandon() drops the ones not run.

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/delivery/handler_client.h"

namespace streamcar::testing {

class FakeHandlerClient final : public delivery::HandlerClient {
 public:
  // One request as the client received it; `done` is empty once answered.
  struct Sent {
    delivery::HttpRequest request;
    Millis timeout{0};
    Done done;
  };

  // `slots`: the handler's concurrency (how many requests may be outstanding at once).
  explicit FakeHandlerClient(size_t slots) : slots_(slots) {}

  bool Send(delivery::HttpRequest&& request, Millis timeout, Done done) override {
    if (free_slots() == 0) return false;
    sent_.push_back({std::move(request), timeout, std::move(done)});
    ++outstanding_;
    return true;
  }
  void Probe(Millis /*timeout*/, std::function<void(bool healthy)> done) override {
    probes_.push_back(std::move(done));
  }
  size_t free_slots() const override { return slots_ - outstanding_; }
  void Abandon() override {
    for (auto& sent : sent_) sent.done = nullptr;
    probes_.clear();
    outstanding_ = 0;
  }

  // Every request sent so far, answered or not, in the order sent.
  const std::vector<Sent>& sent() const { return sent_; }
  size_t outstanding() const { return outstanding_; }

  // Answers request `index` (of sent()) with `response`; its slot is free again first, as a real
  // client's is by the time its callback runs.
  void Answer(size_t index, delivery::HandlerResponse response) {
    Done done = std::exchange(sent_.at(index).done, nullptr);
    if (!done) return;
    --outstanding_;
    done(std::move(response));
  }
  void AnswerStatus(size_t index, int status) {
    delivery::HandlerResponse response;
    response.status = status;
    Answer(index, std::move(response));
  }

  // The value of header `name` of request `index`, or "<absent>".
  std::string Header(size_t index, const std::string& name) const {
    for (const auto& [n, v] : sent_.at(index).request.headers) {
      if (n == name) return v;
    }
    return "<absent>";
  }

 private:
  const size_t slots_;
  size_t outstanding_ = 0;
  std::vector<Sent> sent_;
  std::vector<std::function<void(bool)>> probes_;
};

}  // namespace streamcar::testing
