#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, compiles a consumer against
# it through pkg-config, runs it, and checks that libcollguard.so exports
# only cg_ symbols.
set -euo pipefail
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
cmake --install "$build" --prefix "$dest" >/dev/null
cat >"$dest/consumer.c" <<'C'
#include <collguard/collguard.h>
#include <stdio.h>
int main(void)
{
    cg_ctx_h ctx;
    cg_governor_snapshot_t s;
    if (cg_ctx_create(NULL, &ctx) != CG_OK || cg_ctx_governor_snapshot(ctx, &s) != CG_OK) {
        fprintf(stderr, "consumer: %s\n", cg_last_error());
        return 1;
    }
    printf("collguard %s: budget %llu bytes\n", cg_version(), (unsigned long long)s.budget_bytes);
    cg_ctx_destroy(ctx);
    return 0;
}
C
pc=$(find "$dest" -name collguard.pc -printf '%h')
export PKG_CONFIG_PATH=$pc
san=""
# A sanitizer build's library needs the consumer built the same way. (grep
# reads all of ldd's output: with -q it could exit first, and the SIGPIPE
# that ldd then gets fails the pipeline under pipefail.)
if ldd "$(pkg-config --variable=libdir collguard)/libcollguard.so" | grep libasan >/dev/null; then
  san="-fsanitize=address,undefined"
fi
cc -std=c11 -Wall -Wextra -Werror $san "$dest/consumer.c" $(pkg-config --cflags --libs collguard) -o "$dest/consumer"
LD_LIBRARY_PATH=$(pkg-config --variable=libdir collguard) "$dest/consumer"
lib=$(pkg-config --variable=libdir collguard)/libcollguard.so
other=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^cg_' || true)
if [ -n "$other" ]; then echo "libcollguard.so exports non-cg_ symbols:"; echo "$other"; exit 1; fi
echo "install ok: headers, library, pkg-config; only cg_ symbols exported"
