#include "stack/proc_dwfl.h"

#include <elfutils/libdwfl.h>

#include <cerrno>
#include <cstring>

namespace canopy::stack {
namespace {

// Local debug information only: dwfl_standard_find_debuginfo would also ask
// debuginfod servers when DEBUGINFOD_URLS is set (see proc_dwfl.h for why not).
int find_local_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                         const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                         char** debuginfo_file_name) {
  return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
}

char* no_debuginfo_path = nullptr;

const Dwfl_Callbacks process_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = find_local_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = &no_debuginfo_path,
};

Result<void> report(Dwfl* dwfl, pid_t pid) {
  dwfl_report_begin(dwfl);
  int rc = dwfl_linux_proc_report(dwfl, pid);
  // dwfl_report_end must follow dwfl_report_begin whatever the outcome.
  if (dwfl_report_end(dwfl, nullptr, nullptr) != 0 && rc == 0) {
    return Error{"cannot list the modules of process " + std::to_string(pid) + ": " + dwfl_error_text()};
  }
  if (rc != 0) {
    std::string why = rc > 0 ? std::strerror(rc) : dwfl_error_text();
    return Error{"cannot read the memory map of process " + std::to_string(pid) + " (/proc/" +
                 std::to_string(pid) + "/maps): " + why};
  }
  return {};
}

}  // namespace

void DwflDeleter::operator()(Dwfl* dwfl) const { dwfl_end(dwfl); }

std::string dwfl_error_text() {
  const char* text = dwfl_errmsg(-1);
  return text != nullptr ? text : "unknown libdwfl error";
}

Result<DwflPtr> report_process(pid_t pid) {
  DwflPtr dwfl(dwfl_begin(&process_callbacks));
  if (!dwfl) return Error{"cannot start libdwfl: " + dwfl_error_text()};
  if (auto ok = report(dwfl.get(), pid); !ok) return Error{ok.error(), ok.error_kind()};
  return dwfl;
}

Result<void> rereport_process(Dwfl* dwfl, pid_t pid) { return report(dwfl, pid); }

}  // namespace canopy::stack
