#!/bin/sh
# The node that tap starts each test file with (scripts/test.ts points tap at this file).
# tap adds @tapjs/processinfo's loader to every test process, in its arguments and in
# NODE_OPTIONS, for coverage and `--changed`, neither of which this suite uses; on Node 20
# its hooks run on a second thread that every module load waits on, about 1.2 CPU-seconds
# a test process. This drops it and runs the real node ($TEST_NODE).
for arg; do
  shift
  case "$arg" in
    --import=*@tapjs/processinfo*) ;;
    *) set -- "$@" "$arg" ;;
  esac
done
NODE_OPTIONS=$(printf '%s' "${NODE_OPTIONS:-}" | sed -E 's#"?--import=[^ "]*@tapjs/processinfo[^ "]*"?##g')
export NODE_OPTIONS
exec "$TEST_NODE" "$@"
