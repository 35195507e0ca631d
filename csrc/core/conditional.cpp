#include "cuweave/conditional.hpp"

#include <string>

#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

namespace {

// The cuweave capture `stream` takes part in; `what` names the caller for the error when there is none.
std::shared_ptr<Capture> capture_of(const Stream& stream, const std::string& what) {
  std::shared_ptr<Capture> capture = Capture::of(stream);
  if (!capture) {
    throw InvalidArgument(what + " belongs inside a cuweave.capture block (or a graph function), on the capturing "
                                 "stream or the current stream there; this stream is not being captured");
  }
  return capture;
}

}  // namespace

ConditionHandle create_condition(Stream& capturing, unsigned default_value) {
  capture_of(capturing, "a graph condition");
  return on_device_of(capturing,
                      [&] { return backend().capture().create_condition(capturing.handle(), default_value); });
}

std::shared_ptr<Conditional> Conditional::add(std::shared_ptr<Stream> stream, ConditionHandle condition,
                                              ConditionalKind kind, unsigned bodies) {
  std::shared_ptr<Capture> root = capture_of(*stream, std::string("a conditional node (") + to_string(kind) + ")");
  CUWEAVE_EXPECTS(valid_body_count(kind, bodies), kBodyCounts);
  ConditionalNode node = on_device_of(
      *stream, [&] { return backend().capture().capture_conditional(stream->handle(), condition, kind, bodies); });
  return std::shared_ptr<Conditional>(new Conditional(std::move(stream), std::move(root), kind, std::move(node)));
}

Conditional::Conditional(std::shared_ptr<Stream> stream, std::shared_ptr<Capture> root, ConditionalKind kind,
                         ConditionalNode node)
    : stream_(std::move(stream)),
      root_(std::move(root)),
      kind_(kind),
      node_(std::move(node)),
      filled_(node_.bodies.size(), false) {}

Conditional::~Conditional() { abandon_body(); }

std::shared_ptr<Stream> Conditional::begin_body(unsigned index) {
  if (index >= node_.bodies.size()) {
    throw InvalidArgument("this " + std::string(to_string(kind_)) + " node has " +
                          std::to_string(node_.bodies.size()) + " bodies; there is no body " + std::to_string(index));
  }
  if (body_stream_) throw InvalidArgument("another body of this conditional node is open; end it first");
  if (filled_[index]) {
    throw InvalidArgument("body " + std::to_string(index) + " of this " + to_string(kind_) +
                          " node was captured already; each body is captured once");
  }
  if (root_->ended()) throw InvalidArgument("the capture this conditional node belongs to has ended");
  std::shared_ptr<Stream> body = OwnedStream::create(stream_->device(), stream_->priority(), /*blocking=*/false,
                                                     stream_->name().empty() ? std::string(to_string(kind_)) + " body"
                                                                        : stream_->name() + " " + to_string(kind_) +
                                                                              " body");
  on_device_of(*stream_, [&] {
    frontier_at_open_ = backend().capture().capture_frontier(stream_->handle());
    backend().capture().begin_capture_into(body->handle(), node_.bodies[index], root_->mode());
    try {
      root_->join_body(*body);
    } catch (...) {
      try {
        backend().capture().end_capture_into(body->handle());
      } catch (...) {
      }
      throw;
    }
  });
  filled_[index] = true;
  body_stream_ = body;
  // The body runs where the node is: after the capturing stream's work so far.
  if (sanitizer::enabled()) sanitizer::stream_waited_stream(*body, *stream_);
  return body;
}

void Conditional::close_body() noexcept {
  root_->leave_body(*body_stream_);
  body_stream_.reset();
  frontier_at_open_.clear();
}

void Conditional::end_body() {
  if (!body_stream_) throw InvalidArgument("no body of this conditional node is open");
  std::exception_ptr failure;
  bool moved = false;
  on_device_of(*body_stream_, [&] {
    try {
      moved = backend().capture().capture_frontier(stream_->handle()) != frontier_at_open_;
    } catch (...) {
      failure = std::current_exception();
    }
    // Ordered before the capturing stream's later work, which runs after the node.
    if (sanitizer::enabled() && !failure) sanitizer::stream_waited_stream(*stream_, *body_stream_);
    try {
      backend().capture().end_capture_into(body_stream_->handle());
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  });
  close_body();
  if (failure) std::rethrow_exception(failure);
  if (moved) {
    throw InvalidArgument(
        "work was queued on the capturing stream while a body of its " + std::string(to_string(kind_)) +
        " node was open: it runs after the node, not in the body. Inside the body's with-block queue work on the "
        "current stream (the body's stream), not with stream= set to the capturing stream");
  }
}

void Conditional::abandon_body() noexcept {
  if (!body_stream_) return;
  try {
    on_device_of(*body_stream_, [&] { backend().capture().end_capture_into(body_stream_->handle()); });
  } catch (...) {
    // The block's own exception is what the caller reports; the root capture's end will fail if this did.
  }
  close_body();
}

}  // namespace cuweave
