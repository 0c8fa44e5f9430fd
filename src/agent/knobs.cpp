// The agent's diagnosis and measurement knobs (kprof/agent_config.h), read once.
#include <cstdlib>

#include "agent/agent.h"

namespace kprof::agent {

const DiagnosticKnobs& Knobs() {
  static const DiagnosticKnobs knobs = ReadDiagnosticKnobs(std::getenv);
  return knobs;
}

}  // namespace kprof::agent
