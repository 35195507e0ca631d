#include "cuweave/owned_stream.hpp"
#include "cuweave/weave.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

#include "cuweave/capture.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/inline_vector.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/sm_partition.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

using sanitizer::Access;
using sanitizer::AccessKind;
using sanitizer::AccessSpan;

// An event recorded right after an operation, and what a wait for it implies. Part of its operation: a seal costs
// an event from the pool and its record, no allocation of its own (one is recorded for each operation of a chain
// that makes new arrays).
struct Weave::Seal {
  EventHandle event = nullptr;  // the pool's; null until recorded
  int device = -1;
  // The strand's clock at the record (its own entry may be older than the sealed operation's tick, which stands
  // for it): shared with the strand's other seals until it next waits.
  std::shared_ptr<const std::vector<std::uint64_t>> after;

  Seal() = default;
  Seal(const Seal&) = delete;
  Seal& operator=(const Seal&) = delete;
  ~Seal() {
    if (!event) return;
    if (sanitizer::ever_enabled()) sanitizer::event_destroyed(event);
    services().events().release(device, event);
  }
};

struct Weave::Operation {
  Operation(int strand, std::uint64_t tick, RecycledBlocks& memory) : strand(strand), tick(tick), memory(&memory) {}
  bool sealed() const noexcept { return seal.event != nullptr; }

  int strand = 0;
  std::uint64_t tick = 0;  // 1, 2, ... on its strand (strand 0's entry is 1)
  Seal seal;
  std::size_t references = 0;  // OperationRefs
  RecycledBlocks* memory;      // the weave's operation_memory_, where it goes back
};

Weave::OperationRef::OperationRef(Operation* operation) noexcept : operation_(operation) {
  if (operation_) ++operation_->references;
}

Weave::OperationRef::OperationRef(const OperationRef& other) noexcept : OperationRef(other.operation_) {}

// Through a temporary, whose destructor lets the previous operation go (after the count of `other`'s: they may be one).
Weave::OperationRef& Weave::OperationRef::operator=(const OperationRef& other) noexcept {
  OperationRef copy(other);
  std::swap(operation_, copy.operation_);
  return *this;
}

Weave::OperationRef& Weave::OperationRef::operator=(OperationRef&& other) noexcept {
  OperationRef taken(std::move(other));
  std::swap(operation_, taken.operation_);
  return *this;
}

Weave::OperationRef::~OperationRef() {
  if (!operation_ || --operation_->references != 0) return;
  RecycledBlocks* memory = operation_->memory;
  operation_->~Operation();
  memory->give_back(operation_, sizeof(Operation));
}

// What a strand's last operation touched, inside the strand: the usual operation touches one or two ranges.
constexpr std::size_t kInlineTouched = 2;

// Note [A placement's cache lines]
// A weave places an operation between two launches, and a launch through the driver evicts much of what the last
// placement read. On one H200, placement held 7% of a woven wide DAG's host time, about 0.35 µs an operation, for
// some 300 instructions: its reads cost more than its instructions. So what a chain's step reads lies together: a
// strand's fields for it (its last operation, its clock, its counts, what the last operation touched, inside the
// strand), the weave's own at its start, and the current stream's compare needs neither the stack nor the stream.
// (On the simulator, with 64 KB evicted at each launch, a woven step of the wide DAG missed 16 lines of the first
// level cache more than the same launch by hand, where it missed 20 before.)
struct Weave::Strand {
  OperationRef last;                 // null before the strand's first operation
  std::vector<std::uint64_t> clock;  // [m]: the last tick of strand m this strand's next work follows
  std::uint64_t used = 0;            // Weave::uses_ when last chosen; 0: never
  std::size_t operations = 0;        // placed on it (WeaveCounts: the weave's are the strands' sum)
  std::shared_ptr<Stream> stream;
  bool placeable = true;
  InlineVector<Access, kInlineTouched> last_touched;  // what `last` read and wrote
  // `clock` as the seals recorded since its last change by a wait share it; null: none recorded since.
  std::shared_ptr<const std::vector<std::uint64_t>> sealed_clock;

