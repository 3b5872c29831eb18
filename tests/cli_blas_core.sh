#!/usr/bin/env bash
# zbpp train's BLAS kernel choice end to end: when OpenBLAS chose kernels below the CPU's best
# (faked with ZBPP_TEST_BLAS_CHOSE, as on a CPU whose model a VM hides) and the user set no
# OPENBLAS_CORETYPE, zbpp re-executes itself with the best one, and the run header names the
# kernel that really ran; an OPENBLAS_CORETYPE the user set is never overridden; when OpenBLAS
# does not take zbpp's setting, a one-line warning says so even with --quiet. --precision bf16 on
# the CPU is refused with one line giving the reason.
# usage: cli_blas_core.sh <zbpp binary> <source dir>
set -u
ZBPP=$(readlink -f "$1")
SRC=$(readlink -f "$2")
TMP=$(mktemp -d /tmp/zbpp_cli_blas_core.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
RUN=(train --layers 1 --heads 2 --channels 32 --seq 16 --batch 2 --steps 1
     --text "$SRC/data/demo_corpus.txt")
CLEAN=(env -u OPENBLAS_CORETYPE -u ZBPP_BLAS_CORE_SET -u ZBPP_TEST_BLAS_CHOSE)

# the header names the kernel and the CPU's features with --verbose; the report always
"${CLEAN[@]}" "$ZBPP" "${RUN[@]}" --verbose >"$TMP/out" 2>"$TMP/err" || fail "plain run: $(cat "$TMP/err")"
grep -q '^zbpp train: CPU kernels: ' "$TMP/err" || fail "no kernel line: $(cat "$TMP/err")"
grep -q '^zbpp train: CPU features: ' "$TMP/err" || fail "no features line: $(cat "$TMP/err")"
grep -q '^CPU kernels: ' "$TMP/out" || fail "the report does not name the kernel: $(cat "$TMP/out")"
if ! grep -q 'CPU kernels: OpenBLAS' "$TMP/err"; then
  echo "not OpenBLAS on x86-64: nothing to choose"
  exit 77
fi
# the kernel OpenBLAS itself would run, and the best for this CPU (what zbpp would set)
"${CLEAN[@]}" ZBPP_TEST_BLAS_CHOSE=Prescott "$ZBPP" "${RUN[@]}" --verbose >"$TMP/out" 2>"$TMP/err" \
  || fail "run with a faked Prescott choice: $(cat "$TMP/err")"
best=$(sed -n 's/.*zbpp set OPENBLAS_CORETYPE=\([A-Za-z0-9]*\)).*/\1/p' "$TMP/err")
if grep -q 'best this OpenBLAS has' "$TMP/err"; then
  echo "this CPU's best kernel is Prescott: the re-execution cannot be shown"
else
  [ -n "$best" ] || fail "no re-execution after a faked Prescott choice: $(cat "$TMP/err")"
  grep -q "CPU kernels: OpenBLAS $best (OpenBLAS chose Prescott" "$TMP/err" \
    || fail "the header does not name the kernel set: $(cat "$TMP/err")"
  grep -q "BLAS OpenBLAS $best;" "$TMP/err" || fail "the library does not run $best: $(cat "$TMP/err")"
  grep -q '^trained steps 1..1' "$TMP/out" || fail "the re-executed run did not train"
  grep -q "^CPU kernels: OpenBLAS $best " "$TMP/out" || fail "the report does not name $best: $(cat "$TMP/out")"
fi

# a user's OPENBLAS_CORETYPE is kept, even when below the CPU's best
"${CLEAN[@]}" OPENBLAS_CORETYPE=Prescott ZBPP_TEST_BLAS_CHOSE=Prescott "$ZBPP" "${RUN[@]}" --verbose \
  >"$TMP/out" 2>"$TMP/err" || fail "run with the user's Prescott: $(cat "$TMP/err")"
grep -q 'CPU kernels: OpenBLAS Prescott (OPENBLAS_CORETYPE=Prescott set by the user' "$TMP/err" \
  || fail "the user's setting is not reported as such: $(cat "$TMP/err")"
grep -q 'BLAS OpenBLAS Prescott;' "$TMP/err" || fail "the user's Prescott was overridden: $(cat "$TMP/err")"
grep -q 'zbpp set' "$TMP/err" && fail "zbpp set a kernel over the user's: $(cat "$TMP/err")"

# zbpp's setting that OpenBLAS did not take: one warning line, even with --quiet
"${CLEAN[@]}" OPENBLAS_CORETYPE=NoSuchKernel ZBPP_BLAS_CORE_SET='Prescott>NoSuchKernel' "$ZBPP" \
  "${RUN[@]}" --quiet >"$TMP/out" 2>"$TMP/err" || fail "run with a kernel OpenBLAS lacks: $(cat "$TMP/err")"
[ "$(grep -c '^zbpp train: CPU kernels: warning: ' "$TMP/err")" -eq 1 ] \
  || fail "no one-line warning for a kernel OpenBLAS did not take: $(cat "$TMP/err")"
grep -q 'did not take OPENBLAS_CORETYPE=NoSuchKernel' "$TMP/err" || fail "warning lacks the why: $(cat "$TMP/err")"

# bf16 on the CPU: one line, exit 2, the reason (on a CPU without the instructions, that one;
# where it runs, tests/cli_cpu_bf16.sh checks it)
if "$ZBPP" "${RUN[@]}" --precision bf16 >/dev/null 2>&1; then
  echo "cli_blas_core: bf16 runs on this CPU (tests/cli_cpu_bf16.sh checks it)"
else
  "$ZBPP" "${RUN[@]}" --precision bf16 >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "--precision bf16 on the CPU: exit $rc, want 2"
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "--precision bf16: not one stderr line: $(cat "$TMP/err")"
  grep -q -- '--precision bf16 on the CPU: ' "$TMP/err" || fail "bf16 refusal: $(cat "$TMP/err")"
  if ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then
    grep -q 'this CPU has no AVX512-BF16 or AMX-BF16 instructions' "$TMP/err" \
      || fail "bf16 refusal does not name the missing instructions: $(cat "$TMP/err")"
  fi
fi

[ "$fails" -eq 0 ] && echo "cli_blas_core: all passed"
[ "$fails" -eq 0 ]
