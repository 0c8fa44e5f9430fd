// Fuzz target: Chrome / PyTorch trace input (ReadInputs: content sniffing, the streaming JSON
// pull parser, the trace reader, events -> records), then the analysis of what it accepted.
// The input is read as it is (plain JSON or gzip); an input that is not gzip and whose size is a
// multiple of 4 is also read gzip-compressed, so the JSON mutations reach the gzip path too.
#include <zlib.h>

#include <vector>

#include "fuzz_common.h"

namespace {

std::vector<uint8_t> Gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::vector<uint8_t> out(deflateBound(&z, static_cast<uLong>(size)) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void ReadAndAnalyze(const uint8_t* data, size_t size) {
  const std::string path = kprof::fuzz::WriteScratch("input.json", data, size);
  try {
    kprof::fuzz::AnalyzeRun(kprof::ReadInputs({path}));
  } catch (const kprof::InputError&) {
    // Refusing a bad trace with one line is the expected outcome.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ReadAndAnalyze(data, size);
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (!gzip && size % 4 == 0 && size <= (1u << 20)) {
    const std::vector<uint8_t> gz = Gzip(data, size);
    ReadAndAnalyze(gz.data(), gz.size());
  }
  return 0;
}
