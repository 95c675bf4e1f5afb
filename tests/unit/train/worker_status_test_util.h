// A worker's status as its raylet reports an exit, for the train layer's
// tests: EXITED for code 0 and no signal, FAILED otherwise.
#ifndef BERTH_TESTS_UNIT_TRAIN_WORKER_STATUS_TEST_UTIL_H_
#define BERTH_TESTS_UNIT_TRAIN_WORKER_STATUS_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "berth/v1/raylet.pb.h"

namespace berth::testing {

inline v1::WorkerStatus ExitStatus(const std::string& job, const std::string& worker, int code,
                                   int64_t failed_us = 0, int signal = 0) {
  v1::WorkerStatus status;
  status.set_job_id(job);
  status.set_worker_id(worker);
  status.set_state(code == 0 && signal == 0 ? v1::WORKER_STATE_EXITED : v1::WORKER_STATE_FAILED);
  status.set_exit_code(code);
  status.set_signal(signal);
  status.set_failed_unix_us(failed_us);
  return status;
}

}  // namespace berth::testing

#endif  // BERTH_TESTS_UNIT_TRAIN_WORKER_STATUS_TEST_UTIL_H_
