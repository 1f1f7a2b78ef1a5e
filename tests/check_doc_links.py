#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a relative link in README.md or docs/*.md does not resolve:
the file (or folder) must exist, and a #anchor must match a heading of
the target Markdown file under GitHub's slug rules (lowercase, markup
dropped, punctuation other than - and _ dropped, spaces to -, a repeated
slug gets -1, -2, ...). http(s) and mailto links are not checked. Also
fails when README.md is longer than MAX_README_LINES lines.
usage: check_doc_links.py [REPO_ROOT]   (default: the folder above tests/)"""
import glob
import os
import re
import sys

MAX_README_LINES = 300

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the text may hold one level of [...]
# (an image inside a link) and `code`.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?"
                  r"(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: text
    t = re.sub(r"<[^>]+>", "", t)                             # inline HTML
    t = t.replace("`", "").replace("*", "")
    t = t.strip().lower()
    t = "".join(c for c in t if c.isalnum() or c in " -_")
    return t.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read()):
                m = HEADING.match(line)
                if not m:
                    continue
                s = slug(m.group(2))
                k = seen.get(s, 0)
                seen[s] = k + 1
                found.add(s if k == 0 else "%s-%d" % (s, k))
        cache[path] = found
    return cache[path]


def check(root):
    errors = []
    files = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "*.md")))
    for src in files:
        rel_src = os.path.relpath(src, root)
        with open(src, encoding="utf-8") as f:
            text = f.read()
        for n, line in prose_lines(text):
            for m in LINK.finditer(INLINE_CODE.sub("", line)):
                target = m.group(1)
                if re.match(r"(?i)(https?:|mailto:)", target) or not target:
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(
                    os.path.join(os.path.dirname(src), path)) if path else src
                where = "%s:%d: %s" % (rel_src, n, target)
                if not os.path.exists(dest):
                    errors.append("%s: no such file %s"
                                  % (where, os.path.relpath(dest, root)))
                    continue
                if not anchor:
                    continue
                if not dest.endswith(".md") or os.path.isdir(dest):
                    errors.append("%s: an anchor into a file that is not "
                                  "Markdown" % where)
                elif anchor not in anchors(dest):
                    errors.append("%s: no heading with anchor #%s in %s"
                                  % (where, anchor,
                                     os.path.relpath(dest, root)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        lines = len(f.read().splitlines())
    if lines > MAX_README_LINES:
        errors.append("README.md: %d lines, more than %d (move reference "
                      "text to docs/)" % (lines, MAX_README_LINES))
    return files, errors


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    files, errors = check(os.path.abspath(root))
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print("%d broken link(s) or limit(s) in %d files"
              % (len(errors), len(files)), file=sys.stderr)
        return 1
    print("links of %d files resolve" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
