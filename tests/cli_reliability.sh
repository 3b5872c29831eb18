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
for _ in $(seq 50); do kill -0 $reader 2>/dev/null || break; sleep 0.1; done
kill $reader 2>/dev/null  # still waiting: nothing was written into the FIFO
wait $reader 2>/dev/null
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

# ---- defect 8 (sharded): orphan shards and temps of killed saves go at the next commit ----
SH=(--seq 16 --batch 4 --text "$SRC/data/demo_corpus.txt" --quiet --ranks 2 --checkpoint-format sharded)
"$ZBPP" train "${SH[@]}" --layers 2 --heads 2 --channels 32 --steps 2 --save sc >/dev/null 2>&1 ||
  fail "sharded save failed"
touch sc.1-deadbeef.rank0 sc.2-0badc0de.rank1 sc.1-deadbeef.rank1.tmp.999999999 sc.99-deadbeef.rank0 \
      sc.1-deadbeef.rank0x
"$ZBPP" train "${SH[@]}" --steps 3 --save sc --resume sc >/dev/null 2>"$T/err" || fail "resume: $(cat "$T/err")"
for f in sc.1-deadbeef.rank0 sc.2-0badc0de.rank1 sc.1-deadbeef.rank1.tmp.999999999; do
  [ -e "$f" ] && fail "orphan $f left after the next sharded save"
done
[ -e sc.99-deadbeef.rank0 ] || fail "a later step's shard (maybe a save in progress) was removed"
[ -e sc.1-deadbeef.rank0x ] || fail "a file not named like a shard was removed"
[ "$(ls sc.3-*.rank* | wc -l)" -eq 2 ] || fail "the live checkpoint lost a shard"

# ---- defect 2: the single-file checkpoint header is checksummed ----
"$ZBPP" train "${TINY[@]}" --steps 2 --save ck1 >/dev/null 2>&1 || fail "save ck1"
flip() { python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[int(sys.argv[2])]^=0x40; open(sys.argv[3],"wb").write(b)' "$@"; }
flip ck1 $((24 * 8 + 2)) ck_lr    # lr
flip ck1 $((10 * 8)) ck_step      # steps done
flip ck1 $((17 * 8)) ck_seed      # seed
for f in ck_lr ck_step ck_seed; do
  expect_error 1 "header checksum" "$ZBPP" train --steps 4 --quiet --resume $f
done

# ---- defect 11: a bad value read from a checkpoint is the file's fault, not a flag's ----
python3 - ck1 ck_batch <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
h = list(struct.unpack_from("<64Q", b, 0))
h[12] = (-4) & (2**64 - 1)          # batch
h[34] = 0
x = 0xCBF29CE484222325
for byte in struct.pack("<64Q", *h):
    x = ((x ^ byte) * 0x100000001B3) & (2**64 - 1)
h[34] = x                           # a valid header checksum: only the value is wrong
struct.pack_into("<64Q", b, 0, *h)
open(sys.argv[2], "wb").write(b)
PY
expect_error 1 "ck_batch holds an invalid setting" "$ZBPP" train --steps 4 --quiet --resume ck_batch

# ---- defect 3: a shard truncated during training gives an error, not SIGBUS ----
python3 - shard.bin <<'PY'
import struct, sys
toks = [(i * 7919) % 256 for i in range(400000)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack(f"<{len(toks)}H", *toks))
PY
timeout 120 "$ZBPP" train --layers 1 --heads 2 --channels 16 --seq 16 --batch 4 --vocab 257 \
  --data shard.bin --steps 100000000 --no-shuffle --quiet >/dev/null 2>"$T/bus_err" & trainer=$!
sleep 1.5
truncate -s 1024 shard.bin
wait $trainer
rc=$?
[ "$rc" -eq 1 ] || fail "truncated shard during training: exit $rc (want 1): $(head -c 300 "$T/bus_err")"
grep -q "changed on disk" "$T/bus_err" || fail "truncated shard: message: $(cat "$T/bus_err")"

# ---- defect 10: a diverged run stops, exits non-zero and saves nothing ----
expect_error 1 "training diverged" "$ZBPP" train "${TINY[@]}" --lr 1e10 --steps 40 --save dv
[ -e dv ] && fail "a diverged run saved its state"
expect_error 1 "training diverged" "$ZBPP" train "${TINY[@]}" --lr 1e10 --steps 40 --ranks 2 --save dv2
[ -e dv2 ] && fail "a diverged pipeline run saved its state"

# ---- defect 11: messages ----
echo "hello" >short.txt
expect_error 2 "text file short.txt is too short" "$ZBPP" train --layers 1 --heads 2 --channels 16 \
  --seq 16 --batch 4 --quiet --steps 1 --text short.txt
printf '0,1e308,1,1\n1,1,1,1\n' >huge.csv
expect_error 2 "too large" "$ZBPP" schedule -s 1f1b -p 2 -m 4 --format json --cost-file huge.csv
expect_error 2 "too large" "$ZBPP" schedule -s 1f1b -p 2 -m 4 --cost-file huge.csv

# ---- defect 4: under `ulimit -v` a run fails cleanly instead of spinning in OpenBLAS ----
if ldd "$ZBPP" 2>/dev/null | grep -q libasan; then
  echo "note: sanitizer build (ASan reserves terabytes of address space): ulimit -v cases skipped"
else
  for lim in 150000 400000 650000; do
    for r in 1 2; do
      (ulimit -v $lim; timeout 60 "$ZBPP" train "${TINY[@]}" --steps 2 --ranks $r >/dev/null 2>"$T/ul_err")
      rc=$?
      if [ "$rc" -ne 0 ] && { [ "$rc" -ne 1 ] || ! grep -q "address space\|cannot allocate" "$T/ul_err"; }; then
        fail "ulimit -v $lim --ranks $r: exit $rc: $(head -c 300 "$T/ul_err")"
      fi
    done
  done
  (ulimit -v 150000; timeout 60 "$ZBPP" train "${TINY[@]}" --steps 2 >/dev/null 2>"$T/ul_err")
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "not enough address space" "$T/ul_err" ||
    fail "ulimit -v 150000: exit $rc, want 1 with a message: $(head -c 300 "$T/ul_err")"
fi

if [ "$fails" -ne 0 ]; then echo "cli_reliability: $fails failure(s)"; exit 1; fi
echo "cli_reliability: PASS"
