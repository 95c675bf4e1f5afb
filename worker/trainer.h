// `berth-worker trainer`: the driver of one train job, run by the berth head
// next to rank 0. It hosts the job's c10d::TCPStore (the same store a stock
// PyTorch `init_process_group("env://")` joins with
// TORCHELASTIC_USE_AGENT_STORE=True), publishes the resume point, relays
// the ranks' progress, writes their checkpoints to files, reports to the
// head, and judges the end: every rank done with the same parameter hash.
//
// Exit codes: 0 all ranks done and agreeing; 1 they disagree, the store
// failed or --timeout-s passed; 2 bad flags; 128+signal on SIGTERM/SIGINT.
// The header is torch-free; trainer.cc includes the c10d store.
#ifndef BERTH_WORKER_TRAINER_H_
#define BERTH_WORKER_TRAINER_H_

#include "worker/flags.h"

namespace berth {

// Runs the trainer until the job ends; returns the process exit code.
int RunTrainer(const TrainerFlags& flags);

}  // namespace berth

#endif  // BERTH_WORKER_TRAINER_H_