  void touched(AccessSpan accesses) {
    last_touched.clear();
    for (const Access& access : accesses) last_touched.push_back(access);
  }
  AccessSpan last_accesses() const noexcept { return AccessSpan(last_touched.data(), last_touched.size()); }
};

namespace {
std::uint64_t clock_at(const std::vector<std::uint64_t>& clock, int strand) {
  return static_cast<std::size_t>(strand) < clock.size() ? clock[strand] : 0;
}

// True when the writes in `accesses` cover every range `touched` writes: whoever needs those results later
// needs the writer, and through its strand's order everything before it. What `touched` only read is no result
// (Note [Weaving]: a later writer waits for the read through a seal recorded when it needs one).
// A stepped write covers its own pattern only (Note [Stepped accesses]).
bool overwrites(AccessSpan accesses, AccessSpan touched) {
  for (const Access& t : touched) {
    if (t.kind == AccessKind::Read) continue;
    if (t.stepped() && std::any_of(accesses.begin(), accesses.end(), [&t](const Access& a) {
          return a.kind != AccessKind::Read && a.bytes() == t.bytes();
        })) {
      continue;
    }
    std::uintptr_t covered = t.begin;
    bool progress = true;
    while (covered < t.end && progress) {
      progress = false;
      for (const Access& a : accesses) {
        if (a.kind != AccessKind::Read && !a.stepped() && a.begin <= covered && a.end > covered) {
          covered = a.end;
          progress = true;
        }
      }
    }
    if (covered < t.end) return false;
  }
  return true;
}

// `operation`'s read among `reads`, which keep the latest one per strand.
template <typename OperationRef>
void note_read(std::vector<OperationRef>& reads, const OperationRef& operation) {
  for (OperationRef& read : reads) {
    if (read->strand == operation->strand) {
      read = operation;
      return;
    }
  }
  reads.push_back(operation);
}

// Streams that weaves made, kept for the next weaves of their device: making streams costs more than placing many
// operations. Each weave takes them in the same order as the last, so a loop of weaves keeps each array on the
// stream it used before (an array used on another stream moves its free after that stream: an event recorded and
// a hold). Leaked, so that no stream is destroyed after CUDA has gone, at exit.
std::mutex& spare_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<int, std::vector<std::shared_ptr<Stream>>>& spare_streams() {  // LOCK: spare_mutex()
  static auto* spare = new std::map<int, std::vector<std::shared_ptr<Stream>>>;
  return *spare;
}
std::size_t streams_made = 0;  // LOCK: spare_mutex(); each made stream's name has its number

// `count` streams of `device` that no weave holds now: the spare ones first, in their order, then new ones.
std::vector<std::shared_ptr<Stream>> take_spare_streams(int device, std::size_t count) {
  std::vector<std::shared_ptr<Stream>> taken;
  taken.reserve(count);
  std::lock_guard<std::mutex> lock(spare_mutex());
  std::vector<std::shared_ptr<Stream>>& spare = spare_streams()[device];
  const std::size_t kept = std::min(count, spare.size());
  std::move(spare.begin(), spare.begin() + static_cast<std::ptrdiff_t>(kept), std::back_inserter(taken));
  spare.erase(spare.begin(), spare.begin() + static_cast<std::ptrdiff_t>(kept));
  while (taken.size() < count) {
    taken.push_back(OwnedStream::create(device, 0, false, "weave[" + std::to_string(streams_made++) + "]"));
  }
  return taken;
}

void refuse_nesting(const Weave* active) {
  if (active != nullptr) {
    throw InvalidArgument("a weave is already active on this thread: its block places this work already (leave the "
                          "inner cuweave.weave() out; nested weaves would order neither's streams after the other's)");
  }
}
}  // namespace

