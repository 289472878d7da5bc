#!/usr/bin/env python3
"""Verify a Gatehouse receipt chain export, independently of Gatehouse.

Reads an export (GET /api/v1/receipts, all pages from after_seq=0, one JSON
receipt per line) on stdin and checks, receipt by receipt, what
docs/receipts.md specifies:

    content_hash = sha256(JCS(content))          (unless redacted)
    hash = sha256(JCS({"receipt_id", "seq", "prev_hash", "content_hash", "metadata"}))

with gapless seq from 1, each prev_hash the previous hash (32 zero bytes for
seq 1), and a redacted receipt (content null) carrying redacted_at and
redacted_for. JCS is RFC 8785, implemented below for what receipts hold.

    python3 verify_receipts.py < chain.ndjson
    python3 verify_receipts.py --checkpoint cp.json --public-key key.pem < chain.ndjson

With --checkpoint (the JSON of GET /api/v1/receipts/checkpoint, saved
earlier) it also proves the chain extends that checkpoint: the receipt at
its seq has its head_hash. With --public-key (PEM, base64 of the raw key, or
the JSON of GET /api/v1/receipts/public-key) it checks the checkpoint's
Ed25519 signature too.

Prints "ok: ..." and exits 0, or "broken: first bad seq N: reason" and exits
1; exits 2 when it cannot run (bad arguments, unreadable files).
Python 3 standard library only.
"""

import argparse
import base64
import hashlib
import json
import math
import sys

GENESIS = "0" * 64
CHECKPOINT_TYPE = "gatehouse.receipts.checkpoint.v1"


# --- RFC 8785 JSON Canonicalization Scheme ------------------------------------


