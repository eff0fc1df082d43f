// twilio_webhook.h — the HTTP side of a Twilio voice call, socket-free: checking that a
// webhook POST came from Twilio (X-Twilio-Signature), and the TwiML that answers it, either
// connecting the call to a Media Stream (our WebSocket) or rejecting it.
// Twilio's scheme: https://www.twilio.com/docs/usage/webhooks/webhooks-security
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "form_urlencoded.h"

namespace rtce {

// base64(HMAC-SHA1(auth_token, url + name1 + value1 + name2 + value2 ...)) over the POST
// fields sorted by name, and by value among equal names (byte order, as Twilio's helper
// libraries sort). `url` is the full URL Twilio requested, query string included.
std::string twilio_signature(std::string_view auth_token, std::string_view url,
                             std::span<const FormField> params);

// Whether `signature` (the X-Twilio-Signature header) signs this request. Twilio may sign
// the URL with or without the scheme's default port (443 for https, 80 for http), so the
// URL is tried as given, then with the default port added when it has none, or removed
// when it has that one — as twilio-python's RequestValidator does. Constant-time in the
// signature's content; an empty signature is never valid.
bool twilio_signature_valid(std::string_view auth_token, std::string_view url,
                            std::span<const FormField> params, std::string_view signature);

// <Connect><Stream>: Twilio opens a bidirectional Media Stream to `url` (wss://) and hands
// `parameters` to it in the start message's customParameters.
struct TwimlStream {
  std::string url;
  std::vector<std::pair<std::string, std::string>> parameters;
};

// <?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url=".."><Parameter
// name=".." value=".."/>...</Stream></Connect></Response>, every attribute escaped.
std::string twiml_connect_stream(const TwimlStream& stream);
// <Stream url=".." + `attributes` (verbatim, each with its leading space)> and its <Parameter>s,
// appended to `out`: the element TwiML and TeXML share.
void append_stream_element(const TwimlStream& stream, std::string_view attributes, std::string& out);

// <Response><Reject reason=".."/></Response>: the caller hears a busy tone for "busy", and
// the not-in-service message for anything else (sent as "rejected"). Rejecting costs the
// account nothing, unlike answering and hanging up.
std::string twiml_reject(std::string_view reason);

// `text` safe inside a double- or single-quoted XML attribute: & < > " ' as entities; tab,
// line feed and carriage return as character references (so that attribute-value
// normalization keeps them); the other bytes below 0x20, which XML 1.0 cannot carry at
// all, dropped. Bytes from 0x80 up are copied (UTF-8 is not checked).
std::string xml_attribute_escape(std::string_view text);

}  // namespace rtce
