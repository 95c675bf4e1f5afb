#include "common/processes.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

TEST(ProcessesTest, AProcessIsKnownByItsStartTimeAndAReusedPidIsNot) {
  const std::optional<uint64_t> self = ProcessStartTicks(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_TRUE(SameProcess(getpid(), *self));
  EXPECT_FALSE(SameProcess(getpid(), *self + 1));  // another process with our pid
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  const std::optional<uint64_t> child_start = ProcessStartTicks(child);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(SameProcess(child, child_start.value_or(0)));  // gone
  EXPECT_FALSE(ProcessStartTicks(child).has_value());
  EXPECT_FALSE(SameProcess(0, 0));
}

TEST(ProcessesTest, TheListenerOfAPortIsNamed) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  EXPECT_EQ(ListenerOfPort(port), "");  // bound, not listening
  ASSERT_EQ(listen(fd, 1), 0);
  EXPECT_THAT(ListenerOfPort(port), HasSubstr("pid " + std::to_string(getpid()) + " ("));
  close(fd);
  EXPECT_EQ(ListenerOfPort(port), "");
}

}  // namespace
}  // namespace berth