def jcs(value):
    """The canonical JSON text of value (a json.loads result)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return jcs_string(value)
    if isinstance(value, (int, float)):
        # Every JSON number is an IEEE 754 double in JCS, integers too.
        return jcs_number(float(value))
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, dict):
        # Keys sort by their UTF-16 code units (big-endian bytes compare alike).
        keys = sorted(value, key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(jcs_string(k) + ":" + jcs(value[k]) for k in keys) + "}"
    raise ValueError("not a JSON value: %r" % (value,))


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def jcs_string(s):
    out = ['"']
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            raise ValueError("a lone surrogate is not valid I-JSON")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def jcs_number(x):
    """ECMAScript's Number.prototype.toString for a finite double.

    Python's repr gives the shortest digits that round-trip (as ECMAScript
    requires) but formats them differently ('1e-07', '1e+21', '123.0'), so
    the digits and exponent are taken from it and laid out again.
    """
    if math.isnan(x) or math.isinf(x):
        raise ValueError("NaN and Infinity are not JSON")
    if x == 0:
        return "0"  # -0 too
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    exp = int(exp) if exp else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    stripped = digits.rstrip("0")
    trailing = len(digits) - len(stripped)
    digits = stripped
    k = len(digits)
    # The value is 0.<digits> x 10^n.
    n = k + exp - len(frac_part) + trailing
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = ("+" if e >= 0 else "-") + str(abs(e))
        out = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + es
    return sign + out


def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def strict_object(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError("duplicate key %r" % k)
        obj[k] = v
    return obj


def parse_json(text):
    return json.loads(text, object_pairs_hook=strict_object,
                      parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


# --- Ed25519 verification (RFC 8032, section 6) -------------------------------

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _recover_x(y, sign):
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


def _add(p, q):
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s, p):
    q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _equal(p, q):
    return (p[0] * q[2] - q[0] * p[2]) % _P == 0 and (p[1] * q[2] - q[1] * p[2]) % _P == 0


def _decompress(b):
    y = int.from_bytes(b, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_G = (_recover_x(_GY, 0), _GY, 1, _recover_x(_GY, 0) * _GY % _P)


def ed25519_verify(public, message, signature):
    if len(public) != 32 or len(signature) != 64:
        return False
    a = _decompress(public)
    r = _decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _L
    return _equal(_mul(s, _G), _add(r, _mul(h, a)))


def read_public_key(text):
    text = text.strip()
    if text.startswith("{"):
        text = parse_json(text)["public_key"]
    if text.startswith("-----BEGIN PUBLIC KEY-----"):
        body = "".join(line for line in text.splitlines() if not line.startswith("-----"))
        der = base64.b64decode(body, validate=True)
        # SubjectPublicKeyInfo of an Ed25519 key: a fixed 12-byte prefix.
        if len(der) != 44 or der[:12] != bytes.fromhex("302a300506032b6570032100"):
            raise ValueError("not an Ed25519 PUBLIC KEY")
        return der[12:]
    raw = base64.b64decode(text, validate=True)
    if len(raw) != 32:
        raise ValueError("a raw Ed25519 public key is 32 bytes")
    return raw


# --- the chain ----------------------------------------------------------------


def is_hash(h):
    return isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)


def check(r, want, prev, expect):
    """Why receipt r cannot be the receipt at seq want, or None."""
    seq = r.get("seq")
    rid = r.get("receipt_id")
    if not isinstance(seq, int) or isinstance(seq, bool):
        return "receipt %s has no integer seq" % rid
    if seq > want:
        return "seq %d is missing: the chain goes from seq %d to seq %d" % (want, want - 1, seq)
    if seq < want:
        return "expected seq %d, found seq %d again or out of order (receipt %s)" % (want, seq, rid)
    if not isinstance(rid, str):
        return "receipt at seq %d has no receipt_id" % seq
    if not all(is_hash(r.get(k)) for k in ("prev_hash", "hash", "content_hash")):
        return "receipt %s has a hash, prev_hash or content_hash that is not 64 lowercase hex digits" % rid
    if not isinstance(r.get("metadata"), dict):
        return "the metadata of receipt %s is not a JSON object" % rid
    content = r.get("content")
    redacted = r.get("redacted_at") is not None
    if content is None and not redacted:
        return "receipt %s has no content but is not marked redacted" % rid
    if content is not None and redacted:
        return "receipt %s is marked redacted but still has content" % rid
    if redacted and not r.get("redacted_for"):
        return "receipt %s is redacted without a reason (redacted_for)" % rid
    if content is not None:
        if not isinstance(content, dict):
            return "the content of receipt %s is not a JSON object" % rid
        if sha256_hex(jcs(content)) != r["content_hash"]:
            return "the content of receipt %s does not match its content_hash" % rid
    if r["prev_hash"] != prev:
        if want == 1:
            return "the prev_hash of seq 1 (receipt %s) is not 32 zero bytes" % rid
        return "the prev_hash of receipt %s is not the hash of seq %d" % (rid, want - 1)
    link = {"receipt_id": rid, "seq": seq, "prev_hash": r["prev_hash"],
            "content_hash": r["content_hash"], "metadata": r["metadata"]}
    if sha256_hex(jcs(link)) != r["hash"]:
        return ("the hash of receipt %s does not match its receipt_id, seq, prev_hash, "
                "content_hash and metadata" % rid)
    if expect and seq == expect[0] and r["hash"] != expect[1]:
        return "the hash of seq %d differs from the checkpoint's head_hash: the chain was rewritten" % seq
    return None


def verify(lines, expect=None):
    """(ok, checked, head_seq, head_hash, first_bad_seq, reason, content_errors).

    content_errors lists the seqs of receipts whose metadata holds
    content_error: their content could not be canonicalised when they were
    chained, so it is kept as text (content_text); they verify like others.
    """
    head, prev, content_errors = 0, GENESIS, []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        want = head + 1
        try:
            r = parse_json(line.decode("utf-8"))
            reason = check(r, want, prev, expect) if isinstance(r, dict) else "a line is not a JSON object"
        except ValueError as e:  # malformed JSON, UTF-8, numbers or strings
            reason = "the receipt at seq %d cannot be read: %s" % (want, e)
        if reason:
            return False, head, head, prev, want, reason, content_errors
        head, prev = want, r["hash"]
        if "content_error" in r["metadata"]:
            content_errors.append(want)
    if expect and head < expect[0]:
        return (False, head, head, prev, head + 1,
                "the chain ends at seq %d, before the checkpoint's seq %d: receipts were removed" % (head, expect[0]),
                content_errors)
    return True, head, head, prev, None, None, content_errors


def main():
    ap = argparse.ArgumentParser(description="Verify a Gatehouse receipt chain export read on stdin.")
    ap.add_argument("--checkpoint", help="a checkpoint saved earlier (JSON); prove the chain extends it")
    ap.add_argument("--public-key", help="the key that signed it (PEM, base64 or the public-key JSON)")
    args = ap.parse_args()
    expect = None
    if args.checkpoint:
        try:
            with open(args.checkpoint, encoding="utf-8") as f:
                cp = parse_json(f.read())
            seq, head_hash = cp["seq"], cp["head_hash"]
            if not isinstance(seq, int) or seq < 0 or not is_hash(head_hash):
                raise ValueError("seq or head_hash is malformed")
        except (OSError, ValueError, KeyError, TypeError) as e:
            print("cannot read the checkpoint: %s" % e, file=sys.stderr)
            return 2
        if args.public_key:
            try:
                with open(args.public_key, encoding="utf-8") as f:
                    public = read_public_key(f.read())
            except (OSError, ValueError, KeyError, TypeError) as e:
                print("cannot read the public key: %s" % e, file=sys.stderr)
                return 2
            signed = {k: cp.get(k) for k in ("workspace_id", "seq", "head_hash", "time")}
            signed["type"] = CHECKPOINT_TYPE
            try:
                signature = base64.b64decode(cp.get("signature", ""), validate=True)
            except ValueError:
                signature = b""
            key_id = hashlib.sha256(public).hexdigest()[:16]
            if cp.get("key_id") != key_id or not ed25519_verify(public, jcs(signed).encode("utf-8"), signature):
                print("broken: the checkpoint's signature does not verify with key %s" % key_id)
                return 1
        else:
            print("note: the checkpoint's signature is not checked (no --public-key)", file=sys.stderr)
        expect = (seq, head_hash)
    ok, checked, head_seq, head_hash, bad, reason, content_errors = verify(sys.stdin.buffer, expect)
    if content_errors:
        print("note: %d receipts (first seq %d) hold content that could not be canonicalised when chained, "
              "kept as text (metadata content_error)" % (len(content_errors), content_errors[0]), file=sys.stderr)
    if ok:
        print("ok: %d receipts, head seq %d, head hash %s" % (checked, head_seq, head_hash))
        return 0
    print("broken: first bad seq %d: %s (the %d receipts before it verify)" % (bad, reason, checked))
    return 1


if __name__ == "__main__":
    sys.exit(main())
