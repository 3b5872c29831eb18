#!/usr/bin/env bash
# After ctest: one line naming every test that did not run (skipped: no GPU, no torch, no
# mpirun, ...), so a "100% tests passed" never hides them. Reads ctest's output.
# usage: scripts/test_summary.sh ctest.log
set -u
log=${1:?usage: test_summary.sh ctest.log}
# ctest lists them after "The following tests did not run:" as "  12 - name (Skipped)"
skipped=$(sed -n 's/^[[:space:]]*[0-9]\{1,\} - \([^ ]*\) (\(Skipped\|Not Run\|Disabled\)).*/\1/p' "$log")
total=$(sed -n 's/.*tests passed, [0-9]* tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
if [ -z "$skipped" ]; then
  echo "test summary: all ${total:-?} tests ran"
else
  n=$(wc -w <<<"$skipped")
  echo "test summary: $n of ${total:-?} tests were SKIPPED (counted as passed above, they did not run):"
  echo "  $(tr '\n' ' ' <<<"$skipped")"
  echo "  (each says why in its own output: ctest -R NAME -V)"
fi
