# SPDX-License-Identifier: Apache-2.0
# Scrapes collguard's metrics endpoint with Python's urllib and parses the
# body with prom_check's strict parser; checks that only GET /metrics is
# answered (POST 405 with Allow: GET, another path 404) and, optionally,
# series values (as prom_check.py's --expect) and that a curl body of the
# same endpoint parses too (together with this one: same families, TYPEs).
# Usage: prom_scrape.py URL [--curl-body FILE] [--expect SERIES=VALUE ...]
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prom_check  # noqa: E402


def status_of(req):
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def main(argv):
    if not argv:
        sys.exit("usage: prom_scrape.py URL [--curl-body FILE] "
                 "[--expect SERIES=VALUE ...]")
    url, rest = argv[0], argv[1:]
    expects, curl_body = [], None
    if "--expect" in rest:
        i = rest.index("--expect")
        rest, expects = rest[:i], rest[i + 1:]
    if rest[:1] == ["--curl-body"]:
        curl_body = rest[1]
    with urllib.request.urlopen(url, timeout=10) as r:
        if r.status != 200:
            sys.exit(f"{url}: status {r.status}")
        ctype = r.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            sys.exit(f"{url}: Content-Type {ctype!r}")
        body = r.read().decode("utf-8")
    series = prom_check.check_sources([(url, body)])
    if curl_body is not None:
        with open(curl_body) as f:
            text = f.read()
        # Separately (the two scrapes hold the same series).
        prom_check.check_sources([(curl_body, text)])
        if {k[0] for k in prom_check.check_sources([(curl_body, text)])} != \
           {k[0] for k in series}:
            sys.exit("curl's body and urllib's have different series names")
    code, headers = status_of(urllib.request.Request(url, data=b"x=1",
                                                     method="POST"))
    if code != 405 or headers.get("Allow") != "GET":
        sys.exit(f"POST {url}: {code} (Allow {headers.get('Allow')!r}), "
                 "want 405 with Allow: GET")
    other = url.rsplit("/", 1)[0] + "/other"
    code, _ = status_of(urllib.request.Request(other))
    if code != 404:
        sys.exit(f"GET {other}: {code}, want 404")
    prom_check.expect(series, expects)
    print(f"{url}: {len(series)} series, valid Prometheus text; POST 405, "
          "other paths 404")


if __name__ == "__main__":
    main(sys.argv[1:])
