// Fuzz target: the kprof run-file reader (ReadRunFile, src/format/file.cpp), then the analysis of
// what it accepted. Each input is read twice: as it is, and with every block's CRC-32C
// recomputed, so that mutations reach the block parsers behind the checksum.
#include <cstring>
#include <vector>

#include "fuzz_common.h"

namespace {

/// The input with the checksum of every whole block recomputed (docs/format.md: the CRC covers
/// the first 12 header bytes and the payload). False when nothing changed.
bool FixChecksums(std::vector<uint8_t>& buf) {
  constexpr size_t kHeader = 16, kBlockHeader = 16;
  bool changed = false;
  size_t pos = kHeader;
  while (pos + kBlockHeader <= buf.size()) {
    uint32_t payload = 0, old_crc = 0;
    std::memcpy(&payload, &buf[pos + 8], 4);
    std::memcpy(&old_crc, &buf[pos + 12], 4);
    if (payload > buf.size() - pos - kBlockHeader) break;
    uint32_t crc = kprof::Crc32c(&buf[pos], 12);
    crc = kprof::Crc32c(&buf[pos + kBlockHeader], payload, crc);
    if (crc != old_crc) {
      std::memcpy(&buf[pos + 12], &crc, 4);
      changed = true;
    }
    pos += kBlockHeader + payload;
  }
  return changed;
}

void ReadAndAnalyze(const uint8_t* data, size_t size) {
  const std::string path = kprof::fuzz::WriteScratch("input.kprof", data, size);
  try {
    kprof::Run run;
    run.processes.push_back(kprof::ReadRunFile(path));
    kprof::fuzz::AnalyzeRun(run);
  } catch (const kprof::InputError&) {
    // Refusing a bad file with one line is the expected outcome.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ReadAndAnalyze(data, size);
  std::vector<uint8_t> fixed(data, data + size);
  if (FixChecksums(fixed)) ReadAndAnalyze(fixed.data(), fixed.size());
  return 0;
}
