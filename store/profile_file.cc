// Profile::FromFile: the one place a profile is read from disk, kept out of
// core/ so that core stays pure logic without I/O.

#include <fstream>
#include <sstream>

#include "eventfold/profile.h"

namespace eventfold {

Result<Profile> Profile::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read profile file " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  Result<Profile> p = FromJson(buf.str());
  if (!p.ok()) return p.status().WithContext(path);
  return p;
}

}  // namespace eventfold
