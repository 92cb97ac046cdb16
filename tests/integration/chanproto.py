"""The cluster-key channel (common/chan.h, proto/auth.proto) written again in Python, for
the test fakes that stand in for a cluster member (a leader speaking to spurd, a controller
answering spurd's registration, an agent the real leader dials).

Written from chan.c's header comment, not from its code: a fake that completes the
handshake with a real replica or spurd shows the two agree with the description.

    T       = field(label) field("spur-chan-1") field(cluster) field(role_i) field(role_r)
              field(key_id) field(nonce_i) field(nonce_r) field(ids_i) field(ids_r)
    proof   = HMAC-SHA-256(key, T) with label "responder" / "initiator"
    k_ir    = HKDF-SHA-256(key, salt nonce_i|nonce_r, info T with label "spur-chan-1 i->r")
    frame   = inner | u64 seq | HMAC-SHA-256(k_dir, seq | inner)[:16]
"""
import hashlib
import hmac
import os
import struct
from pathlib import Path

from spurtest import _hkdf_sha256, key_id, pb_decode, pb_field

MAGIC = b"\x00SC1"
VERSION = 1


def field(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">I", len(b)) + b


def _hello(cluster, role, ids, nonce, chosen=b"", proof=b"", error=""):
    body = pb_field(1, VERSION) + pb_field(2, cluster) + pb_field(3, role)
    for i in ids:
        body += pb_field(4, i)
    body += pb_field(5, nonce)
    if chosen:
        body += pb_field(6, chosen)
    if proof:
        body += pb_field(7, proof)
    if error:
        body += pb_field(8, error)
    return MAGIC + body


class ChanError(Exception):
    pass


class Chan:
    """One side of a channel. key: bytes, or the path of a key file."""

    def __init__(self, key, cluster="test", role="controller", initiator=True):
        self.key = Path(key).read_bytes() if not isinstance(key, bytes) else key
        self.id = bytes.fromhex(key_id(self.key))
        self.cluster = cluster
        self.role = role
        self.initiator = initiator
        self.nonce = os.urandom(32)
        self.send_seq = 0
        self.recv_seq = 0

    def _t(self, label, role_i, role_r, nonce_i, nonce_r, ids_i, ids_r):
        return (field(label) + field("spur-chan-1") + field(self.cluster) + field(role_i)
                + field(role_r) + field(self.id) + field(nonce_i) + field(nonce_r)
                + field(b"".join(ids_i)) + field(b"".join(ids_r)))

    def _keys(self, role_i, role_r, nonce_i, nonce_r, ids_i, ids_r):
        args = (role_i, role_r, nonce_i, nonce_r, ids_i, ids_r)
        k_ir = _hkdf_sha256(self.key, self._t("spur-chan-1 i->r", *args), 32, nonce_i + nonce_r)
        k_ri = _hkdf_sha256(self.key, self._t("spur-chan-1 r->i", *args), 32, nonce_i + nonce_r)
        self.k_send, self.k_recv = (k_ir, k_ri) if self.initiator else (k_ri, k_ir)

    def _proof(self, label, *args):
        return hmac.new(self.key, self._t(label, *args), hashlib.sha256).digest()

    # -- initiator ------------------------------------------------------------------------
    def hello(self):
        return _hello(self.cluster, self.role, [self.id], self.nonce)

    def take_responder_hello(self, payload):
        """The responder's hello; returns the Proof payload to send."""
        if not payload.startswith(MAGIC):
            raise ChanError("not a handshake frame")
        h = pb_decode(payload[4:])
        if h.get(8):
            raise ChanError("refused by peer: " + h[8][0].decode(errors="replace"))
        role_r = h[3][0].decode()
        nonce_r = h[5][0]
        ids_r = h.get(4, [])
        args = ("%s" % self.role, role_r, self.nonce, nonce_r, [self.id], ids_r)
        if not hmac.compare_digest(self._proof("responder", *args), h[7][0]):
            raise ChanError("the responder did not prove the key")
        self._keys(*args)
        return MAGIC + pb_field(1, self._proof("initiator", *args))

    # -- responder ------------------------------------------------------------------------
    def take_initiator_hello(self, payload):
        """The initiator's hello; returns our hello (with our proof) to send."""
        if not payload.startswith(MAGIC):
            raise ChanError("not a handshake frame")
        h = pb_decode(payload[4:])
        ids_i = h.get(4, [])
        if self.id not in ids_i:
            raise ChanError("no common key")
        self.args = (h[3][0].decode(), self.role, h[5][0], self.nonce, ids_i, [self.id])
        return _hello(self.cluster, self.role, [self.id], self.nonce, self.id,
                      self._proof("responder", *self.args))

    def take_proof(self, payload):
        p = pb_decode(payload[4:])
        if not hmac.compare_digest(self._proof("initiator", *self.args), p[1][0]):
            raise ChanError("the initiator did not prove the key")
        self._keys(*self.args)

    # -- frames ---------------------------------------------------------------------------
    def seal(self, inner):
        seq = struct.pack(">Q", self.send_seq)
        self.send_seq += 1
        return inner + seq + hmac.new(self.k_send, seq + inner, hashlib.sha256).digest()[:16]

    def open(self, payload):
        if len(payload) < 24:
            raise ChanError("short frame")
        inner, seq, tag = payload[:-24], payload[-24:-16], payload[-16:]
        if not hmac.compare_digest(
                hmac.new(self.k_recv, seq + inner, hashlib.sha256).digest()[:16], tag):
            raise ChanError("frame MAC does not verify")
        if struct.unpack(">Q", seq)[0] != self.recv_seq:
            raise ChanError("frame out of sequence")
        self.recv_seq += 1
        return inner


def frame(payload):
    return struct.pack(">I", len(payload)) + payload


def read_frame(sock, buf=b""):
    """(payload, rest) of the next frame on sock, reading as needed; EOF raises EOFError."""
    while True:
        if len(buf) >= 4:
            n = struct.unpack(">I", buf[:4])[0]
            if len(buf) >= 4 + n:
                return buf[4:4 + n], buf[4 + n:]
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("closed")
        buf += chunk


def connect(sock, key, cluster="test", role="controller"):
    """Prove the key on a connected socket as the initiator. Returns (chan, leftover)."""
    ch = Chan(key, cluster, role, initiator=True)
    sock.sendall(frame(ch.hello()))
    payload, rest = read_frame(sock)
    sock.sendall(frame(ch.take_responder_hello(payload)))
    return ch, rest


def accept(sock, key, cluster="test", role="agent"):
    """Take the proof of a dialler as the responder. Returns (chan, leftover)."""
    ch = Chan(key, cluster, role, initiator=False)
    payload, rest = read_frame(sock)
    sock.sendall(frame(ch.take_initiator_hello(payload)))
    payload, rest = read_frame(sock, rest)
    ch.take_proof(payload)
    return ch, rest