std::shared_ptr<Weave> Weave::begin(std::shared_ptr<Stream> first, std::vector<std::shared_ptr<Stream>> others) {
  refuse_nesting(active_);
  std::shared_ptr<Weave> weave(new Weave);
  weave->start(std::move(first), std::move(others));
  return weave;
}

std::shared_ptr<Weave> Weave::begin_on_current(std::size_t count) {
  CUWEAVE_EXPECTS(count >= 1, "a weave needs at least 1 stream (the current one)");
  refuse_nesting(active_);
  std::shared_ptr<Weave> weave(new Weave);
  std::shared_ptr<Stream> first = current_stream::get();
  std::vector<std::shared_ptr<Stream>> others;
  if (const std::shared_ptr<SmPartition>& partition = first->partition()) {
    // Woven work stays on the current stream's SM partition: streams of their own on it, made for the block (kept
    // aside, they would keep the partition alive for good).
    others.reserve(count - 1);
    for (std::size_t i = 0; i + 1 < count; ++i) {
      others.push_back(OwnedStream::create_on(partition, 0, "weave[" + std::to_string(i) + "] on " +
                                                                std::to_string(partition->sms()) + " SMs"));
    }
  } else {
    weave->borrowed_ = take_spare_streams(first->device(), count - 1);  // given back as the weave ends, or goes
    others = weave->borrowed_;
  }
  weave->start(std::move(first), std::move(others));
  return weave;
}

void Weave::start(std::shared_ptr<Stream> first, std::vector<std::shared_ptr<Stream>> others) {
  capture_ = Capture::of(*first);
  device_ = first->device();
  // Room for the strands, and in each strand's clock for an entry per strand, taken once: grown one strand at a
  // time, beginning a block of 8 streams reallocated clocks 36 times and the strands 4 times (loops begin many).
  strands_.reserve(1 + others.size());
  first_stream_ = first.get();
  add_strand(std::move(first), true);
  strands_per_device_ = 1 + others.size();
  for (auto& stream : others) {
    CUWEAVE_EXPECTS(stream->device() == device_, "a weave's streams must be on the current stream's device " +
                                                     std::to_string(device_) + ", not device " +
                                                     std::to_string(stream->device()));
    if (stream != strands_[0].stream) add_strand(std::move(stream), true);
  }
  entry_ = make_operation(0, 1);
  Strand& first_strand = strands_[0];
  first_strand.last = entry_;
  first_strand.touched({sanitizer::everything()});
  first_strand.clock[0] = 1;
  active_ = this;
}

Weave::~Weave() {
  if (active_ == this) active_ = nullptr;
  give_back_streams();
}

void Weave::give_back_streams() noexcept {
  if (borrowed_.empty()) return;
  std::lock_guard<std::mutex> lock(spare_mutex());
  // Back first, in the order taken (see spare_streams()).
  std::map<int, std::vector<std::shared_ptr<Stream>>>& spare = spare_streams();
  for (auto it = borrowed_.rbegin(); it != borrowed_.rend(); ++it) {
    std::vector<std::shared_ptr<Stream>>& of_device = spare[(*it)->device()];
    of_device.insert(of_device.begin(), std::move(*it));
  }
  borrowed_.clear();
}

void Weave::add_device(int device) {
  if (capture_) {
    throw InvalidArgument("inside a capture a weave places work on its own device's streams (device " +
                          std::to_string(this->device()) + "), and this operation's data is on device " +
                          std::to_string(device) + ": give it a stream of that device (stream=), or weave each "
                          "device's work in a capture of its own");
  }
  std::vector<std::shared_ptr<Stream>> taken = take_spare_streams(device, strands_per_device_);
  for (std::shared_ptr<Stream>& stream : taken) {
    borrowed_.push_back(stream);
    add_strand(std::move(stream), true);
  }
  needed_.resize(strands_.size(), nullptr);
}

