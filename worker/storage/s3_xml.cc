#include "worker/storage/s3_xml.h"
#include "worker/storage/strings.h"

#include <cstdlib>


namespace quark::storage {
namespace {

void AppendUtf8(std::string* out, unsigned long code) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

}  // namespace

std::vector<std::string> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string> out;
  std::string open = str::Cat("<", tag);
  std::string close = str::Cat("</", tag, ">");
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    size_t after = pos + open.size();
    if (after >= xml.size() || (xml[after] != '>' && xml[after] != ' ')) {
      pos = after;  // a longer tag name that starts the same ("<Key" vs "<KeyCount")
      continue;
    }
    size_t start = xml.find('>', after);
    if (start == std::string_view::npos) break;
    if (xml[start - 1] == '/') {  // <tag/>
      out.emplace_back();
      pos = start + 1;
      continue;
    }
    size_t end = xml.find(close, start + 1);
    if (end == std::string_view::npos) break;
    std::string_view inner = xml.substr(start + 1, end - start - 1);
    out.push_back(inner.find('<') == std::string_view::npos ? XmlUnescape(inner) : std::string(inner));
    pos = end + close.size();
  }
  return out;
}

std::string XmlFirst(std::string_view xml, std::string_view tag) {
  std::vector<std::string> all = XmlElements(xml, tag);
  return all.empty() ? "" : all.front();
}

std::string XmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    std::string_view entity = text.substr(i + 1, semi - i - 1);
    if (entity == "amp") out.push_back('&');
    else if (entity == "lt") out.push_back('<');
    else if (entity == "gt") out.push_back('>');
    else if (entity == "quot") out.push_back('"');
    else if (entity == "apos") out.push_back('\'');
    else if (!entity.empty() && entity[0] == '#') {
      std::string digits(entity.substr(entity.size() > 1 && (entity[1] == 'x' || entity[1] == 'X') ? 2 : 1));
      AppendUtf8(&out, std::strtoul(digits.c_str(), nullptr, entity.size() > 1 && (entity[1] | 0x20) == 'x' ? 16 : 10));
    } else {
      out.append(text.substr(i, semi - i + 1));
    }
    i = semi;
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace quark::storage
