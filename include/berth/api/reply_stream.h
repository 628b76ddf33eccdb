#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace berth {

// A control-socket reply produced in pieces, so that the management loop turns between them
// (docs/architecture.md, "The management loop"): a 655,373-slot table is about 10 MB of
// JSON, and `explain` waits for the workers' answers without spinning. The socket asks for the
// next piece only when the kernel has taken most of the previous one, so a slow reader holds a
// piece of the reply in berthd, not all of it.
class ReplyStream {
 public:
  enum class Progress {
    kMore,     // call again for the next piece
    kWaiting,  // nothing to add until a later turn of the loop
    kDone,     // the reply is complete (the socket adds the closing newline)
  };
  virtual ~ReplyStream() = default;
  // Appends the next piece to `out`: about `budget` bytes, never much more.
  virtual Progress next(std::string& out, size_t budget) = 0;
};

// A reply made elsewhere (a rendering thread's, shared by several clients): `poll` is called
// once per turn of the loop until it returns the text, which is then handed out in pieces of the
// budget asked for, without a copy.
std::unique_ptr<ReplyStream> sharedTextReply(
    std::function<std::shared_ptr<const std::string>()> poll);

// A reply already whole, handed out in pieces of the budget asked for.
std::unique_ptr<ReplyStream> wholeReply(std::string reply);

// A reply that waits for something outside the loop (a worker's answer, a rendering thread):
// `poll` is called once per turn of the loop until it returns the reply, which is then handed
// out in pieces.
std::unique_ptr<ReplyStream> pollingReply(std::function<std::optional<std::string>()> poll);

// Every piece of `stream` concatenated, for tests and for callers that want the whole text. A
// stream that waits is asked again at once.
std::string drainReply(ReplyStream& stream, size_t budget = 64 * 1024);

}  // namespace berth
