// twilio_webhook.cpp — see twilio_webhook.h.
#include "twilio_webhook.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <optional>

#include "realtime_dialect.h"  // base64_append

namespace rtce {
namespace {

using Sha1Mac = std::array<uint8_t, 20>;

constexpr std::string_view kXmlDeclaration = R"(<?xml version="1.0" encoding="UTF-8"?>)";

Sha1Mac signature_mac(std::string_view auth_token, std::string_view url, std::span<const FormField> params) {
  std::vector<const FormField*> sorted;
  sorted.reserve(params.size());
  for (const FormField& p : params) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](const FormField* a, const FormField* b) {
    return a->name != b->name ? a->name < b->name : a->value < b->value;
  });
  std::string data(url);
  for (const FormField* p : sorted) data.append(p->name).append(p->value);
  Sha1Mac mac{};
  unsigned int len = 0;
  HMAC(EVP_sha1(), auth_token.data(), static_cast<int>(auth_token.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(), &len);
  return mac;
}

std::string base64(std::span<const uint8_t> bytes) {
  std::string out;
  base64_append(bytes, out);
  return out;
}

// The other spelling of `url` as to its default port: with ":443"/":80" inserted after the
// host when it has no port, without it when it has exactly that one; nullopt for another
// scheme or another port (there is no other spelling to try).
std::optional<std::string> default_port_variant(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  std::string scheme(url.substr(0, scheme_end));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  const std::string_view default_port = scheme == "https" ? "443" : scheme == "http" ? "80" : "";
  if (default_port.empty()) return std::nullopt;
  const size_t authority_begin = scheme_end + 3;
  const size_t authority_end = std::min(url.find_first_of("/?#", authority_begin), url.size());
  const std::string_view authority = url.substr(authority_begin, authority_end - authority_begin);
  // The host starts after any userinfo; an IPv6 literal's colons sit inside [...].
  const size_t host_begin = authority.rfind('@') == std::string_view::npos ? 0 : authority.rfind('@') + 1;
  const size_t colon = authority.rfind(':');
  const size_t bracket = authority.rfind(']');
  const bool has_port = colon != std::string_view::npos && colon >= host_begin &&
                        (bracket == std::string_view::npos || colon > bracket);
  std::string variant;
  if (!has_port) {
    variant.append(url.substr(0, authority_end))
        .append(":")
        .append(default_port)
        .append(url.substr(authority_end));
    return variant;
  }
  if (authority.substr(colon + 1) != default_port) return std::nullopt;
  variant.append(url.substr(0, authority_begin + colon)).append(url.substr(authority_end));
  return variant;
}

bool signature_matches(std::string_view auth_token, std::string_view url, std::span<const FormField> params,
                       std::string_view signature) {
  const Sha1Mac mac = signature_mac(auth_token, url, params);
  const std::string expected = base64(mac);
  // The length of a valid signature is public (28 characters); only the content is compared
  // in constant time.
  return signature.size() == expected.size() &&
         CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace

std::string twilio_signature(std::string_view auth_token, std::string_view url,
                             std::span<const FormField> params) {
  return base64(signature_mac(auth_token, url, params));
}

bool twilio_signature_valid(std::string_view auth_token, std::string_view url,
                            std::span<const FormField> params, std::string_view signature) {
  if (signature.empty()) return false;
  if (signature_matches(auth_token, url, params, signature)) return true;
  const auto variant = default_port_variant(url);
  return variant && signature_matches(auth_token, *variant, params, signature);
}

std::string xml_attribute_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out.append("&amp;"); break;
      case '<': out.append("&lt;"); break;
      case '>': out.append("&gt;"); break;
      case '"': out.append("&quot;"); break;
      case '\'': out.append("&apos;"); break;
      case '\t': out.append("&#9;"); break;
      case '\n': out.append("&#10;"); break;
      case '\r': out.append("&#13;"); break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
        break;
    }
  }
  return out;
}

void append_stream_element(const TwimlStream& stream, std::string_view attributes, std::string& out) {
  out.append(R"(<Stream url=")").append(xml_attribute_escape(stream.url)).append("\"").append(attributes);
  if (stream.parameters.empty()) {
    out.append("/>");
  } else {
    out.append(">");
    for (const auto& [name, value] : stream.parameters) {
      out.append(R"(<Parameter name=")").append(xml_attribute_escape(name));
      out.append(R"(" value=")").append(xml_attribute_escape(value)).append("\"/>");
    }
    out.append("</Stream>");
  }
}

std::string twiml_connect_stream(const TwimlStream& stream) {
  std::string out(kXmlDeclaration);
  out.append("<Response><Connect>");
  append_stream_element(stream, {}, out);
  out.append("</Connect></Response>");
  return out;
}

std::string twiml_reject(std::string_view reason) {
  std::string out(kXmlDeclaration);
  out.append(R"(<Response><Reject reason=")")
      .append(reason == "busy" ? "busy" : "rejected")
      .append("\"/></Response>");
  return out;
}

}  // namespace rtce