int Weave::add_strand(std::shared_ptr<Stream> stream, bool placeable) {
  Strand strand;
  strand.stream = std::move(stream);
  strand.placeable = placeable;
  strand.clock.reserve(std::max(strands_.capacity(), strands_.size() + 1));
  strands_.push_back(std::move(strand));
  for (Strand& l : strands_) l.clock.resize(strands_.size(), 0);
  return static_cast<int>(strands_.size() - 1);
}

int Weave::find_strand(const Stream& stream) const {
  for (std::size_t i = 0; i < strands_.size(); ++i) {
    if (strands_[i].stream.get() == &stream) return static_cast<int>(i);
  }
  return -1;
}

int Weave::continued_strand(AccessSpan accesses, int chosen, int device) {
  if (accesses.empty() || !stepped_.empty() || !device_copies_.empty()) return -1;
  const Operation* last = nullptr;
  continued_.clear();
  for (const Access& access : accesses) {
    if (access.kind == AccessKind::Read || access.stepped() || access.begin >= access.end) return -1;
    Segment* segment = find_segment(access.begin);
    if (segment == nullptr || segment->end != access.end || !segment->reads.empty()) return -1;
    const Operation* writer = segment->write.get();
    if (writer == entry_.get() || (last && writer != last)) return -1;
    last = writer;
    continued_.push_back(segment);
  }
  const int strand = last->strand;
  const Strand& here = strands_[strand];
  if (here.last.get() != last || here.last_touched.size() != accesses.size()) return -1;
  for (std::size_t i = 0; i < accesses.size(); ++i) {
    const Access& touched = here.last_touched[i];
    if (touched.kind == AccessKind::Read || touched.begin != accesses[i].begin || touched.end != accesses[i].end) {
      return -1;
    }
  }
  if (chosen >= 0) return chosen == strand ? strand : -1;
  // What choose_strand() would choose: the strand whose last operation is the one needed.
  return here.placeable && here.stream->device() == device ? strand : -1;
}

void Weave::collect_dependencies(AccessSpan accesses) {
  needed_.assign(strands_.size(), nullptr);
  touches_entry_ = false;
  auto need = [this](Operation* operation) {
    touches_entry_ = touches_entry_ || operation == entry_.get();
    Operation*& slot = needed_[operation->strand];
    if (!slot || slot->tick < operation->tick) slot = operation;
  };
  for (const Access& access : accesses) {
    if (access.begin >= access.end) continue;
    const bool writes = access.kind != AccessKind::Read;
    for (const SteppedBytes& kept : stepped_) {  // Note [Stepped accesses]
      if (!first_shared_run(kept.bytes, access.bytes())) continue;
      if (kept.write) need(kept.write.get());
      if (writes) {
        for (const OperationRef& read : kept.reads) need(read.get());
      }
    }
    const bool stepped = access.stepped();
    std::uintptr_t at = access.begin;
    auto it = shadow_.upper_bound(access.begin);
    if (it != shadow_.begin() && std::prev(it)->second.end > access.begin) --it;
    for (; it != shadow_.end() && it->first < access.end; ++it) {
      if (it->first > at) need(entry_.get());  // a gap the block has not touched
      at = it->second.end;
      if (stepped && !first_shared_run(BytePattern{it->first, it->second.end}, access.bytes())) continue;
      need(it->second.write.get());
      if (writes) {
        for (const OperationRef& read : it->second.reads) need(read.get());
      }
    }
    if (at < access.end) need(entry_.get());
  }
}

int Weave::choose_strand(int device) const {
  auto choosable = [this, device](std::size_t i) {
    return strands_[i].placeable && strands_[i].stream->device() == device;
  };
  for (std::size_t i = 0; i < strands_.size(); ++i) {
    if (choosable(i) && needed_[i] && needed_[i] == strands_[i].last.get()) return static_cast<int>(i);
  }
  int least = -1;
  for (std::size_t i = 0; i < strands_.size(); ++i) {
    if (choosable(i) && (least < 0 || strands_[i].used < strands_[least].used)) least = static_cast<int>(i);
  }
  return least;
}

