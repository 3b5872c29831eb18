#!/usr/bin/env bash
# Reliability regressions (issue 16): what hand-made files and faults found from outside.
# Each block names its defect; each failed before its fix.
# usage: cli_reliability.sh <zbpp binary> <source dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "${2:-.}")
T=$(mktemp -d "${TMPDIR:-/tmp}/zbpp-rel.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
fails=0
TINY=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --text "$SRC/data/demo_corpus.txt"
      --quiet)

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error <exit code> <text in message> <cmd...>: one stderr line, that exit code, no hang
expect_error() {
  local want=$1 needle=$2
  shift 2
  timeout 60 "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then fail "exit $rc (want $want) for: $*: $(head -c 400 "$T/err")"; return; fi
  if [ "$(wc -l <"$T/err")" -ne 1 ]; then fail "not one stderr line for: $*: $(cat "$T/err")"; return; fi
  grep -qF -- "$needle" "$T/err" || fail "message lacks '$needle' for: $*: $(cat "$T/err")"
}

SCHED=("$ZBPP" schedule -s 1f1b -p 2 -m 4 --format json)

# ---- defect 1: output paths must not replace devices, FIFOs or symlinks ----
mkfifo fifo_out
cat fifo_out >fifo_seen & reader=$!
sleep 0.2
timeout 20 "${SCHED[@]}" -o fifo_out >/dev/null 2>"$T/err" || fail "write into a read FIFO: $(cat "$T/err")"
wait $reader
[ -p fifo_out ] || fail "-o FIFO replaced the FIFO by a regular file"
grep -q '"schedule"\|"ranks"\|{' fifo_seen || fail "the FIFO's reader got nothing"
expect_error 1 "nothing reads it" "${SCHED[@]}" -o fifo_out
if mknod mynull c 1 3 2>/dev/null; then
  "${SCHED[@]}" -o mynull || fail "-o char device failed"
  [ -c mynull ] || fail "-o mynull replaced the device node by a regular file"
  "$ZBPP" train "${TINY[@]}" --steps 1 --save mynull >/dev/null 2>&1 || fail "--save char device failed"
  [ -c mynull ] || fail "--save mynull replaced the device node"
else
  echo "note: mknod not permitted; device case covered by the FIFO case only"
fi
echo old >target
ln -s target link
"${SCHED[@]}" -o link || fail "-o symlink failed"
[ -L link ] || fail "-o symlink replaced the link"
grep -q old target && fail "-o symlink did not write the file it points to"
ln -s missing dangling
expect_error 1 "symlink to a missing file" "${SCHED[@]}" -o dangling
mkdir adir
expect_error 1 "a directory" "${SCHED[@]}" -o adir

# ---- defect 7: readers must not hang on a FIFO ----
mkfifo fifo_in
expect_error 1 "not a regular file (a FIFO)" "$ZBPP" validate fifo_in
expect_error 1 "not a regular file (a FIFO)" "$ZBPP" train "${TINY[@]}" --steps 1 --resume fifo_in
expect_error 1 "not a regular file (a FIFO)" "$ZBPP" train --layers 2 --heads 2 --channels 32 \
  --seq 16 --batch 4 --quiet --steps 1 --data fifo_in
expect_error 1 "not a regular file (a FIFO)" "$ZBPP" train --layers 2 --heads 2 --channels 32 \
  --seq 16 --batch 4 --quiet --steps 1 --text fifo_in
expect_error 1 "not a regular file (a FIFO)" "$ZBPP" train --seq 16 --batch 4 --quiet --steps 1 \
  --text "$SRC/data/demo_corpus.txt" --init-from fifo_in

# ---- defect 8: temp files of killed writers are removed by the next save ----
echo junk >ck.tmp.999999999
echo junk >ck.tmp.x7
"$ZBPP" train "${TINY[@]}" --steps 1 --save ck >/dev/null 2>&1 || fail "save with stale temps failed"
[ -e ck.tmp.999999999 ] && fail "stale ck.tmp.<pid> left after the next save"
[ -e ck.tmp.x7 ] || fail "a file that is not ck.tmp.<digits> was removed"

if [ "$fails" -ne 0 ]; then echo "cli_reliability: $fails failure(s)"; exit 1; fi
echo "cli_reliability: PASS"
