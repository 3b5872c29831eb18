#!/usr/bin/env bash
# Ctrl-C during zbpp train, with real signals: SIGINT stops after the step in progress, saves
# --save and exits 130 (SIGTERM: 143), single process and pipeline threads; the checkpoint
# resumes to the same bytes as an uninterrupted run; a second signal exits at once (130) and
# leaves no temp or partial file (what --save names is absent or a complete checkpoint).
# usage: cli_signal.sh <zbpp binary> <source dir>
set -u
ZBPP=$1
SRC=$2
TMP=$(mktemp -d /tmp/zbpp_cli_signal.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
COMMON=(--layers 2 --heads 2 --channels 32 --seq 16 --batch 4 --lr-schedule constant
        --text "$SRC/data/demo_corpus.txt")

# wait_for <file> <pattern>: until a line matches (at most ~60 s)
wait_for() {
  for _ in $(seq 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# watchdog <pid>: a run that ignores its signals is killed after 120 s (the test then fails on
# its exit status instead of hanging until ctest's timeout)
watchdog() {
  (sleep 120; kill -KILL "$1" 2>/dev/null) >/dev/null 2>&1 &
  WD=$!
}

# interrupt <signal> <want exit> <label> <extra args...>: run, signal after step 3, check
interrupt() {
  local sig=$1 want=$2 label=$3
  shift 3
  rm -f "$TMP/ck" "$TMP/err" # a fresh log: the last run's lines must not trigger the signal
  "$ZBPP" train "${COMMON[@]}" --steps 1000000 --save "$TMP/ck" "$@" >"$TMP/out" 2>"$TMP/err" &
  local pid=$!
  watchdog "$pid"
  wait_for "$TMP/err" '^step 3/' || fail "$label: no progress: $(cat "$TMP/err")"
  kill -"$sig" "$pid"
  wait "$pid"
  local rc=$?
  kill "$WD" 2>/dev/null
  [ "$rc" -eq "$want" ] || fail "$label: exit $rc after SIG$sig (want $want): $(tail -2 "$TMP/err")"
  grep -q "^interrupted after step [0-9]* of 1000000$" "$TMP/out" ||
    fail "$label: no 'interrupted' line: $(cat "$TMP/out")"
  grep -q "^saved $TMP/ck$" "$TMP/out" || fail "$label: checkpoint not reported saved"
  ls "$TMP" | grep -q '\.tmp\.' && fail "$label: a temp file was left"
  # resume to two steps past the stop == a straight run to there, byte for byte
  local k
  k=$(sed -n 's/^interrupted after step \([0-9]*\) of.*/\1/p' "$TMP/out")
  [ -n "$k" ] || return
  "$ZBPP" train --resume "$TMP/ck" --text "$SRC/data/demo_corpus.txt" --steps $((k + 2)) \
    --quiet --save "$TMP/ck" "$@" || fail "$label: resume failed"
  "$ZBPP" train "${COMMON[@]}" --steps $((k + 2)) --quiet --save "$TMP/straight" "$@" ||
    fail "$label: straight run failed"
  cmp -s "$TMP/ck" "$TMP/straight" || fail "$label: resumed checkpoint differs from a straight run"
  echo "ok: $label: stopped at step $k, exit $rc, resumes bit-exactly"
}
interrupt INT 130 "SIGINT, one process"
interrupt TERM 143 "SIGTERM, one process"
interrupt INT 130 "SIGINT, --ranks 2 threads" --ranks 2 --schedule zb-h1

# a second signal: out at once. A checkpoint written every step by a bigger model makes it
# likely to land inside a save; whatever it interrupts, no temp file, and --save is absent or
# a whole checkpoint (it resumes).
BIG=(--layers 4 --heads 4 --channels 256 --seq 16 --batch 4 --lr-schedule constant
     --text "$SRC/data/demo_corpus.txt")
for try in 1 2 3; do
  rm -f "$TMP/big" "$TMP/err"
  "$ZBPP" train "${BIG[@]}" --steps 1000000 --save "$TMP/big" --save-every 1 >"$TMP/out" \
    2>"$TMP/err" &
  pid=$!
  watchdog "$pid"
  wait_for "$TMP/err" '^step 2/' || fail "second signal: no progress"
  kill -INT "$pid"
  sleep 0.0$try
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  kill "$WD" 2>/dev/null
  [ "$rc" -eq 130 ] || fail "second signal (try $try): exit $rc (want 130)"
  ls "$TMP" | grep -q '\.tmp\.' && fail "second signal (try $try): a temp file was left: $(ls "$TMP")"
  if [ -e "$TMP/big" ]; then
    "$ZBPP" train --resume "$TMP/big" --text "$SRC/data/demo_corpus.txt" --steps 0 --quiet \
      2>"$TMP/rerr" >/dev/null
    # --steps 0 below the checkpoint's step is refused as a setting, never as a bad file
    grep -qiE "truncated|format|corrupt|magic" "$TMP/rerr" &&
      fail "second signal (try $try): a partial checkpoint: $(cat "$TMP/rerr")"
  fi
done
echo "ok: a second SIGINT exits 130 at once, no temp or partial file"

# a signal during the start-up (a large model, checkpoint or corpus: here a delay on demand)
# ends the run at once with one line, nothing trained or saved, instead of after step 1
for sig in TERM INT; do
  rm -f "$TMP/ck" "$TMP/err"
  start=$(date +%s%N)
  ZBPP_TEST_STARTUP_DELAY_MS=20000 "$ZBPP" train "${COMMON[@]}" --steps 5 --save "$TMP/ck" \
    >"$TMP/out" 2>"$TMP/err" &
  pid=$!
  watchdog "$pid"
  sleep 0.5
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  kill "$WD" 2>/dev/null
  ms=$((($(date +%s%N) - start) / 1000000))
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  [ "$rc" -eq "$want" ] || fail "SIG$sig in start-up: exit $rc (want $want)"
  [ "$ms" -lt 10000 ] || fail "SIG$sig in start-up: took $ms ms (the start-up had 20 s left)"
  grep -q "interrupted during start-up: nothing trained, nothing saved" "$TMP/err" ||
    fail "SIG$sig in start-up: no line saying so: $(cat "$TMP/err")"
  [ -e "$TMP/ck" ] && fail "SIG$sig in start-up: --save was written"
  grep -q "^step " "$TMP/err" && fail "SIG$sig in start-up: a step ran"
done
echo "ok: a signal during the start-up ends the run at once, nothing trained or saved"

[ "$fails" -eq 0 ] && echo "cli_signal: all passed"
exit $((fails > 0))