void Weave::seal_last(int strand) {
  Strand& l = strands_[strand];
  if (!l.last || l.last->sealed()) return;
  Seal& seal = l.last->seal;
  seal.device = l.stream->device();
  seal.event = l.stream->record_pooled(services().events());
  if (!l.sealed_clock) l.sealed_clock = std::make_shared<const std::vector<std::uint64_t>>(l.clock);
  seal.after = l.sealed_clock;
  ++records_;
}

Weave::Operation* Weave::sealed_for(Operation* operation) {
  if (!operation->sealed()) {
    // Not sealed: it is its strand's last operation (a strand seals before going on past what others may need),
    // or one whose bytes were all overwritten after it, which the strand's last operation then covers.
    seal_last(operation->strand);
    return operation->sealed() ? operation : strands_[operation->strand].last.get();
  }
  return operation;
}

void Weave::order_after(int strand) {
  Strand& here = strands_[strand];
  sealed_.clear();
  for (std::size_t m = 0; m < needed_.size(); ++m) {
    if (static_cast<int>(m) == strand || !needed_[m] || needed_[m]->tick <= here.clock[m]) continue;
    sealed_.push_back(sealed_for(needed_[m]));
  }
  for (std::size_t i = 0; i < sealed_.size(); ++i) {
    const Operation* waited = sealed_[i];
    bool implied = false;  // another seal waited for here carries this one
    for (std::size_t j = 0; j < sealed_.size() && !implied; ++j) {
      implied = j != i && sealed_[j] && clock_at(*sealed_[j]->seal.after, waited->strand) >= waited->tick;
    }
    if (implied) {
      sealed_[i] = nullptr;
      continue;
    }
    here.stream->wait(waited->seal.event);
    ++waits_;
    const std::vector<std::uint64_t>& after = *waited->seal.after;
    for (std::size_t m = 0; m < here.clock.size(); ++m) {
      here.clock[m] = std::max(here.clock[m], clock_at(after, static_cast<int>(m)));
    }
    here.clock[waited->strand] = std::max(here.clock[waited->strand], waited->tick);
    here.sealed_clock.reset();  // the clock moved on: later seals carry this wait
  }
}

void Weave::seal_unless_overwritten(int strand, AccessSpan accesses) {
  Strand& here = strands_[strand];
  if (here.last && !here.last->sealed() && !overwrites(accesses, here.last_accesses())) seal_last(strand);
}

Weave::OperationRef Weave::make_operation(int strand, std::uint64_t tick) {
  return OperationRef(new (operation_memory_.take(sizeof(Operation))) Operation(strand, tick, operation_memory_));
}

Weave::OperationRef Weave::extend(int strand) {
  OperationRef operation = make_operation(strand, 0);
  count_in(strand, *operation.get());
  strands_[strand].last = operation;
  return operation;
}

void Weave::count_in(int strand, Operation& operation) {
  Strand& here = strands_[strand];
  operation.tick = ++here.clock[strand];
  here.used = ++uses_;
  ++here.operations;
}

bool Weave::passes_through(const Stream& stream, int strand) const {
  if (!capture_ && !Capture::any_active()) return false;
  // A capture begun on the current stream inside the block takes its work: the weave pauses until it ends.
  if (Capture::of(*strands_[0].stream) != capture_) return true;
  if (strand >= 0 && strands_[strand].placeable) return false;  // the weave's own streams join its capture as needed
  // Another capture's stream (a graph function's, a conditional body's): that capture orders its work.
  const std::shared_ptr<Capture> capture = Capture::of(stream);
  return capture != capture_ || (capture && capture->captures_body(stream));
}

