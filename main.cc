#include "t.pb.h"
#include <google/protobuf/util/json_util.h>
#include <iostream>
int main(){
  for (const char* s : {"{\"pid\":null,\"port\":8000}", "{\"port\":8000.0}", "{\"port\":\"8000\"}", "{\"port\":8000.5}", "{\"port\":\"abc\"}", "{\"port\":true}", "{\"pid\":0}", "{\"tp\":null}", "{\"port\":1e3}"}) {
    t::M m; google::protobuf::util::JsonParseOptions o; o.ignore_unknown_fields=true;
    auto st = google::protobuf::util::JsonStringToMessage(s, &m, o);
    std::cout << s << " -> " << (st.ok() ? "ok" : std::string(st.message())) << " has_port=" << m.has_port() << " port=" << m.port() << " has_pid=" << m.has_pid() << "\n";
  }
}
