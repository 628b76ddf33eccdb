#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace berth {

// The management loop's periodic work as one table of named jobs, each with its interval, in the
// manner of DPVS's slow jobs: the loop calls runDue() once a turn, and a job runs on the first
// turn and then on the first turn at least its interval after its previous run. A job that runs
// long delays the loop's other work, so each one's longest run is kept for the operator
// (`status`). Pure: the clock is the caller's, and nothing here waits.
class PeriodicJobs {
 public:
  using Job = std::function<void(absl::Time now)>;

  // What `status` shows of a job.
  struct JobFigures {
    std::string name;
    absl::Duration interval;
    uint64_t runs = 0;
    absl::Duration longest;  // of its runs, as the clock given to runDue() saw them
  };

  // Adds a job; names are for the operator, and jobs run in the order they were added.
  void add(std::string name, absl::Duration interval, Job job);
  // Runs every job that is due at `now`; `clock` reads the time after each run, for its
  // duration. Returns how many ran.
  size_t runDue(absl::Time now, const std::function<absl::Time()>& clock);
  std::vector<JobFigures> figures() const;

 private:
  struct Entry {
    JobFigures figures;
    Job job;
    absl::Time last_run = absl::InfinitePast();
  };
  std::vector<Entry> jobs_;
};

}  // namespace berth
