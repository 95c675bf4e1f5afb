// What a train job's state says, for every reader of it (the head's
// controller, the CLI, the benches): whether the job will do nothing more.
#ifndef BERTH_WIRE_TRAIN_JOB_STATE_H_
#define BERTH_WIRE_TRAIN_JOB_STATE_H_

#include "berth/v1/train.pb.h"

namespace berth {

// SUCCEEDED, FAILED, STOPPED or TIMED_OUT.
inline bool IsTerminal(v1::TrainJobState state) {
  return state == v1::TRAIN_JOB_STATE_SUCCEEDED || state == v1::TRAIN_JOB_STATE_FAILED ||
         state == v1::TRAIN_JOB_STATE_STOPPED || state == v1::TRAIN_JOB_STATE_TIMED_OUT;
}

}  // namespace berth

#endif  // BERTH_WIRE_TRAIN_JOB_STATE_H_
