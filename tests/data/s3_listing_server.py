"""A small S3-compatible server for memlens's hostile object-storage tests (tests/it/store.rs):
a bucket of a million keys or more, listed by ListObjectsV2 page by page and generated as
pages are asked for (moto holds every object in memory: a million puts take longer than the
test suite), and a few real objects served by GET.

    python3 s3_listing_server.py PORT BUCKET N [KEY=PATH | KEY@SIZE=PATH]...

The bucket holds N generated keys ``job/BBBB/partIII.log`` (block ``i // 1000``, ``i % 1000``;
a few bytes each) and each KEY given, served with PATH's bytes. ``KEY@SIZE=PATH`` lists KEY
with SIZE bytes whatever PATH holds when the GET comes: an object that grew (or shrank) since
it was listed. Listing is in key order, 1,000 keys a page (``max-keys`` lowers it), with
``prefix`` and ``continuation-token``; GET /BUCKET/KEY returns an object (404 ``NoSuchKey``
otherwise). Requests are not authenticated. ``GET /_stats`` returns how many listing pages
and GETs were served.
"""

from __future__ import annotations

import bisect
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse
from xml.sax.saxutils import escape

BLOCK = 1000
STAMP = "2026-01-01T00:00:00.000Z"
HTTP_DATE = "Thu, 01 Jan 2026 00:00:00 GMT"


class Bucket:
    def __init__(self, name: str, n: int, extra: dict[str, tuple[str, int | None]]) -> None:
        self.name = name
        self.n = n
        self.blocks = (n + BLOCK - 1) // BLOCK
        # Keys given: merged into the generated ones in key order.
        self.extra = extra
        self.extra_keys = sorted(extra)
        self.pages = 0
        self.gets = 0

    def generated(self, i: int) -> str:
        return f"job/{i // BLOCK:04d}/part{i % BLOCK:03d}.log"

    def keys_from(self, start: str, prefix: str):
        """Every key > start (all with start ""), in order, that starts with prefix."""
        # Generated keys in order, merged with the extra keys.
        i = 0
        if start.startswith("job/") and len(start) >= 8 and start[4:8].isdigit():
            i = int(start[4:8]) * BLOCK
        j = bisect.bisect_right(self.extra_keys, start)
        while i < self.n or j < len(self.extra_keys):
            g = self.generated(i) if i < self.n else None
            e = self.extra_keys[j] if j < len(self.extra_keys) else None
            if e is None or (g is not None and g < e):
                key, i = g, i + 1
            else:
                key, j = e, j + 1
            if key is None or key <= start:
                continue
            if key.startswith(prefix):
                yield key

    def size(self, key: str) -> int:
        if key in self.extra:
            path, listed = self.extra[key]
            if listed is not None:
                return listed
            with open(path, "rb") as f:
                f.seek(0, 2)
                return f.tell()
        return 8

    def body(self, key: str) -> bytes | None:
        if key in self.extra:
            with open(self.extra[key][0], "rb") as f:
                return f.read()
        if key.startswith("job/") and key.endswith(".log"):
            return b"not one\n"
        return None


BUCKET: Bucket


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def send(self, code: int, body: bytes, ctype: str = "application/xml", head: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Last-Modified", HTTP_DATE)
        self.send_header("ETag", '"0"')
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def not_found(self, what: str, head: bool = False) -> None:
        code = "NoSuchBucket" if what == "bucket" else "NoSuchKey"
        self.send(404, f"<Error><Code>{code}</Code><Message>no such {what}</Message></Error>".encode(), head=head)

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_GET(self, head: bool = False) -> None:
        url = urlparse(self.path)
        parts = url.path.lstrip("/").split("/", 1)
        if parts[0] == "_stats":
            self.send(200, f"{BUCKET.pages} {BUCKET.gets}\n".encode(), "text/plain")
            return
        if parts[0] != BUCKET.name:
            self.not_found("bucket", head)
            return
        if len(parts) == 1 or parts[1] == "":
            self.list(parse_qs(url.query))
            return
        key = unquote(parts[1])
        body = BUCKET.body(key)
        if body is None:
            self.not_found("key", head)
            return
        BUCKET.gets += 1
        self.send(200, body, "application/octet-stream", head)

    def list(self, q: dict[str, list[str]]) -> None:
        prefix = q.get("prefix", [""])[0]
        start = q.get("continuation-token", [q.get("start-after", [""])[0]])[0]
        max_keys = min(int(q.get("max-keys", ["1000"])[0]), 1000)
        keys = []
        more = False
        for k in BUCKET.keys_from(start, prefix):
            if len(keys) == max_keys:
                more = True
                break
            keys.append(k)
        BUCKET.pages += 1
        out = [
            '<?xml version="1.0" encoding="UTF-8"?>',
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
            f"<Name>{escape(BUCKET.name)}</Name><Prefix>{escape(prefix)}</Prefix>",
            f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>",
            f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>",
        ]
        if more:
            out.append(f"<NextContinuationToken>{escape(keys[-1])}</NextContinuationToken>")
        for k in keys:
            out.append(
                f"<Contents><Key>{escape(k)}</Key><LastModified>{STAMP}</LastModified>"
                f'<ETag>"0"</ETag><Size>{BUCKET.size(k)}</Size><StorageClass>STANDARD</StorageClass></Contents>'
            )
        out.append("</ListBucketResult>")
        self.send(200, "".join(out).encode())


def main(argv: list[str]) -> None:
    global BUCKET
    port, name, n = int(argv[0]), argv[1], int(argv[2])
    extra: dict[str, tuple[str, int | None]] = {}
    for a in argv[3:]:
        key, path = a.split("=", 1)
        listed = None
        if "@" in key:
            key, size = key.rsplit("@", 1)
            listed = int(size)
        extra[key] = (path, listed)
    BUCKET = Bucket(name, n, extra)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
