#include "berth/control/periodic_jobs.h"

#include <algorithm>
#include <utility>

namespace berth {

void PeriodicJobs::add(std::string name, absl::Duration interval, Job job) {
  Entry entry;
  entry.figures.name = std::move(name);
  entry.figures.interval = interval;
  entry.job = std::move(job);
  jobs_.push_back(std::move(entry));
}

size_t PeriodicJobs::runDue(absl::Time now, const std::function<absl::Time()>& clock) {
  size_t ran = 0;
  for (Entry& entry : jobs_) {
    if (now - entry.last_run < entry.figures.interval) continue;
    entry.last_run = now;
    const absl::Time start = clock();
    entry.job(now);
    entry.figures.longest = std::max(entry.figures.longest, clock() - start);
    ++entry.figures.runs;
    ++ran;
  }
  return ran;
}

std::vector<PeriodicJobs::JobFigures> PeriodicJobs::figures() const {
  std::vector<JobFigures> figures;
  figures.reserve(jobs_.size());
  for (const Entry& entry : jobs_) figures.push_back(entry.figures);
  return figures;
}

}  // namespace berth
