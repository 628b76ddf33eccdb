#pragma once

#include <string>

namespace berth {

// `berthctl check`: what berthd checks of the config file at `path` before it starts, every
// error in one pass: the file itself (each error names its field and line: EAL options, device
// strings, fields), each service's table and flow sync's key files. Warnings say what berthd
// would start with but not serve well: a service that can serve nothing, a fleet TLS file that
// cannot be read (berthd starts on its cached version), a port's kernel interface missing on
// this host. The report ends with what no file check can tell (hugepages, devices' binding,
// backends' set-up), so that "valid" claims no more than was checked. As text, errors go to
// stderr and the rest to stdout; as JSON (`json`), all of it to stdout. Exit code 1 on an error.
struct CheckOutcome {
  std::string out;
  std::string err;
  int exit_code = 0;
};
CheckOutcome checkFile(const std::string& path, bool json);

}  // namespace berth