std::shared_ptr<Stream> Weave::place(AccessSpan given, std::shared_ptr<Stream> chosen, int device,
                                     const cuweave::Operation* placed) {
  // The usual call names no stream, and the current stream is the weave's first: no reference counted, and no
  // device asked for in a process that sees one.
  const bool weave_chooses = !chosen && current_stream::is(*first_stream_);
  if (!chosen && !weave_chooses) chosen = current_stream::get();  // another current stream: a strand
  const Stream& named = weave_chooses ? *first_stream_ : *chosen;
  if (weave_chooses && device >= 0 && device != this->device() &&
      std::none_of(strands_.begin(), strands_.end(), [device](const Strand& strand) {
        return strand.placeable && strand.stream->device() == device;
      })) {
    add_device(device);  // before the dependencies are collected: needed_ then covers the new strands
  }
  int strand = weave_chooses ? 0 : find_strand(named);
  if ((capture_ || Capture::any_active()) && passes_through(named, strand)) {
    return weave_chooses ? strands_[0].stream : chosen;
  }
  if (!device_copies_.empty()) forget_copies_written(given);
  // A read of bytes the same operation writes (an in-place update) adds nothing the write does not.
  AccessSpan accesses = given;
  if (std::any_of(given.begin(), given.end(), [](const Access& a) { return a.kind == AccessKind::Read; })) {
    touched_.clear();
    for (const Access& access : given) {
      const bool written_too =
          access.kind == AccessKind::Read && std::any_of(given.begin(), given.end(), [&access](const Access& a) {
            return a.kind != AccessKind::Read &&
                   (a.stepped() ? a.bytes() == access.bytes() : a.begin <= access.begin && a.end >= access.end);
          });
      if (!written_too) touched_.push_back(access);
    }
    accesses = AccessSpan(touched_.data(), touched_.size());
  }
  if (const int continued = weave_chooses || strand >= 0 ? continued_strand(accesses, weave_chooses ? -1 : strand,
                                                                            device >= 0 ? device : this->device())
                                                          : -1;
      continued >= 0) {
    // It needs its strand's last operation alone, overwrites all of it, and its bytes then hold what it writes:
    // no wait, no seal, the same segments (what the general path below would do, at a fraction of its cost).
    Strand& here = strands_[continued];
    Operation& last = *here.last.get();
    if (!last.sealed() && last.references == 1 + continued_.size() + (just_placed_.get() == &last ? 1 : 0)) {
      // Nothing but the strand, these bytes and the note of the operation just placed refers to that last
      // operation (no seal, no other bytes): it stands for this one too, a tick on, as a new operation replacing
      // it in each of those places would, without making one and letting the other go (a chain's every step).
      count_in(continued, last);
      just_placed_ = here.last;
      return here.stream;
    }
    OperationRef operation = extend(continued);
    for (Segment* segment : continued_) segment->write = operation;
    just_placed_ = std::move(operation);
    return strands_[continued].stream;
  }
  collect_dependencies(accesses);
  if (weave_chooses) {
    strand = choose_strand(device >= 0 ? device : this->device());
  } else if (strand < 0) {
    strand = add_strand(chosen, false);  // named with stream=, or made current inside the block
    needed_.resize(strands_.size(), nullptr);
  }
  Strand& here = strands_[strand];
  if (capture_ && here.clock[0] < 1 && !needed_[0]) {
    needed_[0] = entry_.get();  // a strand joins the capture through the entry's seal before its first operation
  }
  // Seal first: an event recorded after the waits would complete only after what they wait for.
  seal_unless_overwritten(strand, accesses);
  order_after(strand);
  if (touches_entry_ && placed != nullptr && !capture_) {  // a capture cannot wait for work outside it
    const std::vector<std::shared_ptr<Stream>> outside = writers_outside(*placed, device);
    if (!outside.empty()) waits_ += here.stream->wait_for(outside);
  }
  OperationRef operation = extend(strand);
  for (const Access& access : accesses) record(access, operation);
  here.touched(accesses);
  just_placed_ = std::move(operation);
  return here.stream;
}

