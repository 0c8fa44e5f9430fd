// Progress: silent when disabled or quick; a line with counts and percentage when shown; erased
// at the end so the next output starts on a clean line.
#include "kprof/progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace kprof {
namespace {

TEST(Progress, DisabledPrintsNothing) {
  ::testing::internal::CaptureStderr();
  {
    Progress p(false, "exporting x", "records");
    std::this_thread::sleep_for(std::chrono::milliseconds(550));
    p.Update(5, 10);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Progress, QuickWorkPrintsNothing) {
  ::testing::internal::CaptureStderr();
  {
    Progress p(true, "exporting x", "records");
    p.Update(5, 10);  // within the first half second
    EXPECT_FALSE(p.shown());
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Progress, LongWorkShowsCountsThenErasesTheLine) {
  ::testing::internal::CaptureStderr();
  {
    Progress p(true, "exporting out.sqlite", "records");
    std::this_thread::sleep_for(std::chrono::milliseconds(550));
    p.Update(1234567, 3000000);
    EXPECT_TRUE(p.shown());
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "\r\033[Kexporting out.sqlite: 1,234,567 / 3,000,000 records (41%)\r\033[K");
}

TEST(Progress, BytesAreShownInMegabytes) {
  ::testing::internal::CaptureStderr();
  {
    Progress p(true, "reading a.json", "MB");
    std::this_thread::sleep_for(std::chrono::milliseconds(550));
    p.Update(512'000'000, 1'024'000'000);
    p.Finish();
    EXPECT_FALSE(p.shown());
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "\r\033[Kreading a.json: 512 / 1,024 MB (50%)\r\033[K");
}

}  // namespace
}  // namespace kprof
