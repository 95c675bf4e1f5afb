#include "worker/train.h"

#include <ATen/CPUGeneratorImpl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "worker/checkpoint_files.h"
#include "worker/cuda_nccl.h"
#include "worker/store_protocol.h"

namespace berth {
namespace {

constexpr int64_t kInputs = 16;
constexpr int64_t kHidden = 64;
constexpr uint64_t kTaskSeed = 1234;
constexpr uint64_t kModelSeed = 0;
// How long a rank waits for the store, its keys and its peers.
constexpr std::chrono::minutes kStoreTimeout(5);
constexpr uint64_t kPrintEverySteps = 10;

// Cloneable so that a checkpoint can copy it to the CPU.
struct MlpImpl : torch::nn::Cloneable<MlpImpl> {
  MlpImpl() { reset(); }
  void reset() override {
    hidden = register_module("hidden", torch::nn::Linear(kInputs, kHidden));
    output = register_module("output", torch::nn::Linear(kHidden, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return output(torch::tanh(hidden(x))); }
  torch::nn::Linear hidden{nullptr};
  torch::nn::Linear output{nullptr};
};
TORCH_MODULE(Mlp);

// y = x . w for fixed true weights w; each (rank, step) draws its own x.
class SyntheticRegression {
 public:
  SyntheticRegression()
      : true_weights_(torch::randn({kInputs, 1}, MakeGenerator(kTaskSeed)) / std::sqrt(kInputs)) {}

  std::pair<torch::Tensor, torch::Tensor> Batch(uint32_t rank, uint64_t step,
                                                int64_t batch_size) const {
    const torch::Tensor x =
        torch::randn({batch_size, kInputs}, MakeGenerator(kTaskSeed + 1 + step * 1000003 + rank));
    return {x, torch::matmul(x, true_weights_)};
  }

 private:
  static at::Generator MakeGenerator(uint64_t seed) {
    return at::make_generator<at::CPUGeneratorImpl>(seed);
  }
  torch::Tensor true_weights_;
};

std::string TorchErrorText(const c10::Error& e) { return e.what_without_backtrace(); }

// ---- checkpoints: torch::save of {step, parameters} ------------------------

std::string EncodeCheckpoint(uint64_t step, Mlp& model) {
  torch::serialize::OutputArchive archive;
  archive.write("step", c10::IValue(static_cast<int64_t>(step)));
  torch::serialize::OutputArchive parameters;
  std::dynamic_pointer_cast<MlpImpl>(model->clone(torch::kCPU))->save(parameters);
  archive.write("model", parameters);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

absl::StatusOr<uint64_t> ReadCheckpoint(const std::string& bytes, Mlp* model) {
  try {
    torch::serialize::InputArchive archive;
    std::istringstream in(bytes);
    archive.load_from(in);
    c10::IValue step;
    archive.read("step", step);
    if (!step.isInt() || step.toInt() < 0) {
      return absl::InvalidArgumentError("checkpoint: \"step\" is not a step number");
    }
    if (model != nullptr) {
      torch::serialize::InputArchive parameters;
      archive.read("model", parameters);
      (*model)->load(parameters);
    }
    return static_cast<uint64_t>(step.toInt());
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a berth-worker checkpoint: ", TorchErrorText(e)));
  }
}

uint64_t ParameterHash(Mlp& model) {
  uint64_t hash = kFnvOffsetBasis;
  for (const torch::Tensor& p : model->parameters()) {
    const torch::Tensor bytes = p.detach().to(torch::kCPU).contiguous();
    hash = Fnv1a64(bytes.data_ptr(), bytes.numel() * bytes.element_size(), hash);
  }
  return hash;
}

// ---- the collective group ---------------------------------------------------

// Sums a flat float tensor in place over every rank of the group.
class GradientAllReducer {
 public:
  virtual ~GradientAllReducer() = default;
  virtual torch::Device device() const = 0;
  virtual void SumInPlace(torch::Tensor& flat) = 0;
};

class GlooAllReducer : public GradientAllReducer {
 public:
  explicit GlooAllReducer(c10::intrusive_ptr<c10d::ProcessGroupGloo> group)
      : group_(std::move(group)) {}
  torch::Device device() const override { return torch::kCPU; }
  void SumInPlace(torch::Tensor& flat) override {
    std::vector<torch::Tensor> tensors = {flat};
    group_->allreduce(tensors)->wait();
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

class NcclAllReducer : public GradientAllReducer {
 public:
  NcclAllReducer(std::unique_ptr<CudaNccl> nccl, int device)
      : nccl_(std::move(nccl)), device_(torch::kCUDA, static_cast<c10::DeviceIndex>(device)) {}
  torch::Device device() const override { return device_; }
  void SumInPlace(torch::Tensor& flat) override {
    absl::Status s = nccl_->AllReduceSumFloats(flat.data_ptr(), static_cast<size_t>(flat.numel()));
    TORCH_CHECK(s.ok(), std::string(s.message()));
  }

 private:
  std::unique_ptr<CudaNccl> nccl_;
  torch::Device device_;
};

// This rank's NCCL and GPU, or why it cannot use NCCL.
struct NcclCandidate {
  std::unique_ptr<CudaNccl> nccl;
  int device = 0;
};
absl::StatusOr<NcclCandidate> LocalNccl(const TorchrunEnv& env) {
  if (!torch::cuda::is_available()) return absl::UnavailableError("libtorch has no CUDA");
  absl::StatusOr<std::unique_ptr<CudaNccl>> nccl = CudaNccl::Load();
  if (!nccl.ok()) return nccl.status();
  absl::StatusOr<int> count = (*nccl)->VisibleDeviceCount();
  if (!count.ok()) return count.status();
  absl::StatusOr<int> device = LocalCudaDevice(env, *count);
  if (!device.ok()) return device.status();
  return NcclCandidate{*std::move(nccl), *device};
}

std::shared_ptr<gloo::transport::Device> GlooDevice(const TorchrunEnv& env) {
  if (!env.gloo_socket_ifname.empty()) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(env.gloo_socket_ifname);
  }
  // On one machine bind to loopback whatever the host name resolves to.
  if (IsLoopbackHost(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// NCCL only if every rank can use it (a mixed group would deadlock), so the
// ranks first tell each other what they can do.
std::unique_ptr<GradientAllReducer> FormGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                              const TorchrunEnv& env) {
  auto group_store =
      c10::make_intrusive<c10d::PrefixStore>(GroupKeyPrefix(env.restart_count), store);
  absl::StatusOr<NcclCandidate> nccl = LocalNccl(env);
  group_store->set(absl::StrCat("backend/", env.rank), ToBytes(nccl.ok() ? "nccl" : "gloo"));
  bool everyone_nccl = nccl.ok();
  for (uint32_t r = 0; r < env.world_size && everyone_nccl; ++r) {
    everyone_nccl = FromBytes(group_store->get(absl::StrCat("backend/", r))) == "nccl";
  }
  if (everyone_nccl) {
    NcclUniqueId id{};
    if (env.rank == 0) {
      absl::StatusOr<NcclUniqueId> created = nccl->nccl->NewUniqueId();
      TORCH_CHECK(created.ok(), std::string(created.status().message()));
      id = *created;
      group_store->set("nccl_id", std::vector<uint8_t>(id.internal, id.internal + sizeof(id)));
    } else {
      const std::vector<uint8_t> bytes = group_store->get("nccl_id");
      TORCH_CHECK(bytes.size() == sizeof(id), "nccl_id has ", bytes.size(), " bytes");
      std::copy(bytes.begin(), bytes.end(), id.internal);
    }
    absl::Status joined = nccl->nccl->Join(nccl->device, id, static_cast<int>(env.world_size),
                                           static_cast<int>(env.rank));
    TORCH_CHECK(joined.ok(), std::string(joined.message()));
    std::printf("backend: nccl %s (cuda device %d)\n", nccl->nccl->version().c_str(), nccl->device);
    return std::make_unique<NcclAllReducer>(std::move(nccl->nccl), nccl->device);
  }
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(GlooDevice(env));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
      group_store, static_cast<int>(env.rank), static_cast<int>(env.world_size), options);
  std::printf("backend: gloo (%s)\n",
              nccl.ok() ? "not every rank can use NCCL"
                        : absl::StrCat("no NCCL: ", nccl.status().message()).c_str());
  return std::make_unique<GlooAllReducer>(std::move(group));
}

// Averages the gradients (and the loss, riding along as the last element)
// over the group, in one all-reduce. Returns the mean loss.
double AverageGradients(Mlp& model, const torch::Tensor& loss, GradientAllReducer& reducer,
                        uint32_t world_size) {
  std::vector<torch::Tensor> pieces;
  for (const torch::Tensor& p : model->parameters()) pieces.push_back(p.grad().reshape({-1}));
  pieces.push_back(loss.detach().reshape({1}));
  torch::Tensor flat = torch::cat(pieces);
  reducer.SumInPlace(flat);
  flat.div_(static_cast<double>(world_size));
  int64_t offset = 0;
  for (torch::Tensor& p : model->parameters()) {
    p.mutable_grad().copy_(flat.slice(0, offset, offset + p.numel()).view_as(p));
    offset += p.numel();
  }
  return flat[offset].item<double>();
}

// ---- the run ------------------------------------------------------------------

void MaybeCrashForTest(const TorchrunEnv& env, uint64_t step) {
  const std::optional<CrashHook>& hook = env.crash_hook;
  if (!hook.has_value() || hook->step != step || hook->rank != env.rank) return;
  if (!hook->once_file.empty()) {
    if (std::ifstream(hook->once_file).good()) return;
    std::ofstream(hook->once_file) << "crashed at step " << step << "\n";
  }
  std::printf("rank %u: BERTH_TEST_CRASH_AT_STEP=%llu: exiting with code %d\n", env.rank,
              static_cast<unsigned long long>(step), kTestCrashExitCode);
  std::fflush(nullptr);
  std::_Exit(kTestCrashExitCode);  // abrupt, like a real crash: no clean-up
}

struct Failure {
  int exit_code;
  absl::Status status;
};

// Where training starts: the published resume point, if any. The host of
// the resume point sets berth/resume/ready last, so it is waited for first.
absl::StatusOr<uint64_t> LoadResumePoint(c10d::Store& store, Mlp* model) {
  if (FromBytes(store.get(kResumeReadyKey)) != "1") return 0;
  absl::StatusOr<uint64_t> step = ParseStep(FromBytes(store.get(kResumeStepKey)), kResumeStepKey);
  if (!step.ok()) return step.status();
  absl::StatusOr<uint64_t> data_step = ReadCheckpoint(FromBytes(store.get(kResumeDataKey)), model);
  if (!data_step.ok()) return data_step.status();
  if (*data_step != *step) {
    return absl::InvalidArgumentError(absl::StrCat(kResumeStepKey, " says ", *step, " but ",
                                                   kResumeDataKey, " holds step ", *data_step));
  }
  return *step;
}

// libtorch 1.13's TCPStore client sleeps a whole second before it tries a
// store that is not listening yet again, and the trainer hosting the store
// starts together with the ranks (loading libtorch takes about as long in
// each). So a rank first waits for the listener itself, in short steps, and
// then connects at once. A probe connection that closes at once is normal
// for the store (it drops clients that go away). Name resolution failing is
// left for TCPStore to report.
void AwaitStoreListener(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  constexpr auto kStep = std::chrono::milliseconds(5);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addresses) != 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool listening = false;
  while (!listening && std::chrono::steady_clock::now() < deadline) {
    for (const addrinfo* a = addresses; a != nullptr && !listening; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      listening = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      close(fd);
    }
    if (!listening) std::this_thread::sleep_for(kStep);
  }
  freeaddrinfo(addresses);
}

void Apply(c10d::Store& store, const StoreWrites& writes) {
  for (const auto& [key, value] : writes) store.set(key, ToBytes(value));
}

// Rank 0 of a run by hand hosts the store, so it stays up until every rank
// has reported, and checks that they agree (there is no trainer to do it).
absl::Status AwaitAgreement(c10d::Store& store, uint32_t world_size, uint64_t own_hash) {
  std::vector<std::string> keys;
  for (uint32_t r = 0; r < world_size; ++r) keys.push_back(DoneKey(r));
  store.wait(keys);
  for (uint32_t r = 0; r < world_size; ++r) {
    const std::string hash = FromBytes(store.get(keys[r]));
    if (hash != HashToHex(own_hash)) {
      return absl::DataLossError(absl::StrCat("rank ", r, " ended with params ", hash,
                                              ", rank 0 with ", HashToHex(own_hash)));
    }
  }
  return absl::OkStatus();
}

std::optional<Failure> Train(const TrainFlags& flags, const TorchrunEnv& env,
                             absl::Time main_start) {
  if (env.use_agent_store && !flags.resume_from.empty()) {
    return Failure{kUsageExitCode,
                   absl::InvalidArgumentError(
                       "--resume-from: not with TORCHELASTIC_USE_AGENT_STORE=True; the "
                       "trainer hosting the store resumes the job (trainer --resume-from)")};
  }
  const bool hosts_store = !env.use_agent_store && env.rank == 0;
  // Rank 0 of a run by hand reads the checkpoint file and hands it to the
  // others through the store, so only its node needs the file.
  std::optional<std::string> resume_checkpoint;
  uint64_t resume_file_step = 0;
  if (hosts_store && !flags.resume_from.empty()) {
    absl::StatusOr<CheckpointFile> file = ReadCheckpointFile(flags.resume_from);
    if (!file.ok()) {
      return Failure{kUsageExitCode, absl::InvalidArgumentError(
                                         absl::StrCat("--resume-from: ", file.status().message()))};
    }
    resume_checkpoint = std::move(file->bytes);
    resume_file_step = file->step;
  }

  // Tiny model: more threads only fight over the cores with the other ranks.
  torch::set_num_threads(1);
  c10d::TCPStoreOptions store_options;
  store_options.port = env.master_port;
  store_options.isServer = hosts_store;
  store_options.waitWorkers = false;
  store_options.timeout = kStoreTimeout;
  if (!hosts_store) AwaitStoreListener(env.master_addr, env.master_port, kStoreTimeout);
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  std::printf("rank %u of %u: store %s:%u (%s)\n", env.rank, env.world_size,
              env.master_addr.c_str(), env.master_port,
              hosts_store ? "hosted by this rank" : "client");
  if (hosts_store) Apply(*store, ResumePointWrites(resume_checkpoint, resume_file_step));

  torch::manual_seed(kModelSeed);  // the same initial parameters on every rank
  Mlp model;
  absl::StatusOr<uint64_t> start_step = LoadResumePoint(*store, &model);
  if (!start_step.ok()) return Failure{kTrainFailed, start_step.status()};
  if (*start_step > 0)
    std::printf("resuming after step %llu\n", static_cast<unsigned long long>(*start_step));

  std::unique_ptr<GradientAllReducer> reducer = FormGroup(store, env);
  store->set(StartupKey(env.rank), ToBytes(FormatRankStartup({absl::ToUnixMicros(main_start),
                                                              absl::ToUnixMicros(absl::Now())})));
  model->to(reducer->device());
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(flags.lr));
  const SyntheticRegression task;
  uint64_t checkpointed_step = *start_step;
  for (uint64_t step = *start_step + 1; step <= flags.steps; ++step) {
    MaybeCrashForTest(env, step);
    auto [x, y] = task.Batch(env.rank, step, flags.batch_size);
    optimizer.zero_grad();
    const torch::Tensor loss =
        torch::mse_loss(model->forward(x.to(reducer->device())), y.to(reducer->device()));
    loss.backward();
    const double mean_loss = AverageGradients(model, loss, *reducer, env.world_size);
    optimizer.step();
    if (env.rank != 0) continue;
    store->set(kProgressKey, ToBytes(FormatProgress({step, mean_loss})));
    if (step == *start_step + 1 || step % kPrintEverySteps == 0 || step == flags.steps) {
      std::printf("step %llu loss %.6g\n", static_cast<unsigned long long>(step), mean_loss);
    }
    if (flags.checkpoint_every > 0 && step % flags.checkpoint_every == 0) {
      Apply(*store, CheckpointWrites(step, EncodeCheckpoint(step, model)));
      checkpointed_step = step;
    }
  }
  const uint64_t last_step = std::max<uint64_t>(*start_step, flags.steps);
  if (env.rank == 0 && checkpointed_step != last_step) {
    Apply(*store, CheckpointWrites(last_step, EncodeCheckpoint(last_step, model)));
  }

  const uint64_t hash = ParameterHash(model);
  std::printf("rank %u params %s\n", env.rank, HashToHex(hash).c_str());
  store->set(DoneKey(env.rank), ToBytes(HashToHex(hash)));
  if (hosts_store) {
    if (absl::Status s = AwaitAgreement(*store, env.world_size, hash); !s.ok()) {
      return Failure{kTrainFailed, s};
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<uint64_t> CheckpointStep(const std::string& bytes) {
  return ReadCheckpoint(bytes, nullptr);
}

absl::StatusOr<CheckpointFile> ReadCheckpointFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<uint64_t> step = CheckpointStep(*bytes);
  if (!step.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", step.status().message()));
  return CheckpointFile{*std::move(bytes), *step};
}

int RunTrain(const TrainFlags& flags, const TorchrunEnv& env, absl::Time main_start) {
  std::optional<Failure> failure;
  try {
    failure = Train(flags, env, main_start);
  } catch (const c10::Error& e) {
    failure = Failure{kTrainFailed, absl::UnavailableError(TorchErrorText(e))};
  } catch (const std::exception& e) {
    failure = Failure{kTrainFailed, absl::UnavailableError(e.what())};
  }
  if (!failure.has_value()) return 0;
  LogError("rank ", env.rank, ": ", failure->status.message());
  return failure->exit_code;
}

}  // namespace berth