std::vector<std::shared_ptr<Stream>> Weave::writers_outside(const cuweave::Operation& placed, int device) const {
  std::vector<std::shared_ptr<Stream>> writers;
  for (const ArrayUse& use : placed.arrays()) {
    if (device == device_ && use.array->device() == device_) continue;
    for (std::shared_ptr<Stream>& writer : use.array->writers()) {
      // The weave orders its strands itself.
      if (find_strand(*writer) < 0 && std::find(writers.begin(), writers.end(), writer) == writers.end()) {
        writers.push_back(std::move(writer));
      }
    }
  }
  return writers;
}

void Weave::allocated(const void* pointer, std::size_t bytes, const Stream& stream) {
  const int strand = find_strand(stream);
  if (bytes == 0 || strand < 0 || passes_through(stream, strand)) return;  // outside the weave: users order themselves
  const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  const Access written{begin, begin + bytes, AccessKind::Write};
  Strand& here = strands_[strand];
  OperationRef operation = here.last;
  if (!operation || operation != just_placed_ || operation->sealed()) {
    // Not the operation just placed there (whose seal, when recorded, comes after this allocation): the
    // allocation is an operation of its own.
    seal_unless_overwritten(strand, {written});
    operation = extend(strand);
    here.last_touched.clear();
  }
  here.last_touched.push_back(written);
  record(written, operation);
}

