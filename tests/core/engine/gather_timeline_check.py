# SPDX-License-Identifier: Apache-2.0
# Checks the fused allgathers in a collguard timeline (tests/core
# test_hvd_gather.c), with timeline_check.py's parser:
#   gather_timeline_check.py FILE N PREFIX GROUPS
#       N tensors named PREFIX* each negotiated (NEGOTIATE_ALLGATHER) and
#       gathered (ALLGATHER holding MEMCPY_IN_FUSION_BUFFER,
#       COLLGUARD_ALLGATHER and MEMCPY_OUT_FUSION_BUFFER), in exactly
#       GROUPS distinct COLLGUARD_ALLGATHER spans (the same end timestamp
#       and begins within 1 us for the tensors of one fused collective: the
#       writer may start one tensor's span a microsecond late, as
#       integration/tools/timeline_trace.py's _fuse explains)
# Exits 1 with the reason on stderr when a check fails.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "observe"))
from timeline_check import fail, load, spans, tensors  # noqa: E402


def main():
    path, n, prefix, groups = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                               int(sys.argv[4]))
    events = load(path)
    mine = {p: s for p, s in tensors(events).items() if s.startswith(prefix)}
    if len(mine) != n:
        fail("%d tensor processes named %s*, expected %d"
             % (len(mine), prefix, n))
    colls = {}
    for pid, name in sorted(mine.items()):
        sp = {s[0]: s for s in spans(events, pid)}
        for want in ("NEGOTIATE_ALLGATHER", "ALLGATHER",
                     "MEMCPY_IN_FUSION_BUFFER", "COLLGUARD_ALLGATHER",
                     "MEMCPY_OUT_FUSION_BUFFER"):
            if want not in sp:
                fail("%s: no %s span (has %s)" % (name, want, sorted(sp)))
        c = sp["COLLGUARD_ALLGATHER"]
        if c[3] != 1:
            fail("%s: COLLGUARD_ALLGATHER at depth %d, not inside ALLGATHER"
                 % (name, c[3]))
        colls.setdefault((c[1], c[2]), []).append(name)
    merged = {}
    for (begin, end), names in sorted(colls.items(), key=lambda kv:
                                      (kv[0][1], kv[0][0])):
        key = next((k for k in merged if k[1] == end and
                    abs(begin - k[0]) <= 1), (begin, end))
        merged.setdefault(key, []).extend(names)
    colls = merged
    if len(colls) != groups:
        fail("%d distinct COLLGUARD_ALLGATHER spans for %d tensors, expected "
             "%d: %r" % (len(colls), n, groups,
                         sorted((k, len(v)) for k, v in colls.items())[:6]))
    print("gather ok: %d tensors in %d collective spans of %s tensors"
          % (n, groups, sorted(len(v) for v in colls.values())))


if __name__ == "__main__":
    main()
