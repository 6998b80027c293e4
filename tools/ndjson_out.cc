#include "tools/ndjson_out.h"

#include <iostream>

namespace eventfold::cli {

void NdjsonOut::Line(std::string_view json) {
  buffer_.append(json);
  buffer_.push_back('\n');
  if (buffer_.size() >= kFlushBytes) {
    std::cout << buffer_;
    buffer_.clear();
  }
}

void NdjsonOut::Flush() {
  std::cout << buffer_ << std::flush;
  buffer_.clear();
}

}  // namespace eventfold::cli
