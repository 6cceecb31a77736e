#!/usr/bin/env bash
# A client wrapper for scripts/chaos.sh (STATEPACT_CHAOS_CLIENT_WRAPPER) that crashes the client
# with SIGSEGV after a second of work, as a library bug would.
"$@" &
pid=$!
sleep 1
kill -SEGV "$pid" 2>/dev/null
wait "$pid"