void Weave::split_at(std::uintptr_t at) {
  auto it = shadow_.upper_bound(at);
  if (it == shadow_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Segment tail = it->second;
  it->second.end = at;
  shadow_.emplace(at, std::move(tail));
}

void Weave::record(const Access& access, const OperationRef& operation) {
  if (access.begin >= access.end) return;
  if (access.stepped()) {
    record_stepped(access, operation);
    return;
  }
  if (access.kind != AccessKind::Read && !stepped_.empty()) {  // stepped bytes inside the write: replaced
    stepped_.erase(std::remove_if(stepped_.begin(), stepped_.end(),
                                  [&access](const SteppedBytes& kept) {
                                    return kept.bytes.lies_within(access.begin, access.end);
                                  }),
                   stepped_.end());
  }
  // The usual case: an array written or read again whole.
  if (Segment* same = find_segment(access.begin); same != nullptr && same->end == access.end) {
    if (access.kind == AccessKind::Read) {
      note_read(same->reads, operation);
    } else {
      same->write = operation;
      same->reads.clear();
    }
    return;
  }
  split_at(access.begin);
  split_at(access.end);
  if (access.kind != AccessKind::Read) {
    const auto first = shadow_.lower_bound(access.begin);
    const auto past = shadow_.lower_bound(access.end);
    if (first != past) forget_found_segments();
    shadow_.erase(first, past);
    shadow_.emplace(access.begin, Segment{access.end, operation, {}});
    return;
  }
  // Reads: each segment inside the range notes this strand's read; gaps become segments written by the entry.
  std::uintptr_t at = access.begin;
  auto it = shadow_.lower_bound(access.begin);
  while (at < access.end) {
    if (it == shadow_.end() || it->first > at) {
      const std::uintptr_t gap_end = it == shadow_.end() ? access.end : std::min(access.end, it->first);
      it = shadow_.emplace_hint(it, at, Segment{gap_end, entry_, {}});
    }
    note_read(it->second.reads, operation);
    at = it->second.end;
    ++it;
  }
}

// Note [Segments found again]
// A chain's step, and a whole array written or read again, look up the segment that begins at the array's first
// byte, in a map of every range the block touched: a walk from the root of the tree, a few nodes apart in memory,
// after a launch has cooled the caches. A small table keeps the segment each recent lookup found, by a hash of its
// address: a map node stays where it is while other nodes come and go, and only erasing nodes (a write over
// several segments, the weave's end) forgets the whole table; a segment split in two keeps its node for the first
// part, whose end the caller compares anyway.
Weave::Segment* Weave::find_segment(std::uintptr_t begin) {
  FoundSegment& found = found_[(std::uint64_t{begin} * 0x9E3779B97F4A7C15ull) >> (64 - kFoundSegmentBits)];
  if (found.segment != nullptr && found.begin == begin) return found.segment;
  const auto it = shadow_.find(begin);
  if (it == shadow_.end()) return nullptr;
  found = FoundSegment{begin, &it->second};
  return found.segment;
}

// The map's segments under a stepped access keep their history: the bytes between its elements are not its.
void Weave::record_stepped(const Access& access, const OperationRef& operation) {
  const BytePattern bytes = access.bytes();
  auto same = std::find_if(stepped_.begin(), stepped_.end(), [&bytes](const SteppedBytes& kept) {
    return kept.bytes == bytes;
  });
  if (access.kind != AccessKind::Read) {
    if (same == stepped_.end()) {
      stepped_.push_back(SteppedBytes{bytes, operation, {}});
    } else {
      same->write = operation;
      same->reads.clear();
    }
    return;
  }
  if (same == stepped_.end()) {
    stepped_.push_back(SteppedBytes{bytes, OperationRef(), {operation}});
    return;
  }
  note_read(same->reads, operation);
}

void Weave::end() {
  if (ended_) return;
  ended_ = true;
  if (active_ == this) active_ = nullptr;
  device_copies_.clear();  // their frees follow the strands that used them
  needed_.assign(strands_.size(), nullptr);
  for (std::size_t m = 1; m < strands_.size(); ++m) {
    if (strands_[m].last && strands_[m].last->tick > strands_[0].clock[m]) needed_[m] = strands_[m].last.get();
  }
  order_after(0);
  // (After the waits: a failed one leaves these to the destructor.) An ended weave keeps its streams and counts
  // alone: its spare streams go back for the next weaves, and its operations, with their events, to their pools.
  give_back_streams();
  forget_found_segments();
  shadow_.clear();
  stepped_.clear();
  for (Strand& strand : strands_) {
    strand.last = OperationRef();
    strand.last_touched.clear();
    strand.sealed_clock.reset();
  }
  entry_ = OperationRef();
  just_placed_ = OperationRef();
  needed_.clear();  // (scratch that pointed at them)
  sealed_.clear();
  continued_.clear();
}

std::shared_ptr<DeviceArray> Weave::copy_on(const DeviceArray& source, int device) const {
  const auto begin = reinterpret_cast<std::uintptr_t>(source.data());
  for (const DeviceCopy& kept : device_copies_) {
    if (kept.begin == begin && kept.end == begin + source.nbytes() && kept.copy->device() == device &&
        kept.source.lock().get() == &source) {
      return kept.copy;
    }
  }
  return nullptr;
}

void Weave::keep_copy(const std::shared_ptr<DeviceArray>& source, std::shared_ptr<DeviceArray> copy) {
  const auto begin = reinterpret_cast<std::uintptr_t>(source->data());
  device_copies_.push_back(DeviceCopy{source, begin, begin + source->nbytes(), std::move(copy)});
}

void Weave::forget_copies_written(AccessSpan accesses) {
  auto stale = [&accesses](const DeviceCopy& kept) {
    return kept.source.expired() || std::any_of(accesses.begin(), accesses.end(), [&kept](const Access& a) {
             return a.kind != AccessKind::Read && a.begin < kept.end && a.end > kept.begin;
           });
  };
  device_copies_.erase(std::remove_if(device_copies_.begin(), device_copies_.end(), stale), device_copies_.end());
}

bool Weave::chooses_streams() const {
  return !capture_ && current_stream::is(*strands_[0].stream) && !Capture::of(*strands_[0].stream);
}

WeaveCounts Weave::counts() const {
  WeaveCounts counts;
  counts.records = records_;
  counts.waits = waits_;
  for (const Strand& strand : strands_) {
    counts.operations += strand.operations;
    counts.per_stream.push_back(strand.operations);
  }
  return counts;
}

std::vector<std::shared_ptr<Stream>> Weave::streams() const {
  std::vector<std::shared_ptr<Stream>> streams;
  for (const Strand& strand : strands_) streams.push_back(strand.stream);
  return streams;
}

}  // namespace cuweave
