#include "sidecar/http/json_error.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace streamcar::http {

std::string ErrorJson(std::string_view message) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("error");
  writer.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Response JsonError(int status, std::string_view message) {
  Response response;
  response.status = status;
  response.content_type = "application/json";
  response.body = ErrorJson(message);
  return response;
}

}  // namespace streamcar::http
