"""Just enough STUN (RFC 8489 / RFC 5389) for the integration test: encode and parse
messages, MESSAGE-INTEGRITY (HMAC-SHA1, short-term credential = the ICE pwd),
FINGERPRINT (CRC-32 XOR 0x5354554e) and XOR-MAPPED-ADDRESS. Standard library only."""

import hashlib
import hmac
import ipaddress
import os
import struct
import zlib
from dataclasses import dataclass, field

MAGIC_COOKIE = 0x2112A442
HEADER_LEN = 20
FINGERPRINT_XOR = 0x5354554E

BINDING_REQUEST = 0x0001
BINDING_INDICATION = 0x0011
BINDING_SUCCESS = 0x0101
BINDING_ERROR = 0x0111

ATTR_USERNAME = 0x0006
ATTR_MESSAGE_INTEGRITY = 0x0008
ATTR_XOR_MAPPED_ADDRESS = 0x0020
ATTR_PRIORITY = 0x0024
ATTR_SOFTWARE = 0x8022
ATTR_FINGERPRINT = 0x8028
ATTR_ICE_CONTROLLING = 0x802A


class StunError(ValueError):
    pass


def _attr(atype, value):
    return struct.pack("!HH", atype, len(value)) + value + b"\x00" * (-len(value) % 4)


def _header(msg_type, length, txid):
    return struct.pack("!HHI", msg_type, length, MAGIC_COOKIE) + txid


def new_txid():
    return os.urandom(12)


def encode(msg_type, txid, attrs, integrity_key=None, fingerprint=True):
    """attrs: list of (type, bytes). Appends MESSAGE-INTEGRITY when integrity_key (bytes)
    is given, then FINGERPRINT, each computed with the length field covering it."""
    if len(txid) != 12:
        raise StunError("transaction id must be 12 bytes")
    body = b"".join(_attr(t, v) for t, v in attrs)
    if integrity_key is not None:
        mac = hmac.new(integrity_key, _header(msg_type, len(body) + 24, txid) + body, hashlib.sha1).digest()
        body += _attr(ATTR_MESSAGE_INTEGRITY, mac)
    if fingerprint:
        crc = zlib.crc32(_header(msg_type, len(body) + 8, txid) + body) ^ FINGERPRINT_XOR
        body += _attr(ATTR_FINGERPRINT, struct.pack("!I", crc))
    return _header(msg_type, len(body), txid) + body


@dataclass
class StunMessage:
    msg_type: int
    txid: bytes
    raw: bytes
    attrs: list = field(default_factory=list)  # (type, offset of the attribute header, value)

    def get(self, atype):
        for t, _, v in self.attrs:
            if t == atype:
                return v
        return None

    def _offset(self, atype):
        for t, off, _ in self.attrs:
            if t == atype:
                return off
        return None

    def integrity_ok(self, key):
        """True/False, or None when the message has no MESSAGE-INTEGRITY."""
        off = self._offset(ATTR_MESSAGE_INTEGRITY)
        if off is None:
            return None
        hdr = _header(self.msg_type, off + 24 - HEADER_LEN, self.txid)
        mac = hmac.new(key, hdr + self.raw[HEADER_LEN:off], hashlib.sha1).digest()
        return hmac.compare_digest(mac, self.get(ATTR_MESSAGE_INTEGRITY))

    def fingerprint_ok(self):
        """True/False, or None when the message has no FINGERPRINT."""
        off = self._offset(ATTR_FINGERPRINT)
        if off is None:
            return None
        if off + 8 != len(self.raw):
            return False  # FINGERPRINT must be the last attribute
        hdr = _header(self.msg_type, off + 8 - HEADER_LEN, self.txid)
        crc = zlib.crc32(hdr + self.raw[HEADER_LEN:off]) ^ FINGERPRINT_XOR
        return struct.pack("!I", crc) == self.get(ATTR_FINGERPRINT)

    def username(self):
        v = self.get(ATTR_USERNAME)
        return None if v is None else v.decode("utf-8", "replace")

    def xor_mapped_address(self):
        v = self.get(ATTR_XOR_MAPPED_ADDRESS)
        return None if v is None else decode_xor_address(v, self.txid)


def looks_like_stun(data):
    return len(data) >= HEADER_LEN and data[0] <= 3 and struct.unpack_from("!I", data, 4)[0] == MAGIC_COOKIE


def parse(data):
    data = bytes(data)
    if not looks_like_stun(data):
        raise StunError("not STUN")
    msg_type, length = struct.unpack_from("!HH", data, 0)
    if length % 4 or HEADER_LEN + length != len(data):
        raise StunError("length field %d does not match datagram of %d bytes" % (length, len(data)))
    msg = StunMessage(msg_type, data[8:20], data)
    off = HEADER_LEN
    while off < len(data):
        if off + 4 > len(data):
            raise StunError("attribute header runs past the message")
        atype, alen = struct.unpack_from("!HH", data, off)
        if off + 4 + alen > len(data):
            raise StunError("attribute 0x%04x runs past the message" % atype)
        msg.attrs.append((atype, off, data[off + 4:off + 4 + alen]))
        off += 4 + alen + (-alen % 4)
    return msg


def encode_xor_address(ip, port, txid):
    addr = ipaddress.ip_address(ip)
    cookie = struct.pack("!I", MAGIC_COOKIE)
    mask = cookie if addr.version == 4 else cookie + txid
    xaddr = bytes(a ^ b for a, b in zip(addr.packed, mask))
    return struct.pack("!BBH", 0, 1 if addr.version == 4 else 2, port ^ (MAGIC_COOKIE >> 16)) + xaddr


def decode_xor_address(value, txid):
    if len(value) < 4:
        raise StunError("XOR-MAPPED-ADDRESS too short")
    _, fam, xport = struct.unpack_from("!BBH", value, 0)
    cookie = struct.pack("!I", MAGIC_COOKIE)
    if fam == 1 and len(value) == 8:
        mask = cookie
    elif fam == 2 and len(value) == 20:
        mask = cookie + txid
    else:
        raise StunError("XOR-MAPPED-ADDRESS family %d with %d bytes" % (fam, len(value)))
    raw = bytes(a ^ b for a, b in zip(value[4:], mask))
    return str(ipaddress.ip_address(raw)), xport ^ (MAGIC_COOKIE >> 16)


def binding_request(server_ufrag, client_ufrag, pwd, txid=None, priority=0x6E7E1EFF, tie_breaker=None):
    """An ICE connectivity check as a controlling browser sends it: USERNAME,
    ICE-CONTROLLING, PRIORITY, MESSAGE-INTEGRITY (keyed with the server's pwd), FINGERPRINT."""
    txid = txid or new_txid()
    username = ("%s:%s" % (server_ufrag, client_ufrag)).encode()
    attrs = [
        (ATTR_USERNAME, username),
        (ATTR_ICE_CONTROLLING, tie_breaker or os.urandom(8)),
        (ATTR_PRIORITY, struct.pack("!I", priority)),
    ]
    return txid, encode(BINDING_REQUEST, txid, attrs, integrity_key=pwd.encode())


def binding_success(request_txid, mapped_ip, mapped_port, pwd, software=None):
    attrs = [(ATTR_XOR_MAPPED_ADDRESS, encode_xor_address(mapped_ip, mapped_port, request_txid))]
    if software:
        attrs.append((ATTR_SOFTWARE, software.encode()))
    return encode(BINDING_SUCCESS, request_txid, attrs, integrity_key=pwd.encode())
