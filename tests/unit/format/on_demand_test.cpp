// The files of on-demand capture (kprof/on_demand.h): each form read back as written, bad ones
// refused with a reason, and the moment every process opens at chosen half a step after the
// latest step boundary.
#include "kprof/on_demand.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

using namespace kprof::ondemand;

TEST(OnDemand, EveryFileReadsBackAsWritten) {
  Request r{7, 3, "train step", 0, 1795776992718159943ull};
  std::string why;
  auto back = ParseRequest(FormatRequest(r), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, r);
  Request d{8, 0, "", 250, 5};
  EXPECT_EQ(*ParseRequest(FormatRequest(d), &why), d);

  Presence p{4242, "1", "dormant", 2, 8};
  auto pb = ParsePresence(FormatPresence(p), &why);
  ASSERT_TRUE(pb);
  EXPECT_EQ(pb->pid, 4242u);
  EXPECT_EQ(pb->rank, "1");
  EXPECT_EQ(pb->state, "dormant");
  EXPECT_EQ(pb->windows, 2u);
  EXPECT_EQ(pb->last_request, 8u);

  Ack a{7, 4242, {100, 200, 300}, ""};
  auto ab = ParseAck(FormatAck(a), &why);
  ASSERT_TRUE(ab);
  EXPECT_EQ(ab->step_ns, (std::vector<uint64_t>{100, 200, 300}));
  Ack bad{7, 4242, {}, "no range 'step' began within 30 s"};
  EXPECT_EQ(ParseAck(FormatAck(bad), &why)->problem, bad.problem);

  Done dn{7, 4242, 3, 1000, 26000, 5, 11200000, "a\nb"};
  auto db = ParseDone(FormatDone(dn), &why);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->window, 3u);
  EXPECT_EQ(db->closed_ns - db->opened_ns, 25000u);
  EXPECT_EQ(db->steps, 5u);
  EXPECT_EQ(db->request_to_open_ns, 11200000u);
  EXPECT_EQ(db->problem, "a b");  // one line: a newline would end the value

  EXPECT_EQ(*ParseGo(FormatGo(0), &why), 0u);  // at once
  EXPECT_EQ(*ParseGo(FormatGo(1795776992718159943ull), &why), 1795776992718159943ull);
  EXPECT_FALSE(ParseGo("at=5\n", &why));
  EXPECT_EQ(why, "no at_ns");
  EXPECT_EQ(ReplyPath(ControlDir("/runs/a"), 7, 4242, "ack"), "/runs/a/control/7.4242.ack");
  EXPECT_EQ(GoPath("/c", 7), "/c/7.go");
  EXPECT_EQ(PresencePath("/c", 4242), "/c/4242.agent");
  EXPECT_EQ(RequestPath("/c"), "/c/request");
}

TEST(OnDemand, BadRequestsAreRefusedWithTheirReason) {
  std::string why;
  EXPECT_FALSE(ParseRequest("id=1\nsteps=3\n", &why));  // steps without a range
  EXPECT_EQ(why, "the request asks for neither steps of a range nor a duration");
  EXPECT_FALSE(ParseRequest("id=x\nduration_ms=5\n", &why));
  EXPECT_EQ(why, "id=x is not a number");
  EXPECT_FALSE(ParseRequest("range=step\nsteps=2\n", &why));
  EXPECT_EQ(why, "no id");
  EXPECT_FALSE(ParseRequest("id=1\nrange=step\n", &why));
  EXPECT_EQ(why, "no steps");
  EXPECT_FALSE(ParseRequest("id=2\ngarbage\n", &why));
  EXPECT_EQ(why, "line 2 is not key=value");
  EXPECT_FALSE(ParseAck("id=1\npid=2\nstep_ns=1,x\n", &why));
  EXPECT_FALSE(ParsePresence("pid=3\n", &why));
  EXPECT_EQ(why, "no state");
}

TEST(OnDemand, TheMomentIsHalfAStepAfterTheLatestBoundaryAndNotTooSoon) {
  // Two ranks, 10 ms steps, rank 1 a little behind: the latest boundary is 30.2 ms.
  const std::vector<std::vector<uint64_t>> steps = {{10'000'000, 20'000'000, 30'000'000},
                                                    {10'200'000, 20'200'000, 30'200'000}};
  EXPECT_EQ(ChooseStart(steps, 0), 35'200'000u);
  // Not before the processes can read it: whole steps later, still mid-step.
  EXPECT_EQ(ChooseStart(steps, 50'000'000), 55'200'000u);
  EXPECT_EQ(ChooseStart(steps, 55'200'000), 55'200'000u);
  // One begin each: no step length known; the earliest moment itself.
  EXPECT_EQ(ChooseStart({{10}, {12}}, 99), 99u);
  EXPECT_EQ(ChooseStart({}, 7), 7u);
}

TEST(OnDemand, FilesAreWrittenWhole) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("kprof_on_demand_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string why;
  ASSERT_TRUE(WriteWhole(dir + "/request", "id=1\nduration_ms=5\n", &why)) << why;
  EXPECT_EQ(*ReadSmall(dir + "/request"), "id=1\nduration_ms=5\n");
  EXPECT_FALSE(ReadSmall(dir + "/missing"));
  EXPECT_FALSE(WriteWhole(dir + "/no/such/dir/file", "x", &why));
  EXPECT_NE(why.find("cannot create"), std::string::npos);
  std::filesystem::remove_all(dir);
}
