#include "berth/util/latest_file_writer.h"

#include <utility>

#include "berth/util/whole_file.h"

namespace berth {

LatestFileWriter::LatestFileWriter(std::string path, mode_t mode)
    : path_(std::move(path)), mode_(mode), thread_(std::make_unique<BackgroundThread>(1)) {}

LatestFileWriter::~LatestFileWriter() {
  // The thread's destructor waits for the running job; one that is queued is dropped, so the
  // newest text is written here if no job will.
  thread_.reset();
  std::function<std::string()> render;
  {
    std::lock_guard lock(mutex_);
    render = std::move(pending_);
  }
  if (render) writeFileWhole(path_, render(), mode_).IgnoreError();
}

void LatestFileWriter::save(std::string text) {
  saveRendered([text = std::move(text)] { return text; });
}

void LatestFileWriter::saveRendered(std::function<std::string()> render) {
  std::lock_guard lock(mutex_);
  pending_ = std::move(render);
  if (writing_) return;  // the running job writes it next
  writing_ = thread_->post([this] { writeNewest(); });
}

void LatestFileWriter::writeNewest() {
  for (;;) {
    std::function<std::string()> render;
    {
      std::lock_guard lock(mutex_);
      if (!pending_) {
        writing_ = false;
        return;
      }
      render = std::move(pending_);
      pending_ = nullptr;
    }
    absl::Status written = writeFileWhole(path_, render(), mode_);
    std::lock_guard lock(mutex_);
    last_write_ = std::move(written);
  }
}

absl::Status LatestFileWriter::lastWrite() const {
  std::lock_guard lock(mutex_);
  return last_write_;
}

}  // namespace berth
