# SPDX-License-Identifier: Apache-2.0
"""The fault matrix's verdicts on recorded ranks (no namespaces needed):
a survivor that UCX's TCP double completion aborted is KNOWN, not failed,
only on the UCX transport, only for that assertion with TCP's progress in
its backtrace; a survivor that reported nothing otherwise fails the case.
The log lines are those of rank 1 in CI's netns_cut run of 2026-12-06.
usage: test_matrix_verdicts.py
"""
import re
import sys

import matrix

ABORT = [
    "CGNT step t=15634669197945 rank 1 step 1 op allreduce",
    "[cgnt-host1:12913:0:12935]   uct_iface.h:884  Assertion `comp->count > "
    "0' failed: comp=0x7fed0000ca98 (ucs_empty_function_do_assert_void) "
    "count=0 status=-80",
    "==== backtrace (tid:  12935) ====",
    " 0  /lib/x86_64-linux-gnu/libucs.so.0(ucs_handle_error+0x2dc) "
    "[0x7fed106bfe9c]",
    " 5  /lib/x86_64-linux-gnu/libucs.so.0(ucs_event_set_wait+0xe1) "
    "[0x7fed106c89c1]",
    " 6  /lib/x86_64-linux-gnu/libuct.so.0(uct_tcp_iface_progress+0x7b) "
    "[0x7fed1024629b]",
    " 7  /lib/x86_64-linux-gnu/libucp.so.0(ucp_worker_progress+0x72) "
    "[0x7fed1073def2]",
]
OTHER_ASSERT = [
    "[cgnt-host1:1:0:2]      tcp_ep.c:739  Assertion `hdr->length <= "
    "(iface->config.rx_seg_size - sizeof(uct_tcp_am_hdr_t))' failed",
    " 6  /lib/x86_64-linux-gnu/libuct.so.0(uct_tcp_iface_progress+0x7b) "
    "[0x7fed1024629b]",
]
T0 = 1000


class FakeRank:
    def __init__(self, rank, lines, error_ms=None):
        self.rank, self.lines = rank, lines
        self.error_ms = error_ms

    def grep(self, pattern):
        return [l for l in self.lines if re.search(pattern, l)]

    def event(self, kind):
        if kind == "error" and self.error_ms is not None:
            return ("error", T0 + int(self.error_ms * 1e6),
                    "allreduce: send of 65536 bytes to rank 1 failed")
        return None


class FakeJob:
    def __init__(self, ranks):
        self.ranks = ranks

    def log_tail(self):
        return "\n".join("  [%d] %s" % (r.rank, l)
                         for r in self.ranks for l in r.lines[-3:])


def verdict(transport, lines):
    """(failed, known) for a job whose rank 0 erred at once and whose
    rank 1 left lines and no error."""
    del matrix.FAILS[:]
    del matrix.KNOWN[:]
    ranks = [FakeRank(0, ["CGNT error ..."], error_ms=1),
             FakeRank(1, lines)]
    matrix.expect_failure("case", transport, FakeJob(ranks), T0, 3, None,
                          codes_leaks=([3, -6], []))
    return bool(matrix.FAILS), bool(matrix.KNOWN)


def main():
    cases = [
        ("UCX's TCP double completion on ucx", "ucx", ABORT, (False, True)),
        ("the same lines on sockets", "socket", ABORT, (True, False)),
        ("another UCX assertion", "ucx", OTHER_ASSERT, (True, False)),
        ("the assertion without TCP's progress", "ucx",
         [l for l in ABORT if "uct_tcp_iface_progress" not in l],
         (True, False)),
        ("a rank silent without a crash", "ucx", ABORT[:1], (True, False)),
    ]
    bad = 0
    for name, transport, lines, want in cases:
        got = verdict(transport, lines)
        ok = got == want
        bad += not ok
        print("%s %s: failed=%s known=%s (want failed=%s known=%s)"
              % ("ok  " if ok else "BAD ", name, got[0], got[1], want[0],
                 want[1]), flush=True)
    print("%d of %d verdicts as expected" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
